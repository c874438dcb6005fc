import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RuntimeMetrics } from '../src/metrics/runtime-metrics.ts';
import { ExponentialBackoff, WorkQueue } from '../src/queue/workqueue.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('work queue', () => {
  it('holds a key once however often it is added, FIFO across keys', async () => {
    const q = new WorkQueue('t');
    for (const key of ['a', 'b', 'a', 'a', 'c', 'b']) q.add(key);
    assert.equal(q.length, 3);
    assert.deepEqual([await q.get(), await q.get(), await q.get()], ['a', 'b', 'c']);
  });

  it('low-priority keys wait behind normal ones, the two alternating while both wait, FIFO within each', async () => {
    const q = new WorkQueue('t');
    for (const key of ['new-1', 'new-2', 'new-3', 'new-4']) q.add(key, 'low');
    assert.equal(await q.get(), 'new-1', 'with nothing else waiting a low key is handed out at once');
    for (const key of ['follow-a', 'follow-b']) q.add(key);
    assert.equal(q.length, 5);
    const order = [];
    for (let i = 0; i < 5; i++) order.push(await q.get());
    assert.deepEqual(order, ['follow-a', 'new-2', 'follow-b', 'new-3', 'new-4']);
  });

  it('a waiting low key added at normal priority moves to the normal keys, once', async () => {
    const q = new WorkQueue('t');
    for (const key of ['a', 'b', 'c']) q.add(key, 'low');
    q.add('n');
    q.add('c');
    q.add('c', 'low');
    assert.equal(q.length, 4, 'the raised key is held once');
    const order = [];
    for (let i = 0; i < 4; i++) order.push(await q.get());
    assert.deepEqual(order, ['n', 'a', 'c', 'b']);
    assert.equal(q.length, 0, 'the raised key left no second entry behind');
  });

  it('a key added while processing comes back at the highest priority it was added with meanwhile', async () => {
    const q = new WorkQueue('t');
    q.add('low-only');
    q.add('raised');
    assert.deepEqual([await q.get(), await q.get()], ['low-only', 'raised']);
    q.add('low-only', 'low');
    q.add('raised', 'low');
    q.add('raised');
    q.add('earlier-normal');
    q.add('earlier-low', 'low');
    q.done('raised');
    q.done('low-only');
    const order = [];
    for (let i = 0; i < 4; i++) order.push(await q.get());
    // Normal keys: earlier-normal, raised; low ones: earlier-low, low-only; a low one goes first
    // because the last key handed out was a normal one.
    assert.deepEqual(order, ['earlier-low', 'earlier-normal', 'low-only', 'raised']);
  });

  it('never hands out a key that is being processed; an add during processing runs once more after done', async () => {
    const q = new WorkQueue('t');
    q.add('a');
    const first = await q.get();
    assert.equal(first, 'a');
    q.add('a');
    q.add('a');
    assert.equal(q.length, 0, 'a key in processing must not be queued again');
    let second: string | undefined;
    void q.get().then((k) => (second = k));
    await tick();
    assert.equal(second, undefined, 'a worker must not receive a key that is still processing');
    q.done('a');
    await tick();
    assert.equal(second, 'a');
    q.done('a');
    assert.equal(q.length, 0, 'two adds during processing merge into one rerun');
  });

  it('many concurrent workers never reconcile one key at the same time, and every burst is processed', async () => {
    const q = new WorkQueue('t');
    const active = new Set<string>();
    let overlaps = 0;
    const processed = new Map<string, number>();
    const worker = async () => {
      for (;;) {
        const key = await q.get();
        if (key === undefined) return;
        if (active.has(key)) overlaps++;
        active.add(key);
        await new Promise((r) => setTimeout(r, Math.random() * 3));
        processed.set(key, (processed.get(key) ?? 0) + 1);
        active.delete(key);
        q.done(key);
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    for (let round = 0; round < 50; round++) {
      for (const key of ['x', 'y', 'z']) q.add(key);
      await new Promise((r) => setTimeout(r, 1));
    }
    while (q.length > 0 || active.size > 0) await new Promise((r) => setTimeout(r, 5));
    q.shutdown();
    await Promise.all(workers);
    assert.equal(overlaps, 0);
    for (const key of ['x', 'y', 'z']) {
      const n = processed.get(key) ?? 0;
      assert.ok(n >= 1 && n <= 50, `key ${key} processed ${n} times; expected between 1 and 50 (bursts merge)`);
    }
  });

  it('backs off per key exponentially from 5 ms to 1000 s and forgets on success', () => {
    const b = new ExponentialBackoff();
    const delays = Array.from({ length: 20 }, () => b.when('k'));
    assert.deepEqual(delays.slice(0, 4), [5, 10, 20, 40]);
    assert.equal(delays.at(-1), 1_000_000);
    assert.equal(b.when('other'), 5, 'backoff is per key');
    b.forget('k');
    assert.equal(b.when('k'), 5);
  });

  it('delayed adds wait, keep the earliest deadline and dedup with direct adds', async () => {
    const q = new WorkQueue('t');
    q.addAfter('a', 40);
    q.addAfter('a', 10);
    assert.equal(q.length, 0);
    await new Promise((r) => setTimeout(r, 25));
    assert.equal(q.length, 1, 'the earlier deadline wins');
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(q.length, 1, 'the later delayed add was merged, not added again');
  });

  it('rate-limited adds are delayed by the key backoff', async () => {
    const q = new WorkQueue('t', undefined, { baseDelayMs: 20, maxDelayMs: 1000 });
    q.addRateLimited('a');
    assert.equal(q.length, 0);
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(q.length, 1);
    assert.equal(q.backoff.retries('a'), 1);
  });

  it('shutdown wakes idle workers, refuses new adds and drains in-flight keys', async () => {
    const q = new WorkQueue('t');
    q.add('a');
    const inFlight = await q.get();
    q.add('b');
    const queuedBeforeShutdown = q.length;
    await q.get().then((k) => q.done(k!));
    const idle = q.get();
    await tick();
    q.shutdown();
    assert.equal(queuedBeforeShutdown, 1);
    assert.equal(await idle, undefined);
    q.add('c');
    assert.equal(q.length, 0, 'no adds after shutdown');
    let drained = false;
    const drain = q.drain().then(() => (drained = true));
    await tick();
    assert.equal(drained, false, 'drain waits for the key in flight');
    q.done(inFlight!);
    await drain;
    assert.equal(drained, true);
  });

  it('reports the work in progress: unfinished seconds summed over keys, the longest one, both 0 when idle', async () => {
    const metrics = new RuntimeMetrics();
    const q = new WorkQueue('busy', metrics);
    const gauge = async (g: RuntimeMetrics['unfinishedWork']) => (await g.get()).values.find((v) => v.labels.name === 'busy')?.value;
    q.add('a');
    q.add('b');
    await q.get();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await q.get();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const longest = (await gauge(metrics.longestRunningProcessor))!;
    const unfinished = (await gauge(metrics.unfinishedWork))!;
    assert.ok(longest >= 0.29 && longest < 5, `longest running ${longest} s: the first key, handed out 300 ms ago`);
    assert.ok(unfinished >= longest + 0.09 && unfinished < 10, `unfinished ${unfinished} s: both keys' time so far`);
    q.done('a');
    q.done('b');
    assert.equal(await gauge(metrics.longestRunningProcessor), 0);
    assert.equal(await gauge(metrics.unfinishedWork), 0);
  });

  it('many failing keys retry within the overall bucket on top of per-key backoff', async () => {
    const q = new WorkQueue('many', undefined, { baseDelayMs: 1, maxDelayMs: 1 }, { qps: 100, burst: 10 });
    const keepAlive = setInterval(() => {}, 1000); // the queue's own timers do not hold the process
    const handedOut: number[] = [];
    const started = performance.now();
    for (let i = 0; i < 40; i++) q.addRateLimited(`key-${i}`);
    while (handedOut.length < 40) {
      const key = (await q.get())!;
      handedOut.push(performance.now() - started);
      q.done(key);
    }
    clearInterval(keepAlive);
    // 10 at once, then one every 10 ms: the 40th is due 300 ms after the first.
    assert.ok(handedOut[9]! < 200, `the burst of 10 goes at once (10th after ${handedOut[9]} ms)`);
    assert.ok(handedOut[39]! >= 290, `the 40th waits for its token (after ${handedOut[39]} ms)`);
  });
});
