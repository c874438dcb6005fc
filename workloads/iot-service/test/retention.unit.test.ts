/**
 * Retention: what is older than the window is deleted in batches until none is left, what is
 * newer is kept, and a failing round is logged and tried again.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deleteExpiredRows, keepRetention } from '../src/processing/retention.ts';
import { captureLog, waitFor } from './harness.ts';
import { MemoryStore } from './memory-store.ts';

const ago = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();

async function storeWith(ages: number[]): Promise<MemoryStore> {
  const store = new MemoryStore();
  await store.insertTelemetry(ages.map((age, i) => ({ deviceId: 'dev-1', messageId: `m-${i}`, receivedAt: ago(age), payload: { age } })));
  return store;
}

test('rows older than the window are deleted in batches until none is left; newer ones are kept', async () => {
  const store = await storeWith([...Array.from({ length: 23 }, () => 7200), 10, 20]);
  const calls: number[] = [];
  const counting = { deleteExpired: async (seconds: number, limit: number) => calls.push(limit) && store.deleteExpired(seconds, limit) };
  const deleted = await deleteExpiredRows({ store: counting, seconds: 3600, batch: 10, log: captureLog('processing').log, signal: new AbortController().signal });
  assert.equal(deleted, 23);
  assert.equal(calls.length, 3, 'batches of 10, 10 and 3');
  assert.deepEqual([...store.rows.values()].map((r) => (r.payload as { age: number }).age).sort(), [10, 20]);
});

test('keepRetention runs at start and on every interval; a failed round is logged and the next one deletes', async () => {
  const store = await storeWith([7200]);
  let failures = 1;
  const flaky = {
    deleteExpired: async (seconds: number, limit: number) => {
      if (failures-- > 0) throw new Error('database unavailable');
      return store.deleteExpired(seconds, limit);
    },
  };
  const { log, lines } = captureLog('processing');
  const stop = new AbortController();
  keepRetention({ store: flaky, seconds: 3600, log, signal: stop.signal, intervalMs: 20 });
  try {
    await waitFor(() => store.rows.size === 0, 'the expired row deleted by a later round');
    assert.ok(lines.some((l) => l.msg === 'retention round failed; trying again at the next'));
    await waitFor(() => lines.some((l) => l.msg === 'expired telemetry deleted' && l.rows === 1), 'the deletion logged');
  } finally {
    stop.abort();
  }
});
