/**
 * The gateway on 127.0.0.1, between a device, core (on the in-memory store) and a real NATS
 * Server with JetStream: who is admitted, what is forwarded, what is refused at the door because
 * it could never be stored, that a device's acknowledgement waits for the broker's, and that a
 * full stream slows devices down instead of losing what they were told is kept; and that a
 * draining gateway still serves HTTP while it sends keep-alive devices elsewhere.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import mqtt from 'mqtt';
import { Agent, request as httpRequest } from 'node:http';
import { connect as tcpConnect, type Socket } from 'node:net';
import { deviceTelemetryTopic } from '../src/shared/telemetry.ts';
import { jetstreamManager } from '@nats-io/jetstream';
import { TELEMETRY_STREAM } from '../src/shared/broker.ts';
import { HttpStatusError, mqttHeaderAnnouncing, postHttp, registerDevice, type DeviceCredentials } from '../src/simulator/index.ts';
import { API_TOKEN, connectToBroker, startService, waitFor, type Service } from './harness.ts';

let service: Service;
let device: DeviceCredentials;

before(async () => {
  service = await startService({ processing: false });
  device = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-1');
});
after(() => service.close());

const connectDevice = (username: string, password: string) =>
  mqtt.connectAsync(service.gatewayMqttUrl, { username, password, clientId: username || 'anonymous', reconnectPeriod: 0, connectTimeout: 3_000 });

function basic(id: string, password: string) {
  return `Basic ${Buffer.from(`${id}:${password}`).toString('base64')}`;
}

test('MQTT: a registered device publishes; the stream gets an envelope with a fresh message id', async () => {
  const client = await connectDevice(device.id, device.password);
  await client.publishAsync('telemetry/dev-1', JSON.stringify({ t: 21.5 }), { qos: 1 });
  await client.endAsync();
  const envelope = (await service.lastInStream('dev-1'))!;
  assert.equal(envelope.deviceId, 'dev-1');
  assert.deepEqual(envelope.payload, { t: 21.5 });
  assert.match(envelope.messageId, /^[0-9a-f-]{36}$/);
});

test('MQTT: a message id the device gives in the topic\'s property bag is carried; a malformed one is refused', async () => {
  const client = await connectDevice(device.id, device.password);
  await client.publishAsync(deviceTelemetryTopic('dev-1', 'dev-1/m_7'), JSON.stringify({ t: 7 }), { qos: 1 });
  const envelope = (await service.lastInStream('dev-1'))!;
  assert.equal(envelope.messageId, 'dev-1/m_7');
  assert.deepEqual(envelope.payload, { t: 7 });

  const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  void client.publishAsync('telemetry/dev-1/?message-id=a&colour=red', JSON.stringify({ t: 8 }), { qos: 1 }).catch(() => undefined);
  await closed;
  await client.endAsync(true);
  assert.equal((await service.lastInStream('dev-1'))?.messageId, 'dev-1/m_7', 'nothing forwarded for an unknown property');
});

test('MQTT: a wrong password, an unknown device or no credentials are refused at CONNECT', async () => {
  for (const [username, password] of [[device.id, 'wrong'], ['nobody', device.password], ['', '']] as const) {
    await assert.rejects(connectDevice(username, password), /Bad username or password|Not authorized/, `${username}/${password}`);
  }
});

test('MQTT: publishing to another device\'s topic closes the connection unacknowledged and forwards nothing', async () => {
  await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-2');
  const client = await connectDevice(device.id, device.password);
  const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  const acked = client.publishAsync('telemetry/dev-2', JSON.stringify({ forged: true }), { qos: 1 }).then(() => 'acked');
  await closed;
  const outcome = await Promise.race([acked, new Promise((resolve) => setTimeout(() => resolve('no puback'), 200))]);
  assert.equal(outcome, 'no puback');
  await client.endAsync(true);
  assert.equal(await service.lastInStream('dev-2'), undefined);
  assert.ok(service.logs.gateway.lines.some((l) => l.msg === 'mqtt publish refused' && l.topic === 'telemetry/dev-2'));
});

test('MQTT: a payload that is not JSON, and subscriptions, are refused', async () => {
  const client = await connectDevice(device.id, device.password);
  await assert.rejects(client.subscribeAsync('telemetry/#', { qos: 1 }), /Subscribe error/);
  const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  void client.publishAsync('telemetry/dev-1', 'not json', { qos: 1 }).catch(() => undefined);
  await closed;
  await client.endAsync(true);
});

test('MQTT: the device\'s PUBACK waits for the broker\'s', async () => {
  const client = await connectDevice(device.id, device.password);
  service.broker.pause();
  let acked = false;
  const publish = client.publishAsync('telemetry/dev-1', JSON.stringify({ n: 1 }), { qos: 1 }).then(() => {
    acked = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(acked, false, `no PUBACK while the broker holds its acknowledgement; gateway log: ${JSON.stringify(service.logs.gateway.lines.slice(-15))}`);
  service.broker.resume();
  await publish;
  assert.equal(acked, true);
  await client.endAsync();
});

test('HTTP: 202 only once the broker accepted; the given Message-Id is carried', async () => {
  service.broker.pause();
  let answered = false;
  const post = postHttp(service.gatewayHttpUrl, device, { t: 1 }, 'msg-given-1').then((id) => {
    answered = true;
    return id;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(answered, false, 'no 202 while the broker holds its acknowledgement');
  service.broker.resume();
  assert.equal(await post, 'msg-given-1');
  const envelope = (await service.lastInStream('dev-1'))!;
  assert.equal(envelope.messageId, 'msg-given-1');
  assert.equal(envelope.deviceId, 'dev-1');
  assert.match(await postHttp(service.gatewayHttpUrl, device, [1, 2]), /^[0-9a-f-]{36}$/, 'assigned when not given');
});

test('HTTP: wrong or missing credentials 401 with WWW-Authenticate; bad input 400/415; other paths 404/405', async () => {
  const post = (headers: Record<string, string>, body = '{"t":1}', path = '/v1/telemetry', method = 'POST') =>
    fetch(`${service.gatewayHttpUrl}${path}`, { method, headers: { 'Content-Type': 'application/json', ...headers }, body: method === 'GET' ? undefined : body });
  const wrong = await post({ Authorization: basic(device.id, 'wrong') });
  assert.equal(wrong.status, 401);
  assert.match(wrong.headers.get('www-authenticate') ?? '', /^Basic /);
  assert.equal((await post({})).status, 401);
  assert.equal((await post({ Authorization: `Bearer ${API_TOKEN}` })).status, 401);
  const auth = { Authorization: basic(device.id, device.password) };
  assert.equal((await post(auth, 'oops')).status, 400);
  assert.equal((await post(auth, '42')).status, 400);
  assert.equal((await post({ ...auth, 'Message-Id': 'has space' })).status, 400);
  assert.equal((await post({ ...auth, 'Content-Type': 'text/plain' })).status, 415);
  assert.equal((await post(auth, '{}', '/v1/other')).status, 404);
  assert.equal((await post(auth, '', '/v1/telemetry', 'GET')).status, 405);
});

test('a device registered after the gateway refused it is admitted without a restart', async () => {
  await assert.rejects(connectDevice('dev-late', 'whatever'));
  const late = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-late');
  const client = await connectDevice(late.id, late.password);
  await client.publishAsync('telemetry/dev-late', '{"hello":1}', { qos: 1 });
  await client.endAsync();
  assert.match(await postHttp(service.gatewayHttpUrl, late, { hello: 2 }), /.+/);
});

test('with the broker gone, HTTP answers 503 and an MQTT device gets no PUBACK', async () => {
  const isolated = await startService({ processing: false });
  try {
    const dev = await registerDevice({ coreUrl: isolated.coreUrl, apiToken: API_TOKEN }, 'dev-9');
    const device9 = await mqtt.connectAsync(isolated.gatewayMqttUrl, { username: dev.id, password: dev.password, clientId: dev.id, reconnectPeriod: 0 });
    await isolated.broker.kill();
    await waitFor(() => !isolated.brokerLink.connected(), 'the gateway to see the broker gone');
    const response = await fetch(`${isolated.gatewayHttpUrl}/v1/telemetry`, {
      method: 'POST',
      headers: { Authorization: basic(dev.id, dev.password), 'Content-Type': 'application/json' },
      body: '{"t":1}',
    });
    assert.equal(response.status, 503);
    const closed = new Promise<void>((resolve) => device9.once('close', () => resolve()));
    void device9.publishAsync('telemetry/dev-9', '{"t":2}', { qos: 1 }).catch(() => undefined);
    await closed;
    await device9.endAsync(true);
  } finally {
    await isolated.close().catch(() => undefined);
  }
});

const poisons = [
  ['a NUL character', '{"x":"\\u0000"}', /NUL character/],
  ['an unpaired surrogate', '{"x":"\\ud800"}', /unpaired UTF-16 surrogate/],
  ['a NUL character in a key', '{"a\\u0000b":1}', /key contains a NUL/],
  ['nesting deeper than 64 levels', `${'['.repeat(65)}${']'.repeat(65)}`, /nested deeper than 64/],
] as const;

test('HTTP: a payload that could never be stored is refused with 400 and the reason; nothing reaches the stream', async () => {
  const dev = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-poison-http');
  for (const [what, body, reason] of poisons) {
    const response = await fetch(`${service.gatewayHttpUrl}/v1/telemetry`, {
      method: 'POST',
      headers: { Authorization: basic(dev.id, dev.password), 'Content-Type': 'application/json' },
      body,
    });
    assert.equal(response.status, 400, what);
    assert.match(((await response.json()) as { error: string }).error, reason, what);
  }
  assert.equal(await service.lastInStream(dev.id), undefined);
});

test('MQTT: a payload that could never be stored closes the connection without PUBACK; nothing reaches the stream', async () => {
  const dev = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'dev-poison-mqtt');
  for (const [what, body, reason] of poisons) {
    const client = await connectDevice(dev.id, dev.password);
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    let acked = false;
    void client.publishAsync(`telemetry/${dev.id}`, body, { qos: 1 }).then(() => (acked = true), () => undefined);
    await closed;
    await client.endAsync(true);
    assert.equal(acked, false, what);
    assert.ok(service.logs.gateway.lines.some((l) => l.msg === 'mqtt publish refused' && reason.test(String(l.reason))), what);
  }
  assert.equal(await service.lastInStream(dev.id), undefined);
});

test('MQTT: a packet announcing more than the cap closes the connection before its body is read, even before CONNECT is answered', async () => {
  const socket = tcpConnect(Number(new URL(service.gatewayMqttUrl).port), '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(mqttHeaderAnnouncing(200 * 1024 * 1024));
  await closed;
  assert.ok(service.logs.gateway.lines.some((l) => l.msg === 'mqtt connection closed' && /exceeds/.test(String(l.reason))));
});

test('a full stream slows devices down: HTTP 503 with Retry-After, an MQTT PUBACK held until processing makes room; all acknowledged is stored', async () => {
  const small = await startService({ processing: false, stream: { maxBytes: 4 * 1024 }, gateway: { backlogWaitMs: 20_000 } });
  try {
    const dev = await registerDevice({ coreUrl: small.coreUrl, apiToken: API_TOKEN }, 'dev-busy');
    const acknowledged: string[] = [];
    let refused: Response | undefined;
    for (let i = 0; i < 100 && !refused; i++) {
      const response = await fetch(`${small.gatewayHttpUrl}/v1/telemetry`, {
        method: 'POST',
        headers: { Authorization: basic(dev.id, dev.password), 'Content-Type': 'application/json', 'Message-Id': `h-${i}` },
        body: JSON.stringify({ i, padding: 'x'.repeat(200) }),
      });
      if (response.status === 202) acknowledged.push(`h-${i}`);
      else refused = response;
    }
    assert.equal(refused?.status, 503, 'refused once the stream is full');
    assert.equal(refused?.headers.get('retry-after'), '5');
    assert.ok(acknowledged.length > 0);

    const client = await mqtt.connectAsync(small.gatewayMqttUrl, { username: dev.id, password: dev.password, clientId: dev.id, reconnectPeriod: 0 });
    let acked = false;
    const publish = client.publishAsync(deviceTelemetryTopic(dev.id, 'q-1'), JSON.stringify({ q: 1 }), { qos: 1 }).then(() => (acked = true));
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(acked, false, 'no PUBACK while the stream is full');
    assert.equal(client.connected, true, 'the device stays connected, waiting');

    await small.startProcessing();
    await publish;
    acknowledged.push('q-1');
    await client.endAsync();
    await waitFor(() => small.store.rows.size === acknowledged.length, 'everything acknowledged stored', 10_000);
    assert.deepEqual([...small.store.rows.values()].map((r) => r.messageId).sort(), acknowledged.sort());
  } finally {
    await small.close();
  }
});

test('a broker that lost the stream: the gateway is unready until core made it again, and takes messages into the new one after', async () => {
  const lost = await startService({ processing: false, brokerCheckMs: 200 });
  try {
    const dev = await registerDevice({ coreUrl: lost.coreUrl, apiToken: API_TOKEN }, 'dev-lost');
    assert.match(await postHttp(lost.gatewayHttpUrl, dev, { before: true }), /.+/);
    const admin = await connectToBroker(lost.broker, 'admin');
    await (await jetstreamManager(admin)).streams.delete(TELEMETRY_STREAM);
    await admin.close();
    await assert.rejects(postHttp(lost.gatewayHttpUrl, dev, { during: true }), (e: unknown) => e instanceof HttpStatusError && e.status === 503);
    assert.equal(lost.brokerLink.connected(), false, 'unready while the stream is missing');
    let accepted = false;
    for (let attempt = 0; attempt < 50 && !accepted; attempt++) {
      accepted = await postHttp(lost.gatewayHttpUrl, dev, { after: attempt }).then(() => true, () => false);
      if (!accepted) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(accepted, 'accepted again once core made the stream again');
    assert.equal(lost.brokerLink.connected(), true);
    assert.equal(((await lost.lastInStream(dev.id))?.payload as { after?: number }).after !== undefined, true, 'the accepted message is in the new stream');
  } finally {
    await lost.close();
  }
});

// Last: the gateway drains from here on.
test('draining (its pod stopping): HTTP is still served, and each answer ends its keep-alive connection, so the device reconnects', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const post = (messageId: string) =>
    new Promise<{ status: number; connection: string | undefined; socket: Socket }>((resolve, reject) => {
      const req = httpRequest(`${service.gatewayHttpUrl}/v1/telemetry`, { method: 'POST', agent, headers: { Authorization: basic(device.id, device.password), 'Content-Type': 'application/json', 'Message-Id': messageId } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, socket: req.socket! }));
      });
      req.on('error', reject);
      req.end('{"t":1}');
    });
  try {
    const before = await post('drain-1');
    assert.deepEqual([before.status, before.connection], [202, 'keep-alive']);
    service.gateway.drain();
    const closed = new Promise((resolve) => before.socket.once('close', resolve));
    const during = await post('drain-2');
    assert.equal(during.socket, before.socket, 'sent on the kept-alive connection');
    assert.deepEqual([during.status, during.connection], [202, 'close']);
    await closed;
    assert.equal((await service.lastInStream('dev-1'))?.messageId, 'drain-2');
    assert.equal((await post('drain-3')).status, 202, 'a new connection is served while draining');
  } finally {
    agent.destroy();
  }
});
