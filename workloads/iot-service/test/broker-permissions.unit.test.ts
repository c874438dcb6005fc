/**
 * The broker image's entry point (image/broker.sh): the configuration it writes is one nats-server
 * takes, for one broker and for three, and its users may do only what their component needs —
 * tried against a real NATS Server running that configuration: the gateway publishes telemetry
 * but cannot read it, touch the streams or announce device changes; processing consumes but
 * cannot publish telemetry; core makes the streams and announces, and cannot read or publish
 * telemetry. For commands: core puts them and the gateway takes them off a device's consumer, but
 * the gateway cannot put one or change their streams, and core cannot consume them. And
 * broker.ts `publishAcknowledged`: a publish the stream's leader dropped (as a broker leaving in a
 * roll does, without an answer) is published again under the same message id until acknowledged,
 * and given up after its timeout — the leader stood in for by a subscriber that drops requests
 * and answers as JetStream does.
 */

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { errors, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { DEAD_LETTER_STREAM, PROCESSING_CONSUMER, publishAcknowledged, TELEMETRY_STREAM, telemetrySubject } from '../src/shared/broker.ts';
import { COMMAND_STATE_STREAM } from '../src/shared/command-states.ts';
import { COMMAND_STREAM, commandSubject, deviceConsumer } from '../src/shared/commands.ts';
import { DEVICE_CHANGES_SUBJECT } from '../src/shared/device-changes.ts';
import { connectionEventSubject, EVENTS_STREAM, telemetryEventSubject } from '../src/shared/events.ts';
import { connectAs, connectToBroker, startService, type Service } from './harness.ts';
import { brokerConfig, natsServerBinary } from './nats-server.ts';

const PASSWORDS = {
  IOT_BROKER_GATEWAY_PASSWORD: 'gw_pw-1',
  IOT_BROKER_PROCESSING_PASSWORD: 'proc_pw-2',
  IOT_BROKER_CORE_PASSWORD: 'core_pw-3',
  IOT_BROKER_ROUTE_PASSWORD: 'route_pw-4',
};

/** Whether nats-server takes `config` (`-t`: parse and check only). */
function validConfig(config: string): { ok: boolean; output: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'broker-config-'));
  try {
    writeFileSync(path.join(dir, 'nats.conf'), config);
    const checked = spawnSync(natsServerBinary(), ['-t', '--config', path.join(dir, 'nats.conf')], { encoding: 'utf8' });
    return { ok: checked.status === 0, output: `${checked.stdout}${checked.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('broker.sh refuses a missing or malformed password by name; the route password is needed only for three brokers', () => {
  for (const missing of ['IOT_BROKER_GATEWAY_PASSWORD', 'IOT_BROKER_PROCESSING_PASSWORD', 'IOT_BROKER_CORE_PASSWORD']) {
    const run = brokerConfig({ ...PASSWORDS, [missing]: '' });
    assert.equal(run.status, 1, missing);
    assert.match(run.stderr, new RegExp(`${missing} \\(from Secret iot-credentials\\) is not set`));
    assert.deepEqual(run.args, [], 'nats-server is not started');
  }
  const malformed = brokerConfig({ ...PASSWORDS, IOT_BROKER_CORE_PASSWORD: 'a"b' });
  assert.equal(malformed.status, 1);
  assert.match(malformed.stderr, /IOT_BROKER_CORE_PASSWORD must be URL-safe base64/);
  const { IOT_BROKER_ROUTE_PASSWORD: _route, ...withoutRoute } = PASSWORDS;
  assert.equal(brokerConfig(withoutRoute).status, 0, 'one broker needs no route password');
  const three = brokerConfig({ ...withoutRoute, IOT_BROKER_REPLICAS: '3', POD_NAMESPACE: 'ns' });
  assert.equal(three.status, 1);
  assert.match(three.stderr, /IOT_BROKER_ROUTE_PASSWORD \(from Secret iot-credentials\) is not set/);
});

test('broker.sh writes a configuration nats-server takes, for one broker and for three (routes as user `route`), and starts nats-server with it', () => {
  const one = brokerConfig(PASSWORDS);
  assert.equal(one.status, 0, one.stderr);
  assert.deepEqual(one.args.slice(0, 1), ['--config']);
  assert.ok(validConfig(one.config).ok, validConfig(one.config).output);
  assert.doesNotMatch(one.config, /cluster/);
  for (const user of ['gateway', 'processing', 'core']) assert.match(one.config, new RegExp(`user: "${user}", password: "[^"]+", permissions: \\$${user.toUpperCase()}`));
  assert.doesNotMatch(one.config, /user: "iot"/, 'no user may do everything');

  const three = brokerConfig({ ...PASSWORDS, IOT_BROKER_REPLICAS: '3', POD_NAMESPACE: 'tenant-ns', POD_NAME: 'broker-1' });
  assert.equal(three.status, 0, three.stderr);
  assert.ok(validConfig(three.config).ok, validConfig(three.config).output);
  assert.match(three.config, /server_name: "broker-1"/);
  assert.match(three.config, /authorization \{ user: "route", password: "route_pw-4" \}/);
  for (const i of [0, 1, 2]) assert.match(three.config, new RegExp(`"nats://route:route_pw-4@broker-${i}\\.broker\\.tenant-ns\\.svc:6222"`));
});

let service: Service;
let admin: NatsConnection;
const connections: NatsConnection[] = [];

before(async () => {
  service = await startService({ processing: false }); // broker.sh's configuration; core made the streams and the consumer
  admin = await connectToBroker(service.broker, 'test-admin');
});
after(async () => {
  for (const connection of connections) await connection.close();
  await admin.close();
  await service.close();
});

async function as(user: 'gateway' | 'processing' | 'core'): Promise<NatsConnection> {
  const connection = await connectAs(service.broker, user, `probe-${user}`);
  connections.push(connection);
  return connection;
}

/** A subscription the broker refuses. */
async function cannotSubscribe(connection: NatsConnection, subject: string): Promise<void> {
  const closed = await connection.subscribe(subject).closed;
  assert.match(String(closed), new RegExp(`Permissions Violation for Subscription to "${subject.replaceAll('$', '\\$').replaceAll('.', '\\.').replaceAll('>', '\\>')}"`));
}

/** A publish the broker refuses: reported to the publisher, and nothing reaches a subscriber of the subject. */
async function cannotPublish(connection: NatsConnection, subject: string): Promise<void> {
  const heard: string[] = [];
  const watcher = admin.subscribe(subject, { callback: (_error, message) => void heard.push(message.subject) });
  await admin.flush();
  const refused = (async () => {
    for await (const status of connection.status()) {
      if (status.type === 'error' && String(status.error).includes(`Permissions Violation for Publish to "${subject}"`)) return true;
    }
    return false;
  })();
  connection.publish(subject, '{}');
  await connection.flush();
  assert.equal(await Promise.race([refused, new Promise((resolve) => setTimeout(() => resolve('no refusal'), 2_000))]), true, `${subject} refused`);
  await admin.flush();
  watcher.unsubscribe();
  assert.deepEqual(heard, [], `nothing published to ${subject}`);
}

/** A JetStream API request the broker refuses. */
async function cannotRequest(call: Promise<unknown>, subject: string): Promise<void> {
  await assert.rejects(call, (error: unknown) => String(error).includes(`Permissions Violation for Publish to "${subject}"`));
}

test('the gateway publishes telemetry and connection events, acknowledged by the streams, but cannot read them, publish telemetry events, delete or change the streams, or announce device changes', async () => {
  const gateway = await as('gateway');
  const ack = await jetstream(gateway).publish(telemetrySubject('dev-probe'), '{}');
  assert.equal(ack.stream, TELEMETRY_STREAM);
  await cannotSubscribe(gateway, 'telemetry.>');
  await cannotSubscribe(gateway, '_INBOX_processing.>'); // the messages processing pulls are replies there
  await cannotSubscribe(gateway, '>');
  const jsm = await jetstreamManager(gateway, { checkAPI: false });
  await cannotRequest(jsm.streams.delete(TELEMETRY_STREAM), `$JS.API.STREAM.DELETE.${TELEMETRY_STREAM}`);
  await cannotRequest(jsm.streams.update(TELEMETRY_STREAM, { max_bytes: 1 }), `$JS.API.STREAM.UPDATE.${TELEMETRY_STREAM}`);
  await cannotRequest(jsm.streams.getMessage(TELEMETRY_STREAM, { seq: 1 }), `$JS.API.STREAM.MSG.GET.${TELEMETRY_STREAM}`);
  await cannotRequest(jsm.consumers.add(TELEMETRY_STREAM, { durable_name: 'reader' }), `$JS.API.CONSUMER.CREATE.${TELEMETRY_STREAM}.reader`);
  await cannotRequest(jsm.consumers.delete(TELEMETRY_STREAM, PROCESSING_CONSUMER), `$JS.API.CONSUMER.DELETE.${TELEMETRY_STREAM}.${PROCESSING_CONSUMER}`);
  await cannotPublish(gateway, DEVICE_CHANGES_SUBJECT);
  await cannotPublish(gateway, 'deadletters.refused.dev-probe');
  assert.equal((await jetstream(gateway).publish(connectionEventSubject('dev-probe'), '{}')).stream, EVENTS_STREAM, 'it publishes connection events');
  await cannotRequest(jetstream(gateway).publish(telemetryEventSubject('dev-forged'), '{}'), telemetryEventSubject('dev-forged'));
  await cannotRequest(jsm.consumers.add(EVENTS_STREAM, { name: 'reader' }), `$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.reader`);
  assert.equal((await jsm.streams.info(TELEMETRY_STREAM)).config.name, TELEMETRY_STREAM, 'it may see that the stream is there');
  assert.ok((await (await jetstreamManager(admin)).streams.info(TELEMETRY_STREAM)).state.messages >= 1, 'the stream and what it holds are untouched');
});

test('processing pulls and acknowledges on its consumer and publishes telemetry events, but cannot publish telemetry or connection events, delete the streams or its consumer, or announce device changes', async () => {
  const processing = await as('processing');
  const jsmAdmin = await jetstreamManager(admin);
  const before = (await jsmAdmin.streams.info(TELEMETRY_STREAM)).state.messages;
  await jetstream(admin).publish(telemetrySubject('dev-pull'), '{}');
  const consumer = await jetstream(processing).consumers.get(TELEMETRY_STREAM, PROCESSING_CONSUMER);
  for (let i = 0; i <= before; i++) {
    const message = await consumer.next({ expires: 2_000 });
    assert.ok(message, 'a message pulled');
    await message.ackAck();
  }
  assert.equal((await jsmAdmin.streams.info(TELEMETRY_STREAM)).state.messages, 0, 'acknowledged, so gone from the work queue');
  await cannotRequest(jetstream(processing).publish(telemetrySubject('dev-forged'), '{}'), telemetrySubject('dev-forged'));
  await cannotSubscribe(processing, 'telemetry.>');
  await cannotSubscribe(processing, '_INBOX_gateway.>');
  const jsm = await jetstreamManager(processing, { checkAPI: false });
  await cannotRequest(jsm.streams.delete(TELEMETRY_STREAM), `$JS.API.STREAM.DELETE.${TELEMETRY_STREAM}`);
  await cannotRequest(jsm.streams.purge(TELEMETRY_STREAM), `$JS.API.STREAM.PURGE.${TELEMETRY_STREAM}`);
  await cannotRequest(jsm.streams.delete(DEAD_LETTER_STREAM), `$JS.API.STREAM.DELETE.${DEAD_LETTER_STREAM}`);
  await cannotRequest(jsm.consumers.delete(TELEMETRY_STREAM, PROCESSING_CONSUMER), `$JS.API.CONSUMER.DELETE.${TELEMETRY_STREAM}.${PROCESSING_CONSUMER}`);
  await cannotPublish(processing, DEVICE_CHANGES_SUBJECT);
  const notice = await jetstream(processing).publish('deadletters.refused.dev-probe', '{}');
  assert.equal(notice.stream, DEAD_LETTER_STREAM, 'it announces dead letters');
  assert.equal((await jetstream(processing).publish(telemetryEventSubject('dev-probe'), '{}')).stream, EVENTS_STREAM, 'it publishes stored telemetry as events');
  await cannotRequest(jetstream(processing).publish(connectionEventSubject('dev-forged'), '{}'), connectionEventSubject('dev-forged'));
  await cannotRequest(jsm.consumers.add(EVENTS_STREAM, { name: 'reader' }), `$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.reader`);
});

test('core makes the streams and the consumer, announces device changes and reads the events stream, but cannot publish telemetry or events, read telemetry, or delete a stream', async () => {
  const core = await as('core');
  const jsm = await jetstreamManager(core, { checkAPI: false });
  assert.equal((await jsm.consumers.info(TELEMETRY_STREAM, PROCESSING_CONSUMER)).name, PROCESSING_CONSUMER);
  await cannotRequest(jetstream(core).publish(telemetrySubject('dev-forged'), '{}'), telemetrySubject('dev-forged'));
  await cannotSubscribe(core, 'telemetry.>');
  await cannotSubscribe(core, '_INBOX_processing.>');
  await cannotRequest(jsm.streams.delete(TELEMETRY_STREAM), `$JS.API.STREAM.DELETE.${TELEMETRY_STREAM}`);
  await cannotRequest(jsm.consumers.delete(TELEMETRY_STREAM, PROCESSING_CONSUMER), `$JS.API.CONSUMER.DELETE.${TELEMETRY_STREAM}.${PROCESSING_CONSUMER}`);
  await cannotRequest(jsm.streams.getMessage(TELEMETRY_STREAM, { seq: 1 }), `$JS.API.STREAM.MSG.GET.${TELEMETRY_STREAM}`);
  await cannotRequest(jetstream(core).publish(telemetryEventSubject('dev-forged'), '{}'), telemetryEventSubject('dev-forged'));
  await cannotRequest(jetstream(core).publish(connectionEventSubject('dev-forged'), '{}'), connectionEventSubject('dev-forged'));
  await cannotRequest(jsm.streams.delete(EVENTS_STREAM), `$JS.API.STREAM.DELETE.${EVENTS_STREAM}`);
  const reader = await jetstream(core).consumers.get(EVENTS_STREAM);
  assert.ok(await reader.next({ expires: 2_000 }), 'it reads the events stream (for the applications)');
  const heard: string[] = [];
  const watcher = admin.subscribe(DEVICE_CHANGES_SUBJECT, { callback: (_error, message) => void heard.push(message.string()) });
  await admin.flush();
  core.publish(DEVICE_CHANGES_SUBJECT, 'probe');
  await core.flush();
  await admin.flush();
  watcher.unsubscribe();
  assert.deepEqual(heard, ['probe']);
});

test('commands: core puts them and the gateway takes them, but the gateway cannot put one or change their streams, and core cannot consume them', async () => {
  const [gateway, core] = [await as('gateway'), await as('core')];
  const put = await jetstream(core).publish(commandSubject('dev-cmd'), '{}');
  assert.equal(put.stream, COMMAND_STREAM, 'core puts a command');
  await cannotRequest(jetstream(gateway).publish(commandSubject('dev-cmd'), '{}'), commandSubject('dev-cmd'));
  const gatewayJsm = await jetstreamManager(gateway, { checkAPI: false });
  for (const stream of [COMMAND_STREAM, COMMAND_STATE_STREAM]) {
    const update = `$JS.API.STREAM.UPDATE.${stream}`;
    await cannotRequest(gateway.request(update, JSON.stringify({ name: stream, subjects: ['>'], max_bytes: 1 })), update);
    await cannotRequest(gatewayJsm.streams.delete(stream), `$JS.API.STREAM.DELETE.${stream}`);
    await cannotRequest(gatewayJsm.streams.purge(stream), `$JS.API.STREAM.PURGE.${stream}`);
  }
  const name = deviceConsumer('dev-cmd');
  await gatewayJsm.consumers.add(COMMAND_STREAM, { durable_name: name, filter_subject: commandSubject('dev-cmd'), ack_policy: AckPolicy.Explicit });
  const taken = await (await jetstream(gateway).consumers.get(COMMAND_STREAM, name)).next({ expires: 2_000 });
  assert.equal(taken?.subject, commandSubject('dev-cmd'), "the gateway takes the device's command");

  await jetstream(core).publish(commandSubject('dev-cmd'), '{}');
  const coreJsm = await jetstreamManager(core, { checkAPI: false });
  await cannotRequest(coreJsm.consumers.add(COMMAND_STREAM, { durable_name: 'core-reader', ack_policy: AckPolicy.Explicit }), `$JS.API.CONSUMER.CREATE.${COMMAND_STREAM}.core-reader`);
  await cannotRequest(coreJsm.consumers.info(COMMAND_STREAM, name), `$JS.API.CONSUMER.INFO.${COMMAND_STREAM}.${name}`);
  await cannotRequest(core.request(`$JS.API.CONSUMER.MSG.NEXT.${COMMAND_STREAM}.${name}`, JSON.stringify({ batch: 1, expires: 1_000_000_000 })), `$JS.API.CONSUMER.MSG.NEXT.${COMMAND_STREAM}.${name}`);
  await cannotRequest(coreJsm.streams.getMessage(COMMAND_STREAM, { seq: 1 }), `$JS.API.STREAM.MSG.GET.${COMMAND_STREAM}`);
  await cannotSubscribe(core, 'commands.>');
  await cannotSubscribe(core, '_INBOX_gateway.>'); // the commands the gateway pulls are replies there
  assert.equal((await (await jetstreamManager(admin)).streams.info(COMMAND_STREAM)).state.messages, 2, 'the commands are still there: none taken off by core');
});

/** Every request on `subject`, answered (as a stream acknowledges) from the `answerFrom`-th on (1-based), never when 0. */
function leader(subject: string, answerFrom: number): Msg[] {
  const seen: Msg[] = [];
  admin.subscribe(subject, {
    callback: (_, msg) => {
      seen.push(msg);
      if (answerFrom > 0 && seen.length >= answerFrom) msg.respond(JSON.stringify({ stream: TELEMETRY_STREAM, seq: 1 }));
    },
  });
  return seen;
}

test('publishAcknowledged: a publish nobody acknowledged is published again under the same message id, and resolves once acknowledged', async () => {
  const seen = leader('probe.dropped', 2);
  await admin.flush();
  await publishAcknowledged(jetstream(admin), 'probe.dropped', new TextEncoder().encode('{"n":1}'), { msgID: 'device-1/message-1', timeoutMs: 10_000 });
  assert.deepEqual(seen.map((m) => m.headers?.get('Nats-Msg-Id')), ['device-1/message-1', 'device-1/message-1'], 'published twice, under the same id');
  assert.deepEqual(seen.map((m) => m.string()), ['{"n":1}', '{"n":1}']);
});

test('publishAcknowledged: with no acknowledgement at all it rejects with the timeout once timeoutMs passed', async () => {
  const seen = leader('probe.silent', 0);
  await admin.flush();
  await assert.rejects(
    publishAcknowledged(jetstream(admin), 'probe.silent', new TextEncoder().encode('{}'), { msgID: 'device-1/message-2', timeoutMs: 2_500 }),
    (error: unknown) => error instanceof errors.TimeoutError,
  );
  assert.equal(seen.length, 2, 'published at the start and again after a second');
});
