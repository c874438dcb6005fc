/**
 * processing: each message written once, acknowledged only after the write, nothing acknowledged
 * after a stop — alone over the in-memory store, and through a persistent session at an
 * in-process aedes on 127.0.0.1 standing in for Mosquitto.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import mqtt from 'mqtt';
import { writeMessage } from '../src/processing/writer.ts';
import { SERVICE_USER } from '../src/shared/config.ts';
import { encodeEnvelope } from '../src/shared/telemetry.ts';
import { BROKER_PASSWORD, captureLog, startService, waitFor } from './harness.ts';
import { MemoryStore } from './memory-store.ts';

const envelope = (messageId: string) => ({ messageId, deviceId: 'dev-1', receivedAt: new Date().toISOString(), payload: { messageId } });

test('a redelivered message is stored once and acknowledged both times', async () => {
  const store = new MemoryStore();
  const options = { store, log: captureLog('processing').log, signal: new AbortController().signal, delayMs: () => 1 };
  assert.equal(await writeMessage(encodeEnvelope(envelope('m-1')), options), 'stored');
  assert.equal(await writeMessage(encodeEnvelope(envelope('m-1')), options), 'duplicate');
  assert.equal(store.rows.size, 1);
});

test('a failing write is retried; the acknowledgement waits for the write', async () => {
  const store = new MemoryStore();
  store.failNextInserts(3);
  const { log, lines } = captureLog('processing');
  assert.equal(await writeMessage(encodeEnvelope(envelope('m-2')), { store, log, signal: new AbortController().signal, delayMs: () => 1 }), 'stored');
  assert.equal(store.insertAttempts, 4);
  assert.equal(lines.filter((l) => l.msg === 'write failed; retrying before acknowledging').length, 3);
});

test('after a stop nothing is acknowledged: a write in retry gives up, a later message is not written', async () => {
  const store = new MemoryStore();
  store.failNextInserts(Number.POSITIVE_INFINITY);
  const stop = new AbortController();
  const options = { store, log: captureLog('processing').log, signal: stop.signal, delayMs: () => 5 };
  const pending = writeMessage(encodeEnvelope(envelope('m-3')), options);
  setTimeout(() => stop.abort(new Error('stopping')), 20);
  await assert.rejects(pending, /stopping/);
  store.failNextInserts(0);
  await assert.rejects(writeMessage(encodeEnvelope(envelope('m-4')), options), /stopping/);
  assert.equal(store.rows.size, 0);
});

test('a message that is no envelope is logged and acknowledged, never stored', async () => {
  const store = new MemoryStore();
  const { log, lines } = captureLog('processing');
  assert.equal(await writeMessage(Buffer.from('{"x":1}'), { store, log, signal: new AbortController().signal }), 'malformed');
  assert.equal(store.insertAttempts, 0);
  assert.equal(lines[0]?.msg, 'message dropped: not a telemetry envelope');
});

test('through the broker: a message not stored before processing stops is redelivered to its session and stored once', async () => {
  const service = await startService();
  try {
    const publisher = await mqtt.connectAsync(service.upstream.url, { username: SERVICE_USER, password: BROKER_PASSWORD, reconnectPeriod: 0 });
    await publisher.publishAsync('telemetry/dev-1', encodeEnvelope(envelope('m-10')), { qos: 1 });
    await waitFor(() => service.store.rows.size === 1, 'the first message stored');

    service.store.failNextInserts(Number.POSITIVE_INFINITY); // the database goes away
    await publisher.publishAsync('telemetry/dev-1', encodeEnvelope(envelope('m-11')), { qos: 1 });
    await waitFor(() => service.store.insertAttempts >= 3, 'writes being retried');
    await service.stopProcessing(); // unacknowledged: stays with the session at the broker

    await publisher.publishAsync('telemetry/dev-1', encodeEnvelope(envelope('m-12')), { qos: 1 }); // while processing is away
    service.store.failNextInserts(0);
    await service.startProcessing();
    await waitFor(() => service.store.rows.size === 3, 'both waiting messages stored after the restart');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual([...service.store.rows.values()].map((r) => r.messageId).sort(), ['m-10', 'm-11', 'm-12']);
    await publisher.endAsync();
  } finally {
    await service.close();
  }
});
