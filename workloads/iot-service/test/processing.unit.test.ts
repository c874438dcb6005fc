/**
 * processing: batches written once and acknowledged only after the write, a message the database
 * refuses set aside without holding up the rest and announced once in the stream DEAD_LETTERS,
 * nothing acknowledged after a stop — alone over the in-memory store, and consuming the telemetry
 * stream of a real NATS Server on 127.0.0.1.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DiscardPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { deadLetterNotices, NOTICE_ERROR_CHARS, type DeadLetterNotice } from '../src/processing/dead-letter-notices.ts';
import { consumeInBatches, writeBatch, writeRetryDelay, WriteProgress, type Delivery } from '../src/processing/writer.ts';
import {
  brokerMessageId,
  DEAD_LETTER_MAX_AGE_MS,
  DEAD_LETTER_MAX_MESSAGES,
  DEAD_LETTER_STREAM,
  ensureDeadLetterStream,
  ensureProcessingConsumer,
  PROCESSING_ACK_WAIT_MS,
  PROCESSING_CONSUMER,
  TELEMETRY_STREAM,
  telemetrySubject,
} from '../src/shared/broker.ts';
import type { DeadLetter } from '../src/shared/store.ts';
import { encodeEnvelope, type TelemetryEnvelope } from '../src/shared/telemetry.ts';
import { captureLog, connectAs, connectToBroker, startService, waitFor, type Service } from './harness.ts';
import { MemoryStore } from './memory-store.ts';

const envelope = (messageId: string, payload: Record<string, unknown> = { messageId }, deviceId = 'dev-1'): TelemetryEnvelope => ({
  messageId,
  deviceId,
  receivedAt: new Date().toISOString(),
  payload,
});

function deliveries(...envelopes: Array<TelemetryEnvelope | Buffer>): Array<Delivery & { acked: boolean; naked: boolean }> {
  return envelopes.map((e) => {
    const delivery = {
      data: Buffer.isBuffer(e) ? e : encodeEnvelope(e),
      acked: false,
      naked: false,
      ack: () => (delivery.acked = true),
      nak: () => (delivery.naked = true),
      working: () => undefined,
    };
    return delivery;
  });
}

/** The outcome's counts, and the message ids of what it kept (now in the table, in the batch's order). */
const counted = ({ kept, ...counts }: Awaited<ReturnType<typeof writeBatch>>) => ({ ...counts, kept: kept.map((e) => e.messageId) });

const options = (store: MemoryStore, signal = new AbortController().signal) => ({ store, log: captureLog('processing').log, signal, delayMs: () => 1 });

test('a batch is stored in one write; a redelivered message is stored once', async () => {
  const store = new MemoryStore();
  assert.deepEqual(counted(await writeBatch(deliveries(envelope('m-1'), envelope('m-2'), envelope('m-3')), options(store))), { stored: 3, duplicates: 0, deadLetters: 0, kept: ['m-1', 'm-2', 'm-3'] });
  assert.equal(store.insertAttempts, 1, 'one statement for the batch');
  assert.deepEqual(counted(await writeBatch(deliveries(envelope('m-2'), envelope('m-4')), options(store))), { stored: 1, duplicates: 1, deadLetters: 0, kept: ['m-2', 'm-4'] }, 'a redelivered message is kept too: its event is published again');
  assert.equal(store.rows.size, 4);
});

test('a failing write is retried, the whole batch, until it succeeds', async () => {
  const store = new MemoryStore();
  store.failNextInserts(3);
  const { log, lines } = captureLog('processing');
  const outcome = await writeBatch(deliveries(envelope('m-1'), envelope('m-2')), { store, log, signal: new AbortController().signal, delayMs: () => 1 });
  assert.equal(outcome.stored, 2);
  assert.equal(store.insertAttempts, 4);
  assert.equal(lines.filter((l) => l.msg === 'write failed; retrying before acknowledging').length, 3);
});

test('a message the database refuses for its data goes to the dead letters; the rest of its batch is stored', async () => {
  const store = new MemoryStore();
  const { log, lines } = captureLog('processing');
  const batch = deliveries(envelope('a-1', { n: 1 }, 'dev-a'), envelope('bad', { x: '\u0000' }, 'dev-poison'), envelope('a-2', { n: 2 }, 'dev-a'));
  const outcome = await writeBatch(batch, { store, log, signal: new AbortController().signal, delayMs: () => 1 });
  assert.deepEqual(counted(outcome), { stored: 2, duplicates: 0, deadLetters: 1, kept: ['a-1', 'a-2'] });
  assert.deepEqual([...store.rows.values()].map((r) => r.messageId).sort(), ['a-1', 'a-2']);
  const letter = store.deadLetters.get(JSON.stringify(['dev-poison', 'bad']));
  assert.match(letter?.error ?? '', /unsupported Unicode escape sequence/);
  assert.deepEqual(Buffer.from(letter!.bytes), batch[1]!.data, 'the message kept as it came');
  assert.ok(lines.some((l) => l.msg === 'message set aside: the database cannot store it' && l.device === 'dev-poison'));
});

test('a message that is no envelope goes to the dead letters, keyed by its hash, and never to the telemetry', async () => {
  const store = new MemoryStore();
  const outcome = await writeBatch(deliveries(Buffer.from('{"x":1}'), envelope('m-1')), options(store));
  assert.deepEqual(counted(outcome), { stored: 1, duplicates: 0, deadLetters: 1, kept: ['m-1'] });
  const [letter] = store.deadLetters.values();
  assert.equal(letter?.deviceId, '');
  assert.match(letter?.messageId ?? '', /^[0-9a-f]{64}$/);
  assert.match(letter?.error ?? '', /messageId missing/);
});

test('each dead letter is handed on once, after it is in the table, however often its batch was retried', async () => {
  const store = new MemoryStore();
  store.failNextInserts(2);
  const announced: Array<[string, string, boolean]> = [];
  const onDeadLetter = (letter: DeadLetter) => announced.push([letter.deviceId, letter.messageId, store.deadLetters.has(JSON.stringify([letter.deviceId, letter.messageId]))]);
  const batch = deliveries(envelope('a-1'), envelope('bad', { x: '\u0000' }, 'dev-poison'), Buffer.from('not json'));
  const outcome = await writeBatch(batch, { ...options(store), onDeadLetter });
  assert.deepEqual(counted(outcome), { stored: 1, duplicates: 0, deadLetters: 2, kept: ['a-1'] });
  assert.equal(store.insertAttempts, 5, 'two failed attempts, then the batch and its two halves one by one');
  assert.equal(announced.length, 2);
  assert.match(announced[0]![1], /^[0-9a-f]{64}$/, 'the message that is no envelope, by its hash');
  assert.deepEqual(announced, [['', announced[0]![1], true], ['dev-poison', 'bad', true]], 'each in the table when announced');
  await writeBatch(deliveries(envelope('a-2')), { ...options(store), onDeadLetter });
  assert.equal(announced.length, 2, 'a batch without dead letters announces none');
});

test('after a stop nothing is written or acknowledged: a write in retry gives up', async () => {
  const store = new MemoryStore();
  store.failNextInserts(Number.POSITIVE_INFINITY);
  const stop = new AbortController();
  const pending = writeBatch(deliveries(envelope('m-3')), options(store, stop.signal));
  setTimeout(() => stop.abort(new Error('stopping')), 20);
  await assert.rejects(pending, /stopping/);
  store.failNextInserts(0);
  await assert.rejects(writeBatch(deliveries(envelope('m-4')), options(store, stop.signal)), /stopping/);
  assert.equal(store.rows.size, 0);
});

test('consumeInBatches: what arrives while a batch is written forms the next batch; each acknowledged after its write', async () => {
  const arrived = deliveries(...Array.from({ length: 25 }, (_, i) => envelope(`m-${i}`)));
  async function* source() {
    for (const delivery of arrived) {
      yield delivery;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  const batches: number[] = [];
  const write = async (batch: Delivery[]) => {
    assert.ok(arrived.filter((d) => batch.includes(d)).every((d) => !d.acked), 'acknowledged only after the write');
    batches.push(batch.length);
    await new Promise((resolve) => setTimeout(resolve, 5));
  };
  await consumeInBatches(source(), write, { maxBatch: 10, signal: new AbortController().signal });
  assert.equal(batches.reduce((a, b) => a + b, 0), 25);
  assert.ok(batches.length < 25, `batched (${batches.join(', ')})`);
  assert.ok(batches.every((n) => n <= 10));
  assert.ok(arrived.every((d) => d.acked && !d.naked));
});

test('WriteProgress: stalled only while messages wait with no batch written; a written batch starts the clock again', () => {
  const progress = new WriteProgress();
  assert.equal(progress.stalledForMs(1_000), 0, 'nothing waits');
  progress.arrived(1_000);
  progress.arrived(5_000);
  assert.equal(progress.stalledForMs(61_000), 60_000, 'since the first message that waits');
  progress.written(true, 61_000);
  assert.equal(progress.stalledForMs(62_000), 1_000, 'more wait: from the last write');
  progress.written(false, 62_000);
  assert.equal(progress.stalledForMs(200_000), 0, 'none wait');
});

test('consumeInBatches keeps WriteProgress: a write that keeps failing shows as stalled, and clears once written', async () => {
  const progress = new WriteProgress();
  const stop = new AbortController();
  let failing = true;
  async function* source() {
    yield* deliveries(envelope('m-1'));
    await new Promise(() => undefined);
  }
  const write = async () => {
    while (failing) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  const consuming = consumeInBatches(source(), write, { maxBatch: 10, signal: stop.signal, progress });
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.ok(progress.stalledForMs() >= 40, 'stalled while the write does not complete');
  failing = false;
  await waitFor(() => progress.stalledForMs() === 0, 'nothing waits once written');
  stop.abort();
  await consuming;
});

test('consumeInBatches: at a stop, the batch being written and those waiting are handed back, none acknowledged', async () => {
  const arrived = deliveries(...Array.from({ length: 4 }, (_, i) => envelope(`m-${i}`)));
  const stop = new AbortController();
  async function* source() {
    yield* arrived;
    await new Promise(() => undefined); // the stream stays open
  }
  const write = (_batch: Delivery[], signal = stop.signal) =>
    new Promise<void>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
  const consuming = consumeInBatches(source(), write, { maxBatch: 2, signal: stop.signal });
  await new Promise((resolve) => setTimeout(resolve, 20));
  stop.abort(new Error('stopping'));
  await consuming;
  assert.ok(arrived.every((d) => !d.acked && d.naked), JSON.stringify(arrived.map((d) => [d.acked, d.naked])));
});

test('consumeInBatches: what the source still yields after a stop is handed back at once, none acknowledged', async () => {
  const first = deliveries(envelope('m-0'));
  const late = deliveries(envelope('m-1'), envelope('m-2'));
  const stop = new AbortController();
  let stopped: () => void = () => undefined;
  async function* source() {
    yield* first;
    await new Promise<void>((resolve) => (stopped = resolve));
    yield* late; // what the last pull brought, yielded before the source ends
  }
  const write = (_batch: Delivery[]) => new Promise<void>((_resolve, reject) => stop.signal.addEventListener('abort', () => reject(stop.signal.reason as Error)));
  const consuming = consumeInBatches(source(), write, { maxBatch: 10, signal: stop.signal });
  await new Promise((resolve) => setTimeout(resolve, 20));
  stop.abort(new Error('stopping'));
  await consuming;
  stopped();
  await waitFor(() => late.every((d) => d.naked), 'the late deliveries handed back');
  assert.ok([...first, ...late].every((d) => !d.acked && d.naked), JSON.stringify([...first, ...late].map((d) => [d.acked, d.naked])));
});

test('through the broker: a message not stored before processing stops is handed out again and stored once', async () => {
  const service = await startService();
  try {
    const publisher = await connectToBroker(service.broker, 'publisher');
    const js = jetstream(publisher);
    const publish = (e: TelemetryEnvelope) => js.publish(telemetrySubject(e.deviceId), encodeEnvelope(e), { msgID: brokerMessageId(e.deviceId, e.messageId) });
    await publish(envelope('m-10'));
    await waitFor(() => service.store.rows.size === 1, 'the first message stored');

    service.store.failNextInserts(Number.POSITIVE_INFINITY); // the database goes away
    await publish(envelope('m-11'));
    await waitFor(() => service.store.insertAttempts >= 3, 'writes being retried');
    await service.stopProcessing(); // unacknowledged: stays in the stream

    await publish(envelope('m-12')); // while processing is away
    service.store.failNextInserts(0);
    await service.startProcessing();
    await waitFor(() => service.store.rows.size === 3, 'both waiting messages stored after the restart', 10_000);
    assert.deepEqual([...service.store.rows.values()].map((r) => r.messageId).sort(), ['m-10', 'm-11', 'm-12']);
    await publisher.close();
  } finally {
    await service.close();
  }
});

test('through the broker: a poison message in the stream is set aside, announced in DEAD_LETTERS, and every other device’s messages are stored', () =>
  withService(async (service, client) => {
    const js = jetstream(client);
    const poison = envelope('poison-1', { x: '\u0000' }, 'dev-poison');
    await js.publish(telemetrySubject(poison.deviceId), encodeEnvelope(poison));
    for (let i = 0; i < 5; i++) await js.publish(telemetrySubject('dev-other'), encodeEnvelope(envelope(`o-${i}`, { i }, 'dev-other')));
    await waitFor(() => service.store.rows.size === 5 && service.store.deadLetters.size === 1, 'five stored and one set aside', 10_000);
    const jsm = await jetstreamManager(client);
    await waitForAsync(async () => (await jsm.streams.info(DEAD_LETTER_STREAM)).state.messages === 1, 'the notice in DEAD_LETTERS');
    const stored = await jsm.streams.getMessage(DEAD_LETTER_STREAM, { seq: 1 });
    assert.equal(stored?.subject, 'deadletters.refused.dev-poison');
    assert.equal(stored?.header?.get('Nats-Msg-Id'), 'dev-poison/poison-1');
    const notice = stored!.json<DeadLetterNotice>();
    assert.deepEqual({ ...notice, failedAt: undefined }, { deviceId: 'dev-poison', messageId: 'poison-1', error: 'unsupported Unicode escape sequence', failedAt: undefined });
    assert.ok(Math.abs(Date.parse(notice.failedAt) - Date.now()) < 10_000, notice.failedAt);
  }));

test('the DEAD_LETTERS stream as core makes it: limits retention, 30 days and 100,000 notices at most, the oldest dropped; other limits are updated', () =>
  withService(async (service, client) => {
    const jsm = await jetstreamManager(client);
    const made = (await jsm.streams.info(DEAD_LETTER_STREAM)).config;
    assert.deepEqual(
      { subjects: made.subjects, storage: made.storage, retention: made.retention, discard: made.discard, replicas: made.num_replicas, maxAge: made.max_age, maxMsgs: made.max_msgs },
      { subjects: ['deadletters.>'], storage: StorageType.File, retention: RetentionPolicy.Limits, discard: DiscardPolicy.Old, replicas: 1, maxAge: DEAD_LETTER_MAX_AGE_MS * 1_000_000, maxMsgs: DEAD_LETTER_MAX_MESSAGES },
    );
    await jsm.streams.update(DEAD_LETTER_STREAM, { ...made, max_msgs: 10, max_age: 3_600_000_000_000 });
    await ensureDeadLetterStream(jsm, service.stream);
    const updated = (await jsm.streams.info(DEAD_LETTER_STREAM)).config;
    assert.deepEqual([updated.max_msgs, updated.max_age], [DEAD_LETTER_MAX_MESSAGES, DEAD_LETTER_MAX_AGE_MS * 1_000_000]);
  }));

test('the consumer processing as core makes it hands out again what is not acknowledged within 5 s; one made before with another ack wait is given 5 s', () =>
  withService(async (service, client) => {
    const jsm = await jetstreamManager(client);
    const ackWait = async () => (await jsm.consumers.info(TELEMETRY_STREAM, PROCESSING_CONSUMER)).config.ack_wait;
    assert.equal(await ackWait(), PROCESSING_ACK_WAIT_MS * 1_000_000);
    await jsm.consumers.update(TELEMETRY_STREAM, PROCESSING_CONSUMER, { ack_wait: 30_000_000_000 }); // as instances made before
    const core = await connectAs(service.broker, 'core', 'core-test');
    try {
      await ensureProcessingConsumer(await jetstreamManager(core, { checkAPI: false })); // as core, with its broker user's rights
    } finally {
      await core.close();
    }
    assert.equal(await ackWait(), 5_000_000_000);
  }));

test('through the broker: a dead letter of a batch handed out again is counted once; the error is cut to 500 characters', () =>
  withService(async (service, client) => {
    const jsm = await jetstreamManager(client);
    const onDeadLetter = deadLetterNotices(client, captureLog('processing').log);
    const write = (...envelopes: TelemetryEnvelope[]) => writeBatch(deliveries(...envelopes), { ...options(service.store), onDeadLetter });
    const poison = envelope('p-1', { x: '\u0000' }, 'dev.poison');
    await write(poison, envelope('ok-1'));
    await write(poison, envelope('ok-1')); // the same batch again, as after a restart before the acknowledgement
    onDeadLetter({ deviceId: 'dev-long', messageId: 'p-2', bytes: new Uint8Array(), error: 'e'.repeat(2_000) });
    // Notices from one connection reach the stream in order: once the last is in, the repeat was dropped.
    const lastIn = () => jsm.streams.getMessage(DEAD_LETTER_STREAM, { last_by_subj: 'deadletters.refused.dev-long' }).then((m) => m !== null);
    await waitForAsync(lastIn, 'the last letter announced');
    const { state } = await jsm.streams.info(DEAD_LETTER_STREAM);
    assert.deepEqual([state.messages, state.last_seq], [2, 2]);
    assert.equal((await jsm.streams.getMessage(DEAD_LETTER_STREAM, { seq: 1 }))?.subject, 'deadletters.refused.dev%2Epoison');
    const long = (await jsm.streams.getMessage(DEAD_LETTER_STREAM, { seq: 2 }))!.json<DeadLetterNotice>();
    assert.equal(long.error.length, NOTICE_ERROR_CHARS);
  }));

test('through the broker: without the DEAD_LETTERS stream, a dead letter is kept and logged and telemetry flows on', () =>
  withService(async (service, client) => {
    await (await jetstreamManager(client)).streams.delete(DEAD_LETTER_STREAM);
    const js = jetstream(client);
    const poison = envelope('poison-2', { x: '\u0000' }, 'dev-poison');
    await js.publish(telemetrySubject(poison.deviceId), encodeEnvelope(poison));
    for (let i = 0; i < 3; i++) await js.publish(telemetrySubject('dev-other'), encodeEnvelope(envelope(`n-${i}`, { i }, 'dev-other')));
    await waitFor(() => service.store.rows.size === 3 && service.store.deadLetters.size === 1, 'three stored and one set aside', 10_000);
    await waitFor(
      () => service.logs.processing.lines.some((l) => l.msg === 'dead-letter notice not published; the letter is in the table' && l.device === 'dev-poison' && l.messageId === 'poison-2'),
      'the failed notice logged',
    );
  }));

/** Runs `body` against a service with processing and a client connection of its broker; closes both however it ends. */
async function withService(body: (service: Service, client: NatsConnection) => Promise<void>): Promise<void> {
  const service = await startService();
  try {
    const client = await connectToBroker(service.broker, 'test-client');
    try {
      await body(service, client);
    } finally {
      await client.close();
    }
  } finally {
    await service.close();
  }
}

async function waitForAsync(condition: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test('a failed write is tried again at most a second later, so writes resume within a second of the database being back', () => {
  assert.deepEqual([1, 2, 3, 4, 5, 20].map(writeRetryDelay), [200, 400, 800, 1000, 1000, 1000]);
});
