/**
 * The device simulator over TLS against the whole service in one process on 127.0.0.1, the
 * gateway serving MQTT over TLS and HTTPS with a certificate of its own CA (as the operator's
 * Secret gateway-tls gives it): mqtts:// and https:// URLs trusting that CA carry every message
 * to core (one device's life, the continuous device, the CLI with --ca); the certificate is
 * checked against `servername` when one is given; a device that does not trust the CA, or checks
 * a name the certificate lacks, fails in the handshake and nothing of it is stored.
 */

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  HttpStatusError,
  postHttp,
  publishMqtt,
  readAllTelemetry,
  registerDevice,
  simulateDevice,
  startContinuousDevice,
  type GatewayTls,
  type ServiceAddresses,
} from '../src/simulator/index.ts';
import { issue, makeCa, secretVolume } from './certificates.ts';
import { API_TOKEN, HOST, startService, waitFor, type Service } from './harness.ts';

const SERVICE_NAME = 'gateway.tenant.svc';
const gatewayCa = makeCa('gateway-ca');
const strangerCa = makeCa('stranger-ca');
const volume = secretVolume();
const work = mkdtempSync(path.join(tmpdir(), 'simulator-tls-'));

let service: Service;

before(async () => {
  const gatewayCert = issue(gatewayCa, 'gateway', HOST, [SERVICE_NAME]);
  volume.write({ 'tls.crt': gatewayCert.cert, 'tls.key': gatewayCert.key, 'ca.crt': gatewayCa.cert });
  service = await startService({ gateway: { tlsDir: volume.dir } });
});
after(async () => {
  await service.close();
  volume.remove();
  rmSync(work, { recursive: true, force: true });
});

/** The service's addresses with the gateway's TLS URLs and `tls`. */
const overTls = (tls?: GatewayTls): ServiceAddresses => ({
  coreUrl: service.coreUrl,
  gatewayMqttUrl: service.gatewayMqttsUrl,
  gatewayHttpUrl: service.gatewayHttpsUrl,
  apiToken: API_TOKEN,
  gatewayTls: tls,
});

test('mqtts:// and https:// trusting the gateway’s CA: every message is read back from core', async () => {
  const report = await simulateDevice(overTls({ ca: gatewayCa.cert }), { deviceId: 'tls-1', messages: 4, timeoutMs: 10_000, pollMs: 20 });
  assert.deepEqual(report.sent, { mqtt: 4, http: 4, total: 8 });
  assert.equal(report.stored, 8);
});

test('the certificate is checked against servername when given: a name it covers passes, another fails', async () => {
  const device = await registerDevice(overTls(), 'tls-name');
  const named = { ca: gatewayCa.cert, servername: SERVICE_NAME };
  assert.equal(await publishMqtt(service.gatewayMqttsUrl, device, [{ n: 1 }], undefined, named), 1);
  assert.match(await postHttp(service.gatewayHttpsUrl, device, { n: 2 }, 'tls-name-2', named), /tls-name-2/);
  const other = { ca: gatewayCa.cert, servername: 'gateway.other.svc' };
  await assert.rejects(publishMqtt(service.gatewayMqttsUrl, device, [{ n: 3 }], undefined, other), /altnames/);
  await assert.rejects(postHttp(service.gatewayHttpsUrl, device, { n: 4 }, undefined, other), (e: NodeJS.ErrnoException) => e.code === 'ERR_TLS_CERT_ALTNAME_INVALID');
  await waitFor(() => [...service.store.rows.values()].filter((r) => r.deviceId === 'tls-name').length >= 2, 'the two messages stored');
  assert.equal((await readAllTelemetry(overTls(), 'tls-name')).length, 2, 'only the messages over a checked name');
});

test('a device that does not trust the gateway’s CA fails in the handshake on both protocols; nothing of it is stored', async () => {
  const device = await registerDevice(overTls(), 'tls-untrusting');
  for (const tls of [undefined, { ca: strangerCa.cert }]) {
    await assert.rejects(publishMqtt(service.gatewayMqttsUrl, device, [{ n: 1 }], undefined, tls), /self[- ]signed|unable to verify/i, `MQTT with ${tls ? 'another CA' : "Node's CAs"}`);
    await assert.rejects(
      postHttp(service.gatewayHttpsUrl, device, { n: 1 }, undefined, tls),
      (e: NodeJS.ErrnoException) => !(e instanceof HttpStatusError) && /SELF_SIGNED|UNABLE_TO_VERIFY/.test(String(e.code)),
      `HTTPS with ${tls ? 'another CA' : "Node's CAs"}`,
    );
  }
  assert.deepEqual(await readAllTelemetry(overTls(), device.id), []);
});

test('a wrong password over TLS is refused as over plaintext', async () => {
  const device = await registerDevice(overTls(), 'tls-wrong');
  const wrong = { id: device.id, password: 'wrong' };
  const tls = { ca: gatewayCa.cert };
  await assert.rejects(publishMqtt(service.gatewayMqttsUrl, wrong, [{ n: 1 }], undefined, tls), /Bad username or password/);
  await assert.rejects(postHttp(service.gatewayHttpsUrl, wrong, { n: 1 }, undefined, tls), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
});

test('the continuous device over mqtts:// and https://: every acknowledged message is stored once; an untrusted CA only fails attempts', async () => {
  const device = await registerDevice(overTls(), 'tls-cont');
  const running = startContinuousDevice(overTls({ ca: gatewayCa.cert, servername: SERVICE_NAME }), device);
  await waitFor(() => ['mqtt', 'http'].every((via) => running.messages.filter((m) => m.ackedAt !== undefined && m.via === via).length >= 5), 'five messages of each protocol acknowledged');
  const messages = await running.stop();
  assert.deepEqual(running.failures, []);
  await waitFor(() => [...service.store.rows.values()].filter((r) => r.deviceId === 'tls-cont').length >= messages.length, 'every message stored');
  assert.deepEqual((await readAllTelemetry(overTls(), 'tls-cont')).map((r) => r.messageId).sort(), messages.map((m) => m.messageId).sort());

  // A handshake failure is not a refusal: the device keeps trying (and would go on once it trusts the CA).
  const doubting = startContinuousDevice(overTls({ ca: strangerCa.cert }), await registerDevice(overTls(), 'tls-cont-untrusting'), { retryDelayMs: 20, attemptTimeoutMs: 2_000 });
  await waitFor(() => ['mqtt', 'http'].every((via) => doubting.failures.filter((f) => f.via === via).length >= 2), 'failed attempts on both protocols');
  assert.ok(doubting.failures.every((f) => /self[- ]signed|unable to verify/i.test(f.error)), JSON.stringify(doubting.failures.slice(0, 2)));
  assert.ok(doubting.messages.every((m) => m.ackedAt === undefined));
  await assert.rejects(doubting.stop(300), /not acknowledged/);
});

test('the CLI: --ca names the CA file for mqtts:// and https:// URLs, --servername the name to check', async () => {
  const caFile = path.join(work, 'ca.crt');
  writeFileSync(caFile, gatewayCa.cert);
  const main = fileURLToPath(new URL('../src/simulator/main.ts', import.meta.url));
  const args = ['--import', 'tsx', main, '--core', service.coreUrl, '--gateway-mqtt', service.gatewayMqttsUrl, '--gateway-http', service.gatewayHttpsUrl, '--token', API_TOKEN, '--messages', '2', '--device', 'tls-cli', '--timeout', '20'];
  const { stdout } = await promisify(execFile)(process.execPath, [...args, '--ca', caFile, '--servername', SERVICE_NAME], { timeout: 60_000 });
  assert.match(stdout, /device tls-cli: sent 4, stored 4/);
  await assert.rejects(promisify(execFile)(process.execPath, [...args.map((a) => (a === 'tls-cli' ? 'tls-cli-2' : a))], { timeout: 60_000 }), (e: { code?: number; stderr?: string }) => e.code === 1 && /self[- ]signed|unable to verify/i.test(String(e.stderr)));
});
