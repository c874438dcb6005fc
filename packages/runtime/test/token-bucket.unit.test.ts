// The token bucket on a fake clock: a full bucket lets `burst` through at once, then one token
// every 1/qps s, first come first served; over t seconds at most burst + qps × t fall due; an
// abandoned wait gives its token back.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TokenBucket } from '../src/client/token-bucket.ts';

describe('token bucket', () => {
  it('lets a burst through, then spaces reservations 1/qps apart, refilling while idle', () => {
    let now = 0;
    const bucket = new TokenBucket({ qps: 10, burst: 3 }, () => now);
    const waits = Array.from({ length: 6 }, () => Math.round(bucket.reserve()));
    assert.deepEqual(waits, [0, 0, 0, 100, 200, 300]);
    now = 10_000;
    assert.deepEqual(Array.from({ length: 4 }, () => Math.round(bucket.reserve())), [0, 0, 0, 100], 'idle for 10 s refills up to burst, no more');
  });

  it('over any span of t seconds at most burst + qps × t reservations fall due', () => {
    let now = 0;
    const bucket = new TokenBucket({ qps: 20, burst: 30 }, () => now);
    const due: number[] = [];
    for (let i = 0; i < 500; i++) {
      now = i * 2; // callers arrive every 2 ms, far faster than 20 a second
      due.push(now + bucket.reserve());
    }
    for (const start of due) {
      for (const seconds of [1, 5]) {
        const inWindow = due.filter((at) => at >= start && at < start + seconds * 1000 - 1e-6).length;
        assert.ok(inWindow <= 30 + 20 * seconds, `${inWindow} due within ${seconds} s from ${start} ms`);
      }
    }
  });

  it('an aborted wait gives its token back', async () => {
    const bucket = new TokenBucket({ qps: 1, burst: 1 });
    assert.equal(await bucket.wait(), 0);
    const abort = new AbortController();
    const waiting = bucket.wait(abort.signal);
    abort.abort(new Error('stopped'));
    await assert.rejects(waiting, /stopped/);
    assert.ok(bucket.reserve() <= 1000 + 1, 'the next caller waits one interval, not two');
  });

  it('refuses a limit it cannot honour', () => {
    assert.throws(() => new TokenBucket({ qps: 0, burst: 1 }), /qps > 0 and burst >= 1/);
    assert.throws(() => new TokenBucket({ qps: 5, burst: 0 }), /qps > 0 and burst >= 1/);
  });
});
