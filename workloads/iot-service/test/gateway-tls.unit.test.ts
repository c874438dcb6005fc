/**
 * The gateway's TLS listeners on 127.0.0.1 (MQTT over TLS and HTTPS, real clients), with the
 * certificate in a directory laid out as a Kubernetes Secret volume: served, followed when the
 * Secret changes without dropping connected devices, readiness without a certificate, client
 * certificates naming the device, and a cached login answered without waiting for a delayed ACK.
 */

import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, test } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import mqtt from 'mqtt';
import { coreDeviceCheck } from '../src/gateway/devices.ts';
import { startGateway } from '../src/gateway/gateway.ts';
import { registerDevice, type DeviceCredentials } from '../src/simulator/index.ts';
import { issue, makeCa, secretVolume, type Pem } from './certificates.ts';
import { API_TOKEN, captureLog, DEVICE_CHECK_TOKEN, HOST, startService, waitFor, type Service } from './harness.ts';

const serverCa = makeCa('gateway-ca');
const deviceCa = makeCa('device-ca');
const strangerCa = makeCa('stranger-ca');
const volume = secretVolume();

let service: Service;
let device: DeviceCredentials;

before(async () => {
  const gatewayCert = issue(serverCa, 'gateway', HOST);
  volume.write({ 'tls.crt': gatewayCert.cert, 'tls.key': gatewayCert.key });
  service = await startService({ processing: false, gateway: { tlsDir: volume.dir, tlsPollMs: 50 } });
  device = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-tls');
});
after(async () => {
  await service.close();
  volume.remove();
});

function connectMqtts(options: { username?: string; password?: string; clientId: string; ca: string; client?: Pem }) {
  return mqtt.connectAsync(service.gatewayMqttsUrl, {
    username: options.username,
    password: options.password,
    clientId: options.clientId,
    ca: options.ca,
    cert: options.client?.cert,
    key: options.client?.key,
    reconnectPeriod: 0,
    connectTimeout: 3_000,
  });
}

function postHttps(body: unknown, options: { ca: string; basic?: [string, string]; client?: Pem }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (options.basic) headers.Authorization = `Basic ${Buffer.from(options.basic.join(':')).toString('base64')}`;
    const req = request(`${service.gatewayHttpsUrl}/v1/telemetry`, { method: 'POST', headers, ca: options.ca, cert: options.client?.cert, key: options.client?.key }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** The certificate the gateway presents to a new connection, by its issuer's CN. */
function presentedIssuer(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: HOST, port, rejectUnauthorized: false }, () => {
      resolve(String(socket.getPeerCertificate().issuer.CN));
      socket.end();
    });
    socket.on('error', reject);
  });
}

test('MQTT over TLS and HTTPS: a device logs in with its password, its messages reach the stream; plain MQTT and HTTP still serve', async () => {
  const client = await connectMqtts({ username: device.id, password: device.password, clientId: device.id, ca: serverCa.cert });
  await client.publishAsync(`telemetry/${device.id}`, JSON.stringify({ over: 'mqtts' }), { qos: 1 });
  await client.endAsync();
  assert.deepEqual((await service.lastInStream(device.id))?.payload, { over: 'mqtts' });

  const posted = await postHttps({ over: 'https' }, { ca: serverCa.cert, basic: [device.id, device.password] });
  assert.equal(posted.status, 202, posted.body);
  assert.deepEqual((await service.lastInStream(device.id))?.payload, { over: 'https' });
  assert.equal((await postHttps({ x: 1 }, { ca: serverCa.cert, basic: [device.id, 'wrong'] })).status, 401);

  const plain = await mqtt.connectAsync(service.gatewayMqttUrl, { username: device.id, password: device.password, clientId: device.id, reconnectPeriod: 0 });
  await plain.publishAsync(`telemetry/${device.id}`, '{"over":"mqtt"}', { qos: 1 });
  await plain.endAsync();
});

test('a cached login over TLS is answered at once: the CONNACK does not wait for the device to acknowledge the session tickets', async () => {
  const cached = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-tls-cached');
  const login = () => connectMqtts({ username: cached.id, password: cached.password, clientId: cached.id, ca: serverCa.cert });
  await (await login()).endAsync(); // core checked it once; from now on the gateway's cache answers
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    const client = await login();
    times.push(performance.now() - started);
    await client.endAsync();
  }
  // With Nagle's algorithm on the listener, the CONNACK written after TLS 1.3's session tickets waited
  // for their acknowledgement, which the device's kernel delays by at least 40 ms (Linux): every login
  // took 45-55 ms on loopback, against a few ms without it. The fastest of five is far from either bound.
  assert.ok(Math.min(...times) < 40, `cached logins over TLS took ${times.map((t) => Math.round(t)).join(', ')} ms`);
});

test('a new certificate in the Secret is served to new connections; a device connected before stays connected', async () => {
  const connected = await connectMqtts({ username: device.id, password: device.password, clientId: device.id, ca: serverCa.cert });
  const rotatedCa = makeCa('rotated-ca');
  const rotated = issue(rotatedCa, 'gateway', HOST);
  volume.write({ 'tls.crt': rotated.cert, 'tls.key': rotated.key });
  const mqttsPort = Number(new URL(service.gatewayMqttsUrl).port);
  const httpsPort = Number(new URL(service.gatewayHttpsUrl).port);
  let issuer = '';
  for (const port of [mqttsPort, httpsPort]) {
    for (let i = 0; i < 100 && (issuer = await presentedIssuer(port)) !== 'rotated-ca'; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(issuer, 'rotated-ca');
  }
  await connected.publishAsync(`telemetry/${device.id}`, '{"after":"rotation"}', { qos: 1 });
  assert.equal(connected.connected, true);
  await connected.endAsync();
  const fresh = await connectMqtts({ username: device.id, password: device.password, clientId: device.id, ca: rotatedCa.cert });
  await fresh.endAsync();
  assert.ok(service.logs.gateway.lines.filter((l) => l.msg === 'tls certificate loaded').length >= 2);

  // back to the first CA's certificate for the other tests
  const again = issue(serverCa, 'gateway', HOST);
  volume.write({ 'tls.crt': again.cert, 'tls.key': again.key });
  for (let i = 0; i < 100 && (await presentedIssuer(mqttsPort)) !== 'gateway-ca'; i++) await new Promise((resolve) => setTimeout(resolve, 50));
});

test('without a usable certificate the gateway is unready with the reason logged, and ready once one appears', async () => {
  const empty = secretVolume();
  const logs = captureLog('gateway');
  const gateway = await startGateway({
    protocols: new Set(['mqtts']),
    host: HOST,
    ports: { mqtt: 0, mqtts: 0, http: 0, https: 0 },
    check: coreDeviceCheck({ host: HOST, port: 1 }, DEVICE_CHECK_TOKEN),
    forward: async () => undefined,
    log: logs.log,
    tlsDir: empty.dir,
    tlsPollMs: 50,
  });
  try {
    assert.throws(() => gateway.ready(), /cannot read .*tls\.crt/);
    assert.ok(logs.lines.some((l) => l.level === 'error' && l.msg === 'tls certificate not loaded' && /tls\.crt/.test(String(l.reason))));
    const other = issue(serverCa, 'gateway', HOST);
    empty.write({ 'tls.crt': other.cert, 'tls.key': issue(serverCa, 'other', HOST).key }); // a key of another certificate
    await waitFor(() => logs.lines.some((l) => /not usable/.test(String(l.reason))), 'the mismatched key reported');
    assert.throws(() => gateway.ready(), /not usable/);
    empty.write({ 'tls.crt': other.cert, 'tls.key': other.key });
    await waitFor(() => {
      try {
        gateway.ready();
        return true;
      } catch {
        return false;
      }
    }, 'ready once the certificate loaded');
  } finally {
    await gateway.close();
    empty.remove();
  }
});

test('with client-ca.crt: a verified client certificate is the device (no password); another device named, or another CA, is refused', async () => {
  const gatewayCert = issue(serverCa, 'gateway', HOST);
  volume.write({ 'tls.crt': gatewayCert.cert, 'tls.key': gatewayCert.key, 'client-ca.crt': deviceCa.cert });
  await waitFor(() => service.logs.gateway.lines.some((l) => l.msg === 'tls certificate loaded' && l.mutual === true), 'the client CA loaded');
  try {
    const certified = issue(deviceCa, 'dev-cert');
    const client = await connectMqtts({ clientId: 'dev-cert', ca: serverCa.cert, client: certified });
    await client.publishAsync('telemetry/dev-cert', '{"by":"certificate"}', { qos: 1 });
    await client.endAsync();
    assert.deepEqual((await service.lastInStream('dev-cert'))?.payload, { by: 'certificate' });

    await assert.rejects(connectMqtts({ clientId: device.id, ca: serverCa.cert, client: certified }), /Not authorized/, 'a client id naming another device');
    await assert.rejects(connectMqtts({ username: device.id, password: device.password, clientId: 'dev-cert', ca: serverCa.cert, client: certified }), /Not authorized/, 'a username naming another device');

    const beforeRefusals = service.gateway.metrics.refusedCount('certificate');
    const stranger = issue(strangerCa, 'dev-cert');
    await new Promise<void>((resolve) => {
      const socket = tlsConnect({ host: HOST, port: Number(new URL(service.gatewayMqttsUrl).port), ca: serverCa.cert, cert: stranger.cert, key: stranger.key });
      socket.on('error', () => undefined);
      socket.once('close', () => resolve()); // closed by the gateway in the handshake
    });
    await waitFor(() => service.gateway.metrics.refusedCount('certificate') === beforeRefusals + 1, 'the refusal counted');
    assert.ok(service.logs.gateway.lines.some((l) => l.msg === 'tls connection refused' && /not verified/.test(String(l.reason))));

    assert.equal((await postHttps({ by: 'https-cert' }, { ca: serverCa.cert, client: certified })).status, 202);
    assert.deepEqual((await service.lastInStream('dev-cert'))?.payload, { by: 'https-cert' });
    assert.equal((await postHttps({ x: 1 }, { ca: serverCa.cert, client: certified, basic: [device.id, device.password] })).status, 403);

    // a device without a certificate still logs in with its password
    const withPassword = await connectMqtts({ username: device.id, password: device.password, clientId: device.id, ca: serverCa.cert });
    await withPassword.endAsync();
    assert.equal((await postHttps({ x: 2 }, { ca: serverCa.cert, basic: [device.id, device.password] })).status, 202);
  } finally {
    const plainCert = issue(serverCa, 'gateway', HOST);
    volume.write({ 'tls.crt': plainCert.cert, 'tls.key': plainCert.key });
  }
});
