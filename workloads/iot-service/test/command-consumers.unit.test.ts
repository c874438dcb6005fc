/**
 * The stream COMMANDS against NATS Server's default of 1,000 consumers a stream, on a real NATS
 * Server with the broker image's users: 1,001 devices, each following its commands through its
 * own durable consumer (made by the gateway's command delivery), all get their commands, on a
 * stream that an older core made without the limit and core brought to it; a device's consumer
 * an older gateway made is brought to this one's settings.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AckPolicy, DeliverPolicy, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { CommandDelivery, IN_FLIGHT } from '../src/gateway/command-delivery.ts';
import { MAX_STREAM_CONSUMERS } from '../src/shared/broker.ts';
import { CommandStates, ensureCommandStateStream } from '../src/shared/command-states.ts';
import { COMMAND_STREAM, COMMAND_SUBJECTS, commandSubject, deviceConsumer, encodeCommand, ensureCommandStream, newCommandId } from '../src/shared/commands.ts';
import { captureLog, connectAs } from './harness.ts';
import { startNatsServer, type NatsServer } from './nats-server.ts';

const DEVICES = 1_001;
let broker: NatsServer;
let core: NatsConnection;
let gateway: NatsConnection;

before(async () => {
  broker = await startNatsServer();
  core = await connectAs(broker, 'core', 'core-test');
  gateway = await connectAs(broker, 'gateway', 'gateway-test');
});
after(async () => {
  await gateway?.close();
  await core?.close();
  await broker?.close();
});

test('1,001 devices following their commands each have a consumer and get their commands, on a stream an older core made', async () => {
  const jsm = await jetstreamManager(core, { checkAPI: false });
  await jsm.streams.add({ name: COMMAND_STREAM, subjects: [COMMAND_SUBJECTS], storage: StorageType.File, retention: RetentionPolicy.Workqueue });
  await ensureCommandStream(jsm, { replicas: 1, maxBytes: 64 * 1024 * 1024 });
  await ensureCommandStateStream(jsm, { replicas: 1, maxBytes: 64 * 1024 * 1024 });
  assert.equal((await jsm.streams.info(COMMAND_STREAM)).config.max_consumers, MAX_STREAM_CONSUMERS);

  const delivery = new CommandDelivery(Promise.resolve(gateway), captureLog('gateway').log);
  const ids = Array.from({ length: DEVICES }, (_, i) => `follower-${i}`);
  // A poll with no time to wait makes the device's consumer and returns at once.
  for (const id of ids) assert.equal(await delivery.next(id, 0), undefined);
  assert.equal((await jsm.streams.info(COMMAND_STREAM)).state.consumer_count, DEVICES);

  const js = jsm.jetstream();
  const states = new CommandStates(core);
  for (const id of [ids[0]!, ids.at(-1)!]) {
    const now = Date.now();
    const command = { id: newCommandId(), deviceId: id, name: 'ping', payload: null, createdAt: new Date(now).toISOString(), expiresAt: new Date(now + 60_000).toISOString(), retries: 0, responseRequired: false };
    await states.create(command);
    await js.publish(commandSubject(id), encodeCommand(command), { msgID: command.id });
    const polled = await delivery.next(id, 5_000);
    assert.equal(polled?.command.id, command.id, `${id} gets its command`);
    await polled.delivered();
    assert.equal((await states.get(command.id))?.state, 'delivered');
  }
});

test("a device's consumer made by a gateway of before (one command at a time) is brought to IN_FLIGHT when followed", async () => {
  const jsm = await jetstreamManager(gateway, { checkAPI: false });
  const id = 'older-follower';
  await jsm.consumers.add(COMMAND_STREAM, { durable_name: deviceConsumer(id), filter_subject: commandSubject(id), ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, max_ack_pending: 1, max_deliver: -1 });
  const delivery = new CommandDelivery(Promise.resolve(gateway), captureLog('gateway').log);
  assert.equal(await delivery.next(id, 0), undefined);
  assert.equal((await jsm.consumers.info(COMMAND_STREAM, deviceConsumer(id))).config.max_ack_pending, IN_FLIGHT);
});
