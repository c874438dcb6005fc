/**
 * The `applications` scenario's pure parts (bench/lib/applications.ts): only what was sent within
 * the window is counted, what never arrived is missing rather than fast, and the percentiles are
 * those of the arrivals.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { arrivalsWithin, latencySummary } from './lib/applications.ts';

describe('applications scenario: arrivals and their latency', () => {
  it('counts what was sent within [from, to), and the time each of those took to arrive', () => {
    const sent = [
      { id: 'before', sentAt: 999 },
      { id: 'a', sentAt: 1000 },
      { id: 'b', sentAt: 1500 },
      { id: 'lost', sentAt: 1600 },
      { id: 'at-end', sentAt: 2000 },
    ];
    const arrivedAt = new Map([
      ['before', 1005],
      ['a', 1040],
      ['b', 1730],
      ['at-end', 2001],
    ]);
    assert.deepEqual(arrivalsWithin(sent, arrivedAt, 1000, 2000), { sent: 3, arrived: 2, latenciesMs: [40, 230] });
  });

  it('summarises latencies as p50, p95, p99 and max, to 0.1 ms; none gives NaN', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1); // 1..100 ms
    assert.deepEqual(latencySummary(values), { count: 100, p50Ms: 50.5, p95Ms: 95.1, p99Ms: 99, maxMs: 100 });
    const none = latencySummary([]);
    assert.equal(none.count, 0);
    assert.ok(Number.isNaN(none.p99Ms));
  });
});
