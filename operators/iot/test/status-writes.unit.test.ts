import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IoTServiceStatus } from '../src/api/iotservice.ts';
import { StatusWrites } from '../src/status/status-writes.ts';

const KEY = 'devawsk8s/tenant-a';

function status(phase: IoTServiceStatus['phase'], ready: string, observedGeneration = 1, reason?: string): IoTServiceStatus {
  return { phase, observedGeneration, ready, ...(reason ? { reason } : {}) } as IoTServiceStatus;
}

function fixture() {
  let now = 1_000_000;
  const writes = new StatusWrites(5_000, () => now);
  return { writes, advance: (ms: number) => (now += ms) };
}

describe('StatusWrites', () => {
  it('writes a first status and never one equal to the cached status', () => {
    const { writes } = fixture();
    assert.equal(writes.decide(KEY, { metadata: { resourceVersion: '1' } }, status('Processing', '0/7')).write, true);
    const same = writes.decide(KEY, { metadata: { resourceVersion: '1' }, status: status('Available', '7/7') }, status('Available', '7/7'));
    assert.deepEqual(same, { write: false, current: status('Available', '7/7') });
  });

  it('does not repeat its own write while the cache still shows the object the write was based on', () => {
    const { writes, advance } = fixture();
    const stale = { metadata: { resourceVersion: '10' }, status: status('Processing', '6/7') };
    writes.written(KEY, '10', status('Available', '7/7'));
    advance(10);
    assert.equal(writes.decide(KEY, stale, status('Available', '7/7')).write, false);
    // Once the cache moves on (our write's watch event, or someone else's change), it counts again.
    const moved = { metadata: { resourceVersion: '12' }, status: status('Processing', '6/7') };
    assert.equal(writes.decide(KEY, moved, status('Available', '7/7')).write, true);
  });

  it('holds back progress within a rollout for the interval and says when to look again', () => {
    const { writes, advance } = fixture();
    writes.written(KEY, '1', status('Processing', '3/7'));
    advance(2_000);
    const cached = { metadata: { resourceVersion: '2' }, status: status('Processing', '3/7') };
    assert.deepEqual(writes.decide(KEY, cached, status('Processing', '4/7')), { write: false, current: status('Processing', '3/7'), retryAfterMs: 3_000 });
    advance(3_000);
    assert.equal(writes.decide(KEY, cached, status('Processing', '5/7')).write, true);
  });

  it('writes a change of phase, generation or reason at once', () => {
    const { writes, advance } = fixture();
    writes.written(KEY, '1', status('Processing', '3/7'));
    advance(100);
    const cached = { metadata: { resourceVersion: '2' }, status: status('Processing', '3/7') };
    assert.equal(writes.decide(KEY, cached, status('Available', '7/7')).write, true);
    assert.equal(writes.decide(KEY, cached, status('Processing', '3/7', 2)).write, true);
    assert.equal(writes.decide(KEY, cached, status('Failed', '3/7', 1, 'image-pull-secret missing')).write, true);
  });

  it('writes progress at once after the operator starts or forgets an instance', () => {
    const { writes } = fixture();
    const cached = { metadata: { resourceVersion: '2' }, status: status('Processing', '3/7') };
    assert.equal(writes.decide(KEY, cached, status('Processing', '4/7')).write, true);
    writes.written(KEY, '2', status('Processing', '4/7'));
    writes.forget(KEY);
    assert.equal(writes.decide(KEY, cached, status('Processing', '5/7')).write, true);
  });
});
