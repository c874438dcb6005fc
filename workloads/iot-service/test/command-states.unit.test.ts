/**
 * Command states written without reading them first, on a real NATS Server: a record moved on
 * from one its writer knows with its sequence (the `queued` one, or one it wrote) is stored as
 * `advance` would store it; a late `delivered` never overwrites the device's answer, and an answer
 * written from a record that moved on since keeps what the newer record says; the gateway records
 * a device's answer to a request/response command it delivered for that device alone.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { CommandDelivery } from '../src/gateway/command-delivery.ts';
import { CommandStates, ensureCommandStateStream } from '../src/shared/command-states.ts';
import { commandSubject, encodeCommand, ensureCommandStream, newCommandId, STATE_SEQ_HEADER, type Command } from '../src/shared/commands.ts';
import { captureLog, connectAs } from './harness.ts';
import { startNatsServer, type NatsServer } from './nats-server.ts';

let broker: NatsServer;
let core: NatsConnection;
let gateway: NatsConnection;
let states: CommandStates;

before(async () => {
  broker = await startNatsServer();
  core = await connectAs(broker, 'core', 'core-test');
  gateway = await connectAs(broker, 'gateway', 'gateway-test');
  const jsm = await jetstreamManager(core, { checkAPI: false });
  await ensureCommandStream(jsm, { replicas: 1, maxBytes: 64 * 1024 * 1024 });
  await ensureCommandStateStream(jsm, { replicas: 1, maxBytes: 64 * 1024 * 1024 });
  states = new CommandStates(gateway);
});
after(async () => {
  await gateway?.close();
  await core?.close();
  await broker?.close();
});

function command(deviceId: string, responseRequired = false): Command {
  const now = Date.now();
  return { id: newCommandId(), deviceId, name: 'read', payload: { sensor: 't' }, createdAt: new Date(now).toISOString(), expiresAt: new Date(now + 60_000).toISOString(), retries: 1, responseRequired };
}

test('delivered then succeeded, each written from the record before it, read back as written', async () => {
  const queued = await new CommandStates(core).create(command('states-1'));
  const delivered = await states.advanceFrom(queued, { state: 'delivered', attempts: 1 });
  assert.deepEqual([delivered?.record.state, delivered?.record.attempts], ['delivered', 1]);
  const answered = await states.advanceFrom(delivered!, { state: 'succeeded', status: 200, response: { value: 42 } });
  const read = await states.get(queued.record.id);
  assert.deepEqual(read, answered?.record);
  assert.deepEqual([read?.state, read?.attempts, read?.status, read?.response, read?.payload], ['succeeded', 1, 200, { value: 42 }, { sensor: 't' }]);
});

test('a delivered written late, after the device answered, leaves the answer', async () => {
  const queued = await new CommandStates(core).create(command('states-2'));
  await states.advance(queued.record.id, { state: 'succeeded', status: 200, response: 'done' });
  const late = await states.advanceFrom(queued, { state: 'delivered', attempts: 1 });
  assert.equal(late?.record.state, 'succeeded');
  assert.deepEqual([(await states.get(queued.record.id))?.state, (await states.get(queued.record.id))?.response], ['succeeded', 'done']);
});

test('an answer written from a record that moved on since (another gateway delivered it) keeps the newer record', async () => {
  const queued = await new CommandStates(core).create(command('states-3'));
  await states.advance(queued.record.id, { state: 'delivered', attempts: 2 });
  const answered = await states.advanceFrom(queued, { state: 'failed', status: 409, reason: 'the device answered 409' });
  assert.deepEqual([answered?.record.state, answered?.record.attempts, answered?.record.status], ['failed', 2, 409]);
  assert.deepEqual(await states.get(queued.record.id), answered?.record);
});

test('the gateway records the answer to a request/response command it delivered for its own device alone', async () => {
  const sent = command('states-4', true);
  const queued = await new CommandStates(core).create(sent);
  const seq = headers();
  seq.set(STATE_SEQ_HEADER, String(queued.seq));
  await (await jetstreamManager(core, { checkAPI: false })).jetstream().publish(commandSubject(sent.deviceId), encodeCommand(sent), { msgID: sent.id, headers: seq });
  const delivery = new CommandDelivery(Promise.resolve(gateway), captureLog('gateway').log);
  const polled = await delivery.next(sent.deviceId, 5_000);
  assert.equal(polled?.command.id, sent.id);
  await polled.delivered();
  assert.deepEqual([(await states.get(sent.id))?.state, (await states.get(sent.id))?.attempts], ['delivered', 1]);
  assert.equal(await delivery.respond('states-other', sent.id, 200, 'not mine'), false, 'another device');
  assert.equal((await states.get(sent.id))?.state, 'delivered');
  assert.equal(await delivery.respond(sent.deviceId, sent.id, 200, { value: 7 }), true);
  const answered = await states.get(sent.id);
  assert.deepEqual([answered?.state, answered?.attempts, answered?.status, answered?.response], ['succeeded', 1, 200, { value: 7 }]);
  assert.equal(await delivery.respond(sent.deviceId, sent.id, 500, 'again'), true, 'answered twice: the first answer stays');
  assert.equal((await states.get(sent.id))?.state, 'succeeded');
});
