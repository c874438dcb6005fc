/**
 * The gateway's login and limits as devices meet them, over real MQTT and HTTP clients on
 * 127.0.0.1: a repeated login costs core nothing, the client id is the device, devices that
 * connect too often are banned, messages are paced without being dropped, connections are
 * capped, refusals are counted on /metrics, and a fleet logging in at once gets in.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connect as tcpConnect } from 'node:net';
import mqtt from 'mqtt';
import { hashPassword } from '../src/core/passwords.ts';
import { TokenBuckets } from '../src/shared/token-buckets.ts';
import { startHealthServer } from '../src/shared/health.ts';
import { registerDevice, type DeviceCredentials } from '../src/simulator/index.ts';
import { API_TOKEN, HOST, startService, waitFor, type GatewayTestOptions, type Service } from './harness.ts';

let service: Service;
let device: DeviceCredentials;

before(async () => {
  service = await startService({ processing: false });
  device = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-1');
});
after(() => service.close());

const connect = (url: string, username: string, password: string, clientId = username) =>
  mqtt.connectAsync(url, { username, password, clientId, reconnectPeriod: 0, connectTimeout: 3_000 });

const post = (url: string, id: string, password: string, body: unknown = { t: 1 }) =>
  fetch(`${url}/v1/telemetry`, {
    method: 'POST',
    headers: { Authorization: `Basic ${Buffer.from(`${id}:${password}`).toString('base64')}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });

async function withService(gateway: GatewayTestOptions, run: (isolated: Service) => Promise<void>): Promise<void> {
  const isolated = await startService({ processing: false, gateway });
  try {
    await run(isolated);
  } finally {
    await isolated.close();
  }
}

test('a repeated login with the accepted password costs no call to core; the same wrong password is not sent again', async () => {
  const checks = service.deviceChecks();
  for (let i = 0; i < 3; i++) await (await connect(service.gatewayMqttUrl, device.id, device.password)).endAsync();
  assert.equal((await post(service.gatewayHttpUrl, device.id, device.password)).status, 202);
  assert.equal(service.deviceChecks(), checks + 1);
  for (let i = 0; i < 3; i++) await assert.rejects(connect(service.gatewayMqttUrl, device.id, 'wrong'), /Bad username or password/);
  assert.equal((await post(service.gatewayHttpUrl, device.id, 'wrong')).status, 401);
  assert.equal(service.deviceChecks(), checks + 2);
});

test('the MQTT client id must be the device id: no device takes over another\'s session', async () => {
  const other = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-2');
  const victim = await connect(service.gatewayMqttUrl, device.id, device.password);
  let victimClosed = false;
  victim.once('close', () => (victimClosed = true));
  await assert.rejects(connect(service.gatewayMqttUrl, other.id, other.password, device.id), /Not authorized/);
  await assert.rejects(connect(service.gatewayMqttUrl, device.id, device.password, 'mqttjs_random'), /Not authorized/);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(victimClosed, false, 'the device connected stays connected');
  await victim.publishAsync(`telemetry/${device.id}`, '{"still":"here"}', { qos: 1 });
  await victim.endAsync();
  assert.ok(service.gateway.metrics.refusedCount('client_id') >= 2);
});

test('failed logins for one device id: refused with CONNACK 3 and HTTP 429 + Retry-After, without reaching core; the device itself still logs in', async () => {
  await withService({ login: { perDevice: { capacity: 2, perSecond: 0.01 }, perSource: { capacity: 100, perSecond: 100 } } }, async (isolated) => {
    const dev = await registerDevice({ coreUrl: isolated.coreUrl, apiToken: API_TOKEN }, 'dev-x');
    await (await connect(isolated.gatewayMqttUrl, dev.id, dev.password)).endAsync();
    await assert.rejects(connect(isolated.gatewayMqttUrl, dev.id, 'guess-1'), /Bad username or password/);
    await assert.rejects(connect(isolated.gatewayMqttUrl, dev.id, 'guess-2'), /Bad username or password/);
    const checks = isolated.deviceChecks();
    await assert.rejects(connect(isolated.gatewayMqttUrl, dev.id, 'guess-3'), /Server unavailable/);
    const limited = await post(isolated.gatewayHttpUrl, dev.id, 'guess-4');
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    assert.equal(isolated.deviceChecks(), checks, 'no guess reached core');
    await (await connect(isolated.gatewayMqttUrl, dev.id, dev.password)).endAsync();
    assert.equal((await post(isolated.gatewayHttpUrl, dev.id, dev.password)).status, 202);
    assert.equal(isolated.gateway.metrics.refusedCount('rate_limited'), 2);
  });
});

test('a source guessing at a limited device id runs out of tokens, then its connections are closed as they are accepted, before any handshake; other sources are served', async () => {
  await withService({ login: { perDevice: { capacity: 1, perSecond: 0.01 }, perSource: { capacity: 3, perSecond: 0.01 } } }, async (isolated) => {
    const dev = await registerDevice({ coreUrl: isolated.coreUrl, apiToken: API_TOKEN }, 'dev-behind-flood');
    await (await connect(isolated.gatewayMqttUrl, dev.id, dev.password)).endAsync();
    const checks = isolated.deviceChecks();
    await assert.rejects(connect(isolated.gatewayMqttUrl, 'dev-a', 'guess-1'), /Bad username or password/);
    await assert.rejects(connect(isolated.gatewayMqttUrl, 'dev-a', 'guess-2'), /Server unavailable/);
    await assert.rejects(connect(isolated.gatewayMqttUrl, 'dev-a', 'guess-3'), /Server unavailable/);
    /** Whether a TCP connection from `localAddress` that sends nothing is closed by the gateway within 500 ms. */
    const closedAtOnce = async (url: string, localAddress: string) => {
      const socket = tcpConnect({ host: HOST, port: Number(new URL(url).port), localAddress });
      socket.on('error', () => undefined);
      const closed = await Promise.race([new Promise((resolve) => socket.once('close', () => resolve(true))), new Promise((resolve) => setTimeout(resolve, 500, false))]);
      socket.destroy();
      return closed;
    };
    assert.equal(await closedAtOnce(isolated.gatewayMqttUrl, HOST), true, 'MQTT from that address, a known device included');
    await assert.rejects(post(isolated.gatewayHttpUrl, dev.id, dev.password), 'HTTP as well');
    assert.equal(isolated.gateway.metrics.refusedCount('rate_limited'), 4, 'two at login, two at accept');
    assert.equal(isolated.deviceChecks(), checks + 1, 'only the first guess reached core');
    assert.equal(await closedAtOnce(isolated.gatewayMqttUrl, '127.0.0.2'), false, 'a connection from 127.0.0.2 is kept');
  });
});

test('a device that connects too often is banned for a while (CONNACK 3), counted as flapping', async () => {
  await withService({ connectRate: new TokenBuckets({ capacity: 2, perSecond: 0.01, banMs: 60_000 }) }, async (isolated) => {
    const dev = await registerDevice({ coreUrl: isolated.coreUrl, apiToken: API_TOKEN }, 'dev-flap');
    for (let i = 0; i < 2; i++) await (await connect(isolated.gatewayMqttUrl, dev.id, dev.password)).endAsync();
    await assert.rejects(connect(isolated.gatewayMqttUrl, dev.id, dev.password), /Server unavailable/);
    await assert.rejects(connect(isolated.gatewayMqttUrl, dev.id, dev.password), /Server unavailable/);
    assert.equal(isolated.gateway.metrics.refusedCount('flapping'), 2);
    assert.ok(isolated.logs.gateway.lines.some((l) => l.msg === 'mqtt device refused' && /banned for/.test(String(l.reason))));
  });
});

test('a device\'s messages are paced: MQTT waits (every message acknowledged and kept), HTTP waits up to 1 s, else 429 with Retry-After', async () => {
  await withService({ messageRate: new TokenBuckets({ capacity: 2, perSecond: 5 }) }, async (isolated) => {
    const dev = await registerDevice({ coreUrl: isolated.coreUrl, apiToken: API_TOKEN }, 'dev-fast');
    const client = await connect(isolated.gatewayMqttUrl, dev.id, dev.password);
    const started = Date.now();
    await Promise.all([0, 1, 2, 3, 4, 5].map((n) => client.publishAsync(`telemetry/${dev.id}/?message-id=m-${n}`, JSON.stringify({ n }), { qos: 1 })));
    const elapsed = Date.now() - started;
    await client.endAsync();
    assert.ok(elapsed >= 700, `6 messages at 5 a second after a burst of 2 took ${elapsed} ms`);
    assert.equal((await isolated.lastInStream(dev.id))?.messageId, 'm-5', 'the last one kept');

    const http = await registerDevice({ coreUrl: isolated.coreUrl, apiToken: API_TOKEN }, 'dev-http');
    const firstSent = Date.now();
    assert.equal((await post(isolated.gatewayHttpUrl, http.id, http.password)).status, 202);
    assert.equal((await post(isolated.gatewayHttpUrl, http.id, http.password)).status, 202);
    assert.equal((await post(isolated.gatewayHttpUrl, http.id, http.password)).status, 202, 'due 200 ms after the first: waits');
    const thirdServed = Date.now() - firstSent;
    assert.ok(thirdServed >= 190, `the third of 3 at 5 a second after a burst of 2 was served ${thirdServed} ms after the first was sent`);
    const answers = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(() => post(isolated.gatewayHttpUrl, http.id, http.password)));
    const refused = answers.filter((r) => r.status === 429);
    assert.ok(refused.length >= 2, `${refused.length} of 8 at once refused`);
    assert.ok(refused.every((r) => Number(r.headers.get('retry-after')) >= 1));
    assert.ok(answers.every((r) => r.status === 202 || r.status === 429));
  });
});

test('IOT_GATEWAY_MAX_CONNECTIONS: connections beyond the cap are closed at once; /metrics counts them and the open ones', async () => {
  await withService({ maxConnections: 2 }, async (isolated) => {
    const dev = await registerDevice({ coreUrl: isolated.coreUrl, apiToken: API_TOKEN }, 'dev-cap');
    const first = await connect(isolated.gatewayMqttUrl, dev.id, dev.password);
    const idle = tcpConnect(Number(new URL(isolated.gatewayHttpUrl).port), HOST);
    await new Promise((resolve) => idle.once('connect', resolve));
    await waitFor(() => isolated.gateway.metrics.connections === 2, 'two connections counted');
    const third = tcpConnect(Number(new URL(isolated.gatewayMqttUrl).port), HOST);
    await new Promise((resolve) => third.once('close', resolve));
    const health = await startHealthServer({ component: 'gateway', version: 'test', checks: {}, metrics: () => isolated.gateway.metrics.render() }, { host: HOST, port: 0 });
    try {
      const text = await (await fetch(`http://${HOST}:${health.port}/metrics`)).text();
      assert.match(text, /^iot_gateway_refusals_total\{reason="connection_cap"\} 1$/m);
      assert.match(text, /^iot_gateway_connections 2$/m);
    } finally {
      await health.close();
    }
    idle.destroy();
    await first.endAsync();
    await waitFor(() => isolated.gateway.metrics.connections === 0, 'closed connections uncounted');
    await (await connect(isolated.gatewayMqttUrl, dev.id, dev.password)).endAsync();
  });
});

test('256 devices logging in at once all get in, retrying when told to (CONNACK 3, as core sheds what it cannot check at once)', async () => {
  const hash = await hashPassword('fleet-password'); // one hash for all: core still verifies each login
  const fleet = Array.from({ length: 256 }, (_, i) => ({ id: `fleet-${i}`, password: 'fleet-password' }));
  for (const dev of fleet) await service.store.createDevice(dev.id, hash);
  const checks = service.deviceChecks();
  const started = Date.now();
  const attempts = await Promise.all(
    fleet.map(async (dev) => {
      for (let attempt = 1; ; attempt++) {
        try {
          const client = await mqtt.connectAsync(service.gatewayMqttUrl, { username: dev.id, password: dev.password, clientId: dev.id, reconnectPeriod: 0, connectTimeout: 10_000 });
          await client.endAsync();
          return attempt;
        } catch (error) {
          if (!/Server unavailable/.test(String(error)) || Date.now() - started > 60_000) throw error;
          await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * 300));
        }
      }
    }),
  );
  const elapsed = Date.now() - started;
  const retried = attempts.filter((n) => n > 1).length;
  assert.ok(elapsed < 60_000, `all in after ${elapsed} ms`);
  assert.ok(service.deviceChecks() - checks >= 256);
  assert.equal(service.gateway.metrics.refusedCount('registry_busy'), attempts.reduce((sum, n) => sum + n - 1, 0), `${retried} devices were told to retry`);
});
