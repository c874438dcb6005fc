/**
 * processing: batches written once and acknowledged only after the write, a message the database
 * refuses set aside without holding up the rest, nothing acknowledged after a stop — alone over
 * the in-memory store, and consuming the telemetry stream of a real NATS Server on 127.0.0.1.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jetstream } from '@nats-io/jetstream';
import { consumeInBatches, writeBatch, WriteProgress, type Delivery } from '../src/processing/writer.ts';
import { brokerMessageId, telemetrySubject } from '../src/shared/broker.ts';
import { encodeEnvelope, type TelemetryEnvelope } from '../src/shared/telemetry.ts';
import { captureLog, connectToBroker, startService, waitFor } from './harness.ts';
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

const options = (store: MemoryStore, signal = new AbortController().signal) => ({ store, log: captureLog('processing').log, signal, delayMs: () => 1 });

test('a batch is stored in one write; a redelivered message is stored once', async () => {
  const store = new MemoryStore();
  assert.deepEqual(await writeBatch(deliveries(envelope('m-1'), envelope('m-2'), envelope('m-3')), options(store)), { stored: 3, duplicates: 0, deadLetters: 0 });
  assert.equal(store.insertAttempts, 1, 'one statement for the batch');
  assert.deepEqual(await writeBatch(deliveries(envelope('m-2'), envelope('m-4')), options(store)), { stored: 1, duplicates: 1, deadLetters: 0 });
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
  assert.deepEqual(outcome, { stored: 2, duplicates: 0, deadLetters: 1 });
  assert.deepEqual([...store.rows.values()].map((r) => r.messageId).sort(), ['a-1', 'a-2']);
  const letter = store.deadLetters.get(JSON.stringify(['dev-poison', 'bad']));
  assert.match(letter?.error ?? '', /unsupported Unicode escape sequence/);
  assert.deepEqual(Buffer.from(letter!.bytes), batch[1]!.data, 'the message kept as it came');
  assert.ok(lines.some((l) => l.msg === 'message set aside: the database cannot store it' && l.device === 'dev-poison'));
});

test('a message that is no envelope goes to the dead letters, keyed by its hash, and never to the telemetry', async () => {
  const store = new MemoryStore();
  const outcome = await writeBatch(deliveries(Buffer.from('{"x":1}'), envelope('m-1')), options(store));
  assert.deepEqual(outcome, { stored: 1, duplicates: 0, deadLetters: 1 });
  const [letter] = store.deadLetters.values();
  assert.equal(letter?.deviceId, '');
  assert.match(letter?.messageId ?? '', /^[0-9a-f]{64}$/);
  assert.match(letter?.error ?? '', /messageId missing/);
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

test('through the broker: a poison message in the stream is set aside and every other device’s messages are stored', async () => {
  const service = await startService();
  try {
    const publisher = await connectToBroker(service.broker, 'publisher');
    const js = jetstream(publisher);
    const poison = envelope('poison-1', { x: '\u0000' }, 'dev-poison');
    await js.publish(telemetrySubject(poison.deviceId), encodeEnvelope(poison));
    for (let i = 0; i < 5; i++) await js.publish(telemetrySubject('dev-other'), encodeEnvelope(envelope(`o-${i}`, { i }, 'dev-other')));
    await waitFor(() => service.store.rows.size === 5 && service.store.deadLetters.size === 1, 'five stored and one set aside', 10_000);
    await publisher.close();
  } finally {
    await service.close();
  }
});
