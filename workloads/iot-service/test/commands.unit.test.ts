/**
 * Commands from applications to devices through core, a real NATS Server with JetStream and the
 * gateway: a connected MQTT device receives its commands in order and answers them, an offline
 * device gets what waits for it when it connects, a device that disconnects with commands awaiting
 * their PUBACK gets them again at once and in order when back (none it acknowledged), a command
 * taken for a poll the device gave up on is in its next poll at once, a command past its TTL
 * expires without reaching it, no device can subscribe to another's commands, many
 * request/response commands waiting at once each get their own answer through one consumer of
 * core, and a device deleted gets no command.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import mqtt from 'mqtt';
import { COMMAND_STATE_STREAM } from '../src/shared/command-states.ts';
import { deviceConsumer } from '../src/shared/commands.ts';
import { answerCommands, answerPolledCommand, pollCommand, readCommand, sendCommand } from '../src/simulator/commands.ts';
import { HttpStatusError, registerDevice, type DeviceCredentials } from '../src/simulator/index.ts';
import { API_TOKEN, connectToBroker, startService, type Service } from './harness.ts';

/** How long the gateway waits for a device's PUBACK of a command before closing its connection. */
const ACK_TIMEOUT_MS = 2_000;
let service: Service;
let core: { coreUrl: string; apiToken: string };
const devices: Record<string, DeviceCredentials> = {};

before(async () => {
  service = await startService({ processing: false, commandsPerSecond: 50, gateway: { commandAckTimeoutMs: ACK_TIMEOUT_MS } });
  core = { coreUrl: service.coreUrl, apiToken: API_TOKEN };
  for (const id of ['cmd-1', 'cmd-2', 'cmd-3', 'cmd-4', 'cmd-5', 'cmd-6', 'cmd-7', 'cmd-8', 'poller', 'poller-2']) devices[id] = await registerDevice(core, id);
});
after(() => service.close());

const connect = (id: string) => mqtt.connectAsync(service.gatewayMqttUrl, { username: id, password: devices[id]!.password, clientId: id, reconnectPeriod: 0, connectTimeout: 3_000 });

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  for (let tries = 0; ; tries++) {
    const value = await read();
    if (done(value)) return value;
    if (tries > 200) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** `promise`, or a failure naming `what` when it has not settled within `ms`. */
function bounded<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what()}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

test('a one-way command reaches the connected MQTT device, which acknowledged it: delivered', async () => {
  const client = await connect('cmd-1');
  const device = await answerCommands(client, 'cmd-1');
  const sent = await sendCommand(core, 'cmd-1', { name: 'set-interval', payload: { seconds: 5 } });
  assert.equal(sent.status, 202);
  assert.equal(sent.body.state, 'queued');
  const record = await until(() => readCommand(core, 'cmd-1', String(sent.body.commandId)), (r) => r.state === 'delivered', 'delivered');
  assert.equal(record.attempts, 1);
  assert.deepEqual(device.received, [{ commandId: sent.body.commandId, name: 'set-interval', payload: { seconds: 5 } }]);
  await client.endAsync();
});

test('a device\'s commands reach it in the order sent, several awaiting their PUBACK at once, each recorded delivered once', async () => {
  const client = await connect('cmd-7');
  const device = await answerCommands(client, 'cmd-7');
  const sent: string[] = [];
  for (let i = 0; i < 20; i++) sent.push(String((await sendCommand(core, 'cmd-7', { name: `step-${i}` })).body.commandId));
  for (const id of sent) assert.equal((await until(() => readCommand(core, 'cmd-7', id), (r) => r.state === 'delivered', 'delivered')).attempts, 1);
  assert.deepEqual(device.received.map((c) => c.commandId), sent);
  await client.endAsync();
});

test('a request/response command returns the device\'s answer; an error status records failed', async () => {
  const client = await connect('cmd-2');
  await answerCommands(client, 'cmd-2', (command) => (command.name === 'read' ? { status: 200, payload: { value: 42 } } : { status: 409, payload: { error: 'busy' } }));
  const answered = await sendCommand(core, 'cmd-2', { name: 'read', payload: { sensor: 't' }, responseTimeoutSeconds: 10 });
  assert.equal(answered.status, 200);
  assert.equal(answered.body.state, 'succeeded');
  assert.equal(answered.body.status, 200);
  assert.deepEqual(answered.body.response, { value: 42 });
  const refused = await sendCommand(core, 'cmd-2', { name: 'reboot', responseTimeoutSeconds: 10 });
  assert.equal(refused.body.state, 'failed');
  assert.equal(refused.body.status, 409);
  assert.deepEqual((await readCommand(core, 'cmd-2', String(refused.body.commandId))).response, { error: 'busy' });
  await client.endAsync();
});

test('request/response commands, many waiting at once, each get their own answer, and all of them use one consumer of core on the broker', async () => {
  const client = await connect('cmd-6');
  await answerCommands(client, 'cmd-6', (command) => ({ status: 200, payload: { to: command.commandId } }));
  const answers = await Promise.all(Array.from({ length: 40 }, () => sendCommand(core, 'cmd-6', { name: 'read', responseTimeoutSeconds: 10 })));
  assert.deepEqual(answers.map((a) => a.status), Array(40).fill(200));
  for (const answer of answers) assert.deepEqual([answer.body.state, answer.body.response], ['succeeded', { to: answer.body.commandId }], 'its own answer');
  await client.endAsync();
  assert.equal((await sendCommand(core, 'cmd-6', { name: 'read', responseTimeoutSeconds: 1 })).status, 504, 'offline: no answer');
  const admin = await connectToBroker(service.broker, 'consumers');
  try {
    const consumers = await (await (await jetstreamManager(admin)).consumers.list(COMMAND_STATE_STREAM)).next();
    assert.equal(consumers.length, 1, `core's one consumer, whatever the number of waits: ${JSON.stringify(consumers.map((c) => c.name))}`);
  } finally {
    await admin.close();
  }
});

test('a command to a device deleted a moment ago is 404 (core forgets what it knew of the device)', async () => {
  const doomed = await registerDevice(core, 'cmd-doomed');
  assert.equal((await sendCommand(core, doomed.id, { name: 'x' })).status, 202);
  const deleted = await fetch(`${core.coreUrl}/v1/devices/${doomed.id}`, { method: 'DELETE', headers: { Authorization: `Bearer ${API_TOKEN}` } });
  assert.equal(deleted.status, 204);
  assert.equal((await sendCommand(core, doomed.id, { name: 'x' })).status, 404);
});

test('a request/response command to a device that does not answer: 504 with its state, which keeps going', async () => {
  const client = await connect('cmd-2');
  await answerCommands(client, 'cmd-2');
  const unanswered = await sendCommand(core, 'cmd-2', { name: 'read', responseTimeoutSeconds: 1 });
  assert.equal(unanswered.status, 504);
  assert.match(String(unanswered.body.error), /no answer from the device within 1 s/);
  await until(() => readCommand(core, 'cmd-2', String(unanswered.body.commandId)), (r) => r.state === 'delivered', 'delivered');
  await client.endAsync();
});

test('a command to an offline device is delivered when it connects within the TTL; one past its TTL expires and never reaches it', async () => {
  const expiring = await sendCommand(core, 'cmd-3', { name: 'old', ttlSeconds: 1 });
  const waiting = await sendCommand(core, 'cmd-3', { name: 'new', payload: 'on', ttlSeconds: 60 });
  assert.equal((await readCommand(core, 'cmd-3', String(waiting.body.commandId))).state, 'queued');
  await until(() => readCommand(core, 'cmd-3', String(expiring.body.commandId)), (r) => r.state === 'expired', 'expired');
  const client = await connect('cmd-3');
  const device = await answerCommands(client, 'cmd-3');
  await until(() => readCommand(core, 'cmd-3', String(waiting.body.commandId)), (r) => r.state === 'delivered', 'delivered');
  assert.deepEqual(device.received.map((c) => c.name), ['new']);
  assert.equal((await readCommand(core, 'cmd-3', String(expiring.body.commandId))).state, 'expired');
  await client.endAsync();
});

test('a command whose deliveries the device never acknowledges is failed after its retries and not offered again', async () => {
  const sent = await sendCommand(core, 'cmd-5', { name: 'stuck', retries: 1 });
  const offered: string[] = [];
  for (let delivery = 1; delivery <= 2; delivery++) {
    const silent = await connect('cmd-5');
    silent.on('message', (topic) => offered.push(topic));
    silent.handleMessage = () => undefined; // the device takes the command but never sends its PUBACK
    const closed = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    await silent.subscribeAsync('command/cmd-5/req/#', { qos: 1 });
    await bounded(closed, 10 * ACK_TIMEOUT_MS, () => `the gateway to close delivery ${delivery}'s connection for its missing PUBACK (offered: ${JSON.stringify(offered)})`);
  }
  assert.deepEqual(offered, Array(2).fill(`command/cmd-5/req/${String(sent.body.commandId)}/stuck`), 'offered once and once again');
  const client = await connect('cmd-5');
  const device = await answerCommands(client, 'cmd-5');
  const record = await until(() => readCommand(core, 'cmd-5', String(sent.body.commandId)), (r) => r.state === 'failed', 'failed');
  assert.equal(record.attempts, 2);
  assert.equal(record.reason, 'the device acknowledged none of 2 deliveries');
  assert.deepEqual(device.received, [], 'not offered a third time');
  await client.endAsync();
});

test('a device that disconnects with commands pending gets every one it did not acknowledge when back, in order, without waiting out the broker\'s ack wait; none it acknowledged again', async () => {
  const sent: string[] = [];
  for (let i = 0; i < 12; i++) sent.push(String((await sendCommand(core, 'cmd-8', { name: `step-${i}` })).body.commandId));
  const leaving = await connect('cmd-8');
  const offered: string[] = [];
  // The device sends its PUBACK for the first 3 commands only, then leaves with 8 awaiting theirs.
  leaving.on('error', () => undefined); // each PUBACK held back is reported as an error
  leaving.options.customHandleAcks = (topic, _message, _packet, done) => {
    offered.push(topic.split('/')[3]!);
    done(offered.length <= 3 ? 0 : new Error('PUBACK held back'));
  };
  await leaving.subscribeAsync('command/cmd-8/req/#', { qos: 1 });
  await until(async () => offered.length, (count) => count === 11, '11 commands offered');
  for (const id of sent.slice(0, 3)) await until(() => readCommand(core, 'cmd-8', id), (r) => r.state === 'delivered', 'delivered');
  leaving.stream.destroy(); // its network gone: no DISCONNECT

  const back = await connect('cmd-8');
  const device = await answerCommands(back, 'cmd-8');
  await bounded(
    until(async () => device.received.length, (count) => count >= 9, 'the commands offered again'),
    3_000,
    () => `the 9 commands not acknowledged (received ${device.received.length}), well before the broker's 30-s ack wait`,
  );
  assert.deepEqual(offered, sent.slice(0, 11));
  assert.deepEqual(device.received.map((c) => c.commandId), sent.slice(3), 'every command not acknowledged, in order, none acknowledged before');
  for (const id of sent.slice(3)) await until(() => readCommand(core, 'cmd-8', id), (r) => r.state === 'delivered', 'delivered');
  await back.endAsync();
});

test('a device cannot subscribe to another device\'s commands, nor answer them', async () => {
  const intruder = await connect('cmd-4');
  for (const filter of ['command/cmd-1/req/#', 'command/+/req/#', 'command/#', '#']) {
    await assert.rejects(intruder.subscribeAsync(filter, { qos: 1 }), /Subscribe error/, filter);
  }
  const heard: string[] = [];
  intruder.on('message', (topic) => heard.push(topic));
  const victim = await connect('cmd-1');
  await answerCommands(victim, 'cmd-1');
  const sent = await sendCommand(core, 'cmd-1', { name: 'secret' });
  await until(() => readCommand(core, 'cmd-1', String(sent.body.commandId)), (r) => r.state === 'delivered', 'delivered');
  await intruder.publishAsync(`command/cmd-1/res/${String(sent.body.commandId)}/200`, '{"forged":true}', { qos: 1 });
  await intruder.publishAsync(`command/cmd-4/res/${String(sent.body.commandId)}/200`, '{"forged":true}', { qos: 1 });
  assert.equal((await readCommand(core, 'cmd-1', String(sent.body.commandId))).state, 'delivered', 'no forged answer recorded');
  assert.deepEqual(heard, []);
  await intruder.endAsync();
  await victim.endAsync();
});

test('a polling HTTP device gets a one-way command in the answer to its telemetry, and answers a request/response command', async () => {
  const poller = devices.poller!;
  const oneWay = await sendCommand(core, 'poller', { name: 'light', payload: { on: true } });
  assert.deepEqual(await pollCommand(service.gatewayHttpUrl, poller, 5), { commandId: oneWay.body.commandId, name: 'light', payload: { on: true } });
  await until(() => readCommand(core, 'poller', String(oneWay.body.commandId)), (r) => r.state === 'delivered', 'delivered');

  const answered = sendCommand(core, 'poller', { name: 'read', responseTimeoutSeconds: 10 });
  const polled = await pollCommand(service.gatewayHttpUrl, poller, 5);
  assert.equal(polled?.name, 'read');
  await answerPolledCommand(service.gatewayHttpUrl, poller, polled.commandId, { status: 200, payload: { value: 7 } });
  const result = await answered;
  assert.equal(result.status, 200);
  assert.deepEqual([result.body.commandId, result.body.state, result.body.response], [polled.commandId, 'succeeded', { value: 7 }]);

  assert.equal(await pollCommand(service.gatewayHttpUrl, poller, 1), undefined, 'no command waiting: the usual answer');
  await assert.rejects(pollCommand(service.gatewayHttpUrl, poller, 61), (error: unknown) => error instanceof HttpStatusError && error.status === 400);
  await assert.rejects(answerPolledCommand(service.gatewayHttpUrl, devices['cmd-4']!, polled.commandId, { status: 200, payload: null }), (error: unknown) => error instanceof HttpStatusError && error.status === 404, "another device's command");
});

test('a command taken for a poll the device gave up on is in its next poll at once, not after the broker\'s ack wait', async () => {
  const poller = devices['poller-2']!;
  const gaveUp = new AbortController();
  const abandoned = fetch(`${service.gatewayHttpUrl}/v1/telemetry?ttd=30`, { method: 'POST', signal: gaveUp.signal, headers: { Authorization: `Basic ${Buffer.from(`${poller.id}:${poller.password}`).toString('base64')}`, 'Content-Type': 'application/json' }, body: '{}' });
  const admin = await connectToBroker(service.broker, 'poll-watch');
  try {
    const jsm = await jetstreamManager(admin, { checkAPI: false });
    const consumer = () => jsm.consumers.info('COMMANDS', deviceConsumer(poller.id)).catch(() => undefined);
    await until(consumer, (info) => (info?.num_waiting ?? 0) > 0, 'the poll waiting at the broker');
    gaveUp.abort();
    await abandoned.catch(() => undefined);
    const sent = await sendCommand(core, 'poller-2', { name: 'late' });
    await until(consumer, (info) => info?.delivered.consumer_seq === 1, 'the command taken for the abandoned poll');
    assert.equal((await pollCommand(service.gatewayHttpUrl, poller, 5))?.commandId, sent.body.commandId, 'in the next poll, within its 5 s');
  } finally {
    await admin.close();
  }
});

test('commands: bad input is 400 with the reason, an unknown device or command 404, beyond the rate 429', async () => {
  for (const [body, reason] of [
    [{ name: 'a/b' }, /name must be/],
    [{ name: 'x', ttlSeconds: 0 }, /ttlSeconds must be a whole number from 1 to 86400/],
    [{ name: 'x', retries: 11 }, /retries must be/],
    [{ name: 'x', responseTimeoutSeconds: 61 }, /responseTimeoutSeconds must be/],
  ] as const) {
    const refused = await sendCommand(core, 'cmd-4', body as never);
    assert.equal(refused.status, 400, JSON.stringify(body));
    assert.match(String(refused.body.error), reason);
  }
  assert.equal((await sendCommand(core, 'nobody', { name: 'x' })).status, 404);
  await assert.rejects(readCommand(core, 'cmd-4', '00000000-0000-4000-8000-000000000000'), /HTTP 404/);
  const sent = await sendCommand(core, 'cmd-4', { name: 'x' });
  await assert.rejects(readCommand(core, 'cmd-1', String(sent.body.commandId)), /HTTP 404/, 'another device\'s command');
  const statuses = await Promise.all(Array.from({ length: 150 }, () => sendCommand(core, 'cmd-4', { name: 'x' }).then((r) => r.status)));
  assert.ok(statuses.includes(429), 'beyond 50 a second');
  assert.ok(statuses.includes(202));
});
