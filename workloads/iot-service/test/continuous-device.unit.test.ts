/**
 * The continuous device (simulator/continuous.ts) against the whole service in one process on
 * 127.0.0.1: it sends over MQTT and HTTP without pause, every message it was acknowledged is
 * stored exactly once under the id the device gave it — also when acknowledgements come too late
 * and it sends messages again, which then reach the broker twice — and it stops on a refusal
 * retrying cannot fix; `periodMs` paces it. The figures' helpers are checked on a made-up timeline.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  inFlightAt,
  longestAckGapMs,
  longestWaitMs,
  PermanentRefusal,
  readAllTelemetry,
  registerDevice,
  startContinuousDevice,
  type DeviceMessage,
} from '../src/simulator/index.ts';
import { API_TOKEN, startService, waitFor, type Service } from './harness.ts';

let service: Service;
before(async () => {
  service = await startService();
});
after(() => service.close());

const addresses = () => ({ coreUrl: service.coreUrl, gatewayHttpUrl: service.gatewayHttpUrl, gatewayMqttUrl: service.gatewayMqttUrl, apiToken: API_TOKEN });

/** Waits until core lists `count` records of the device; returns them. */
async function storedOf(deviceId: string, count: number) {
  await waitFor(() => [...service.store.rows.values()].filter((r) => r.deviceId === deviceId).length >= count, `${count} messages of ${deviceId} stored`);
  return readAllTelemetry(addresses(), deviceId, 7);
}

test('sends over both protocols without pause; every acknowledged message is stored once under its own id, read back page by page', async () => {
  const device = await registerDevice(addresses(), 'cont-1');
  const running = startContinuousDevice(addresses(), device);
  await waitFor(() => running.messages.filter((m) => m.ackedAt !== undefined && m.via === 'http').length >= 10, 'ten HTTP messages acknowledged');
  await waitFor(() => running.messages.filter((m) => m.ackedAt !== undefined && m.via === 'mqtt').length >= 10, 'ten MQTT messages acknowledged');
  const messages = await running.stop();

  assert.ok(messages.every((m) => m.ackedAt !== undefined), 'stop waits for the message in flight');
  assert.deepEqual(running.failures, []);
  assert.ok(messages.every((m) => m.attempts === 1));
  const records = await storedOf('cont-1', messages.length);
  assert.equal(records.length, messages.length, 'as many records as acknowledged messages');
  assert.deepEqual(records.map((r) => r.messageId).sort(), messages.map((m) => m.messageId).sort());
  for (const via of ['mqtt', 'http'] as const) {
    const seqs = messages.filter((m) => m.via === via).map((m) => m.seq);
    assert.deepEqual(seqs, seqs.map((_, i) => i), `${via}: consecutive sequence numbers from 0`);
  }
  for (const record of records) {
    assert.equal((record.payload as { messageId: string }).messageId, record.messageId, 'the payload is the message sent under that id');
    assert.ok(!Number.isNaN(Date.parse(record.storedAt)));
  }
});

test('periodMs paces each loop: message n begins no sooner than n × periodMs after the first, however fast they are acknowledged', async () => {
  const device = await registerDevice(addresses(), 'cont-paced');
  const running = startContinuousDevice(addresses(), device, { protocols: ['mqtt'], periodMs: 100 });
  await sleep(1_050);
  const messages = await running.stop();
  assert.ok(messages.length >= 9 && messages.length <= 12, `about ten messages in a second, not as many as acknowledgements allow: ${messages.length}`);
  const first = messages[0]!.firstSentAt;
  const early = messages.filter((m) => m.firstSentAt - first < m.seq * 100 - 1);
  assert.deepEqual(early.map((m) => m.seq), [], `offsets: ${messages.map((m) => m.firstSentAt - first).join(', ')}`);
});

test('acknowledgements later than the attempt timeout: the same messages are sent again, on both protocols, and stored once', async () => {
  const device = await registerDevice(addresses(), 'cont-2');
  const running = startContinuousDevice(addresses(), device, { attemptTimeoutMs: 150, retryDelayMs: 20 });
  await waitFor(() => running.messages.filter((m) => m.ackedAt !== undefined).length >= 4, 'first messages acknowledged');
  service.broker.pause();
  await sleep(600);
  service.broker.resume();
  await waitFor(() => running.messages.filter((m) => m.attempts > 1 && m.ackedAt !== undefined).length >= 2, 'the retried messages acknowledged');
  const messages = await running.stop();

  const retried = messages.filter((m) => m.attempts > 1);
  assert.ok(running.failures.length >= retried.length, 'each repetition follows a failed attempt');
  assert.deepEqual([...new Set(retried.map((m) => m.via))].sort(), ['http', 'mqtt'], 'messages sent again on both protocols');

  const records = await storedOf('cont-2', messages.length);
  await sleep(100); // duplicates, if any, would land now
  const again = await readAllTelemetry(addresses(), 'cont-2');
  assert.equal(again.length, messages.length, 'no message stored twice');
  assert.deepEqual(records.map((r) => r.messageId).sort(), messages.map((m) => m.messageId).sort());
});

test('wrong credentials stop the device: done rejects with a PermanentRefusal on either protocol', async () => {
  const device = await registerDevice(addresses(), 'cont-3');
  for (const via of ['mqtt', 'http'] as const) {
    const running = startContinuousDevice(addresses(), { id: device.id, password: 'wrong' }, { protocols: [via], retryDelayMs: 10 });
    await assert.rejects(running.done, (e: unknown) => e instanceof PermanentRefusal && (via === 'mqtt' ? /refused/.test(e.message) : /HTTP 401/.test(e.message)), via);
    await assert.rejects(running.stop(1_000), PermanentRefusal);
    assert.equal(running.messages[0]?.ackedAt, undefined);
  }
});

test('stop gives up after its timeout when the gateway never answers, naming what is unacknowledged', async () => {
  const device = await registerDevice(addresses(), 'cont-4');
  const nowhere = { gatewayHttpUrl: 'http://127.0.0.1:9', gatewayMqttUrl: 'mqtt://127.0.0.1:9' };
  const running = startContinuousDevice(nowhere, device, { retryDelayMs: 10 });
  await waitFor(() => running.failures.length >= 4, 'failed attempts');
  await assert.rejects(running.stop(200), /cont-4-mqtt-0 \(\d+ attempts\).*cont-4-http-0|cont-4-http-0 \(\d+ attempts\).*cont-4-mqtt-0/);
  const attempts = running.messages.reduce((sum, m) => sum + m.attempts, 0);
  await sleep(100);
  assert.equal(running.messages.reduce((sum, m) => sum + m.attempts, 0), attempts, 'nothing is sent after stop gave up');
});

test('the window figures: longest gap without acknowledgement, longest wait, messages in flight', () => {
  const m = (messageId: string, firstSentAt: number, ackedAt?: number, via: 'mqtt' | 'http' = 'mqtt'): DeviceMessage => ({ messageId, via, seq: 0, firstSentAt, attempts: 1, ...(ackedAt === undefined ? {} : { ackedAt }) });
  const messages = [m('a', 0, 10), m('b', 10, 20, 'http'), m('c', 20, 500), m('d', 25, 90, 'http'), m('e', 500, 510), m('f', 510)];
  assert.equal(longestAckGapMs(messages, 0, 600), 410, 'from 90 to 500');
  assert.equal(longestAckGapMs(messages, 0, 600, 'http'), 510, 'http: from 90 to the end of the window');
  assert.equal(longestAckGapMs(messages, 100, 200), 100, 'no acknowledgement within the window: all of it');
  assert.equal(longestWaitMs(messages, 0, 600), 480, 'c waited from 20 to 500');
  assert.equal(longestWaitMs(messages, 0, 15), 10, 'c was sent after the window');
  assert.equal(longestWaitMs(messages, 0, 20), 480, 'c was sent at the end of the window');
  assert.equal(longestWaitMs(messages, 505, 600), 90, 'f unacknowledged at the end of the window');
  assert.deepEqual(inFlightAt(messages, 30).map((x) => x.messageId), ['c', 'd']);
  assert.deepEqual(inFlightAt(messages, 500).map((x) => x.messageId), ['e']);
  assert.deepEqual(inFlightAt(messages, 700).map((x) => x.messageId), ['f']);
});
