import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { shardTotals } from './scenarios/sharded.ts';

describe('sharded: the replicas summed up', () => {
  it('adds instances, CPU and requests, and keeps both the largest and the summed peak memory', () => {
    const totals = shardTotals({
      'shard-0': { instances: 700, peakRssMiB: 80.25, cpuS: 12.5, requests: 9000 },
      'shard-1': { instances: 650, peakRssMiB: 76.5, cpuS: 11.25, requests: 8500 },
      'shard-2': { instances: 650, peakRssMiB: 77, cpuS: 11, requests: 8400 },
    });
    assert.deepEqual(totals, { instances: 2000, maxPeakRssMiB: 80.3, sumPeakRssMiB: 233.8, cpuS: 34.75, requests: 25900 });
  });

  it('one replica: its own figures, largest and sum alike', () => {
    assert.deepEqual(shardTotals({ 'shard-0': { instances: 2000, peakRssMiB: 150, cpuS: 30, requests: 26000 } }), {
      instances: 2000,
      maxPeakRssMiB: 150,
      sumPeakRssMiB: 150,
      cpuS: 30,
      requests: 26000,
    });
  });
});
