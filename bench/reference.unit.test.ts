/**
 * Unit tests of the reference scenario's pure parts (bench/lib/reference.ts): where the
 * acknowledged rate saturates, which step comes next and how the latency step is paced, the
 * kubelet's stats/summary and the cgroup files read into per-pod figures, CPU limits, image sizes
 * from manifests, and the database's count of stored messages and their latency.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  cpuCores,
  latencyPace,
  latencySql,
  latestWorkingSet,
  limitedBy,
  limitingPod,
  manifestBytes,
  maxWorkingSetWithin,
  nextDevices,
  parseCpuStat,
  parseLatency,
  parsePerSecond,
  parseStoredCount,
  perSecondCounts,
  parseSummaryPods,
  podCpuLimit,
  podKeys,
  saturation,
  storedCountSql,
  storedPerSecondSql,
  workingSetBytes,
} from './lib/reference.ts';

const steps = (...pairs: [number, number][]) => pairs.map(([devices, perS]) => ({ devices, perS }));

describe('saturation', () => {
  it('is the step from which no step beats the best before it by 10 %, with the peak of all', () => {
    assert.deepEqual(saturation(steps([1, 300], [4, 900], [16, 1200], [64, 1150])), {
      devices: 64, previousDevices: 16, index: 3, peakPerS: 1200, peakDevices: 16,
    });
    // 1,000 → 1,090 is +9 %, and nothing after beats 1,000 by 10 %: it stopped growing at 16
    assert.deepEqual(saturation(steps([1, 300], [4, 1000], [16, 1090], [64, 1050])), {
      devices: 16, previousDevices: 4, index: 2, peakPerS: 1090, peakDevices: 16,
    });
  });

  it('a dip that a later step grows past is not the saturation', () => {
    assert.equal(saturation(steps([1, 1700], [4, 1480], [16, 3130], [64, 6970])), undefined);
    assert.deepEqual(saturation(steps([1, 1700], [4, 1480], [16, 3130], [64, 3200], [256, 2900])), {
      devices: 64, previousDevices: 16, index: 3, peakPerS: 3200, peakDevices: 64,
    });
  });

  it('a drop from the first step counts; the peak may be the first step', () => {
    assert.deepEqual(saturation(steps([1, 500], [4, 400])), { devices: 4, previousDevices: 1, index: 1, peakPerS: 500, peakDevices: 1 });
    assert.deepEqual(saturation(steps([1, 547], [4, 461], [16, 470], [64, 586])), { devices: 4, previousDevices: 1, index: 1, peakPerS: 586, peakDevices: 64 });
  });

  it('is undefined while the last step still grows (or with fewer than two steps); the threshold is a parameter', () => {
    assert.equal(saturation(steps([1, 300], [4, 900], [16, 1200])), undefined);
    assert.equal(saturation(steps([1, 300])), undefined);
    assert.equal(saturation([]), undefined);
    assert.equal(saturation(steps([1, 100], [4, 120]), 0.25)?.devices, 4);
  });
});

describe('nextDevices', () => {
  it('walks the plan in order, whatever the rates', () => {
    const plan = [1, 4, 16, 64];
    assert.equal(nextDevices(plan, []), 1);
    assert.equal(nextDevices(plan, steps([1, 300])), 4);
    assert.equal(nextDevices(plan, steps([1, 300], [4, 200])), 16, 'the plan goes on after a saturation');
  });

  it('after the plan: ×4 while still growing, up to 256; nothing once saturated', () => {
    const plan = [1, 4, 16, 64];
    assert.equal(nextDevices(plan, steps([1, 1], [4, 4], [16, 16], [64, 64])), 256);
    assert.equal(nextDevices(plan, steps([1, 1], [4, 4], [16, 16], [64, 64], [256, 256])), undefined, '1,024 is over the cap');
    assert.equal(nextDevices(plan, steps([1, 1], [4, 4], [16, 16], [64, 16])), undefined);
    assert.equal(nextDevices(plan, steps([1, 1700], [4, 1480], [16, 3130], [64, 6970])), 256, 'a dip earlier does not end the stepping');
    assert.equal(nextDevices([2], steps([2, 10]), { factor: 2, max: 4 }), 4);
    assert.equal(nextDevices([], []), undefined);
  });
});

describe('latencyPace', () => {
  const rates = (...triples: [number, number, number][]) => triples.map(([devices, ackedPerS, storedPerS]) => ({ devices, ackedPerS, storedPerS }));

  it('offers the share of the highest stored rate from that step’s devices, pausing what their ack time leaves', () => {
    // 64 devices at 3,200 acknowledged/s: 20 ms per acknowledgement; 80 % of 3,000 stored/s is
    // 2,400/s, 37.5/s per device, 26.67 ms per message: 6.67 ms of pause, rounded to 7
    assert.deepEqual(latencyPace(rates([1, 1000, 1000], [16, 2500, 2500], [64, 3200, 3000], [256, 3300, 2900]), 0.8), {
      devices: 64, peakStoredPerS: 3000, targetPerS: 2400, ackMs: 20, intervalMs: 7,
    });
  });

  it('takes the first of steps storing equally, and never pauses less than 0', () => {
    assert.equal(latencyPace(rates([4, 400, 500], [16, 400, 500]), 0.5)?.devices, 4);
    // all of the rate: devices / target (8 ms) is below the ack time of 10 ms
    assert.equal(latencyPace(rates([4, 400, 500]), 1)?.intervalMs, 0);
  });

  it('is undefined without a step that stored and acknowledged something', () => {
    assert.equal(latencyPace([], 0.8), undefined);
    assert.equal(latencyPace(rates([4, 0, 0], [16, 0, 0]), 0.8), undefined);
    assert.equal(latencyPace(rates([4, 0, 10]), 0.8), undefined);
  });
});

const summary = {
  node: { nodeName: 'real-node-0' },
  pods: [
    {
      podRef: { name: 'gateway-b', namespace: 'ns', uid: 'u1' },
      cpu: { time: '2026-11-27T14:43:18Z', usageCoreNanoSeconds: 359685602 },
      memory: { time: '2026-11-27T14:43:18Z', workingSetBytes: 50 * 1024 * 1024 },
    },
    { podRef: { name: 'other', namespace: 'kube-system', uid: 'u2' }, cpu: { time: '2026-11-27T14:43:18Z', usageCoreNanoSeconds: 1 } },
    { podRef: { name: 'starting', namespace: 'ns', uid: 'u3' } },
    { podRef: { namespace: 'ns' } },
  ],
};

describe('parseSummaryPods', () => {
  it('keeps the namespace’s pods with their CPU and working set, times in ms since the epoch', () => {
    assert.deepEqual(parseSummaryPods(summary, 'ns'), [
      {
        name: 'gateway-b', namespace: 'ns', uid: 'u1',
        cpu: { at: Date.parse('2026-11-27T14:43:18Z'), coreNanoSeconds: 359685602 },
        memory: { at: Date.parse('2026-11-27T14:43:18Z'), workingSetBytes: 52428800 },
      },
      { name: 'starting', namespace: 'ns', uid: 'u3' },
    ]);
    assert.equal(parseSummaryPods(summary).length, 3);
    assert.deepEqual(parseSummaryPods({}), []);
    assert.deepEqual(parseSummaryPods(undefined), []);
  });
});

describe('working sets from samples', () => {
  const at = (ms: number, bytes: number) => ({ name: 'p', namespace: 'ns', uid: 'u', memory: { at: ms, workingSetBytes: bytes } });
  const samples = [[at(1000, 10)], [at(2000, 30)], [at(2000, 30), { name: 'q', namespace: 'ns', uid: 'v' }], [at(3000, 20)], [at(9000, 99)]];

  it('maxWorkingSetWithin: the largest sample timed within the window, pods without one absent', () => {
    assert.deepEqual([...maxWorkingSetWithin(samples, 1500, 3000)], [['p', 30]]);
    assert.deepEqual([...maxWorkingSetWithin(samples, 4000, 5000)], []);
  });

  it('latestWorkingSet: the newest sample', () => {
    assert.deepEqual([...latestWorkingSet(samples)], [['p', { at: 9000, bytes: 99 }]]);
  });
});

describe('CPU limits and throttling', () => {
  it('cpuCores reads whole, fractional and milli quantities', () => {
    assert.equal(cpuCores('1'), 1);
    assert.equal(cpuCores('500m'), 0.5);
    assert.equal(cpuCores('1.5'), 1.5);
    assert.equal(cpuCores(2), 2);
    assert.equal(cpuCores(undefined), undefined);
    assert.equal(cpuCores('1Gi'), undefined);
  });

  it('podCpuLimit sums the containers, undefined when one has none', () => {
    const c = (cpu?: string) => ({ resources: cpu ? { limits: { cpu, memory: '1Gi' } } : {} });
    assert.equal(podCpuLimit({ spec: { containers: [c('1')] } }), 1);
    assert.equal(podCpuLimit({ spec: { containers: [c('1'), c('250m')] } }), 1.25);
    assert.equal(podCpuLimit({ spec: { containers: [c('1'), c()] } }), undefined);
    assert.equal(podCpuLimit({}), undefined);
  });

  it('parseCpuStat reads the throttled periods and time of a cgroup v1 cpu.stat', () => {
    assert.deepEqual(parseCpuStat('nr_periods 120\nnr_throttled 7\nthrottled_time 123456789\n'), { throttledPeriods: 7, throttledNs: 123456789 });
    assert.deepEqual(parseCpuStat(''), { throttledPeriods: 0, throttledNs: 0 });
  });

  it('limitingPod: the largest share of its own limit, the machine’s cores for a pod without one', () => {
    const pods = [
      { key: 'gateway-0', cores: 0.9, limitCores: 1 },
      { key: 'processing-0', cores: 0.5, limitCores: 0.5 },
      { key: 'database-0', cores: 1.2 },
    ];
    assert.deepEqual(limitingPod(pods, 2), { key: 'processing-0', cores: 0.5, limitCores: 0.5, share: 1 });
    assert.equal(limitingPod(pods.slice(0, 1).concat(pods[2]!), 2)?.key, 'gateway-0');
    assert.equal(limitingPod([], 2), undefined);
  });
});

describe('limitedBy', () => {
  const pods = (gateway: number) => [
    { key: 'gateway-0', cores: gateway, limitCores: 1 },
    { key: 'processing-0', cores: 0.2, limitCores: 1 },
  ];

  it('a pod at 90 % or more of its limit', () => {
    assert.deepEqual(limitedBy(pods(0.95), 2, 1), { kind: 'pod', pod: 'gateway-0', share: 0.95 });
  });

  it('else the host, when at least 90 % busy', () => {
    assert.deepEqual(limitedBy(pods(0.4), 2, 0.97), { kind: 'host', utilisation: 0.97 });
  });

  it('else no CPU: the busiest pod and the host named for the record', () => {
    assert.deepEqual(limitedBy(pods(0.4), 2, 0.5), { kind: 'none', busiestPod: 'gateway-0', share: 0.4, utilisation: 0.5 });
    assert.deepEqual(limitedBy([], 2, 0.5), { kind: 'none', utilisation: 0.5 });
    assert.equal(limitedBy(pods(0.4), 2, 0.5, 0.3).kind, 'pod');
  });
});

describe('workingSetBytes', () => {
  it('is usage minus inactive file pages, never below 0', () => {
    const stat = 'cache 4096\nrss 1000\ninactive_file 99\ntotal_cache 8192\ntotal_inactive_file 3000\n';
    assert.equal(workingSetBytes(10_000, stat), 7000);
    assert.equal(workingSetBytes(1000, stat), 0);
    assert.equal(workingSetBytes(5000, ''), 5000);
  });
});

describe('podKeys', () => {
  it('names pods <component>-<i> in name order within each component', () => {
    const keys = podKeys([
      { name: 'gateway-7f-zz', component: 'gateway' },
      { name: 'core-1', component: 'core' },
      { name: 'gateway-7f-aa', component: 'gateway' },
      { name: 'database-0', component: 'database' },
    ]);
    assert.deepEqual(Object.fromEntries(keys), { 'gateway-7f-aa': 'gateway-0', 'gateway-7f-zz': 'gateway-1', 'core-1': 'core-0', 'database-0': 'database-0' });
  });
});

describe('manifestBytes', () => {
  it('adds the config and every layer', () => {
    assert.equal(manifestBytes({ schemaVersion: 2, config: { size: 1938 }, layers: [{ size: 1000 }, { size: 24 }] }), 2962);
  });

  it('refuses an index or a manifest without layers', () => {
    assert.throws(() => manifestBytes({ manifests: [] }), /single-image/);
    assert.throws(() => manifestBytes({ config: { size: 1 } }), /single-image/);
  });
});

describe('the stored count', () => {
  it('counts rows of the prefix’s devices, those stored within the window and the last stored time', () => {
    const sql = storedCountSql('mqtt-k16-', Date.parse('2026-11-27T14:00:00Z'), Date.parse('2026-11-27T14:00:30Z'));
    assert.match(sql, /FROM telemetry WHERE device_id LIKE 'mqtt-k16-%'$/);
    assert.match(sql, /stored_at >= '2026-11-27T14:00:00\.000Z'::timestamptz AND stored_at < '2026-11-27T14:00:30\.000Z'::timestamptz/);
  });

  it('refuses a prefix holding a wildcard, a quote or capitals', () => {
    for (const bad of ["a'b", 'a_b', 'a%', 'A', '']) assert.throws(() => storedCountSql(bad, 0, 1), /prefix/);
  });

  it('reads psql’s unaligned row', () => {
    assert.deepEqual(parseStoredCount('31250,30000,1795790589123\n'), { total: 31250, inWindow: 30000, lastStoredAt: 1795790589123 });
    assert.throws(() => parseStoredCount('psql: error: connection refused'), /unexpected psql output/);
  });
});

describe('the latency of stored messages', () => {
  const from = Date.parse('2026-11-27T14:00:00Z');
  const to = Date.parse('2026-11-27T14:00:30Z');

  it('takes p50, p90, p99 and max of stored_at − received_at in ms, for the prefix’s rows received within the window', () => {
    const sql = latencySql('mqtt-paced-k64-', from, to);
    assert.match(sql, /percentile_cont\(ARRAY\[0\.5,0\.9,0\.99\]\) WITHIN GROUP \(ORDER BY ms\)/);
    assert.match(sql, /max\(ms\)/);
    assert.match(sql, /\(extract\(epoch FROM stored_at - received_at\) \* 1000\)::float8 AS ms/);
    assert.match(sql, /device_id LIKE 'mqtt-paced-k64-%' AND received_at >= '2026-11-27T14:00:00\.000Z'::timestamptz AND received_at < '2026-11-27T14:00:30\.000Z'::timestamptz/);
    assert.match(sql, /^SELECT n, p\[1\], p\[2\], p\[3\], top FROM/, 'the array is taken apart: psql would print it with the separator inside');
    assert.throws(() => latencySql("x'; DROP TABLE telemetry; --", from, to), /prefix/);
  });

  it('reads psql’s unaligned row, times to 0.1 ms', () => {
    assert.deepEqual(parseLatency('30000,12.345,40.04,180.96,912.5\n'), { rows: 30000, p50Ms: 12.3, p90Ms: 40, p99Ms: 181, maxMs: 912.5 });
    assert.deepEqual(parseLatency('1,1e-05,1e-05,1e-05,1e-05'), { rows: 1, p50Ms: 0, p90Ms: 0, p99Ms: 0, maxMs: 0 });
  });

  it('gives NaN times for no rows, and refuses anything else', () => {
    const none = parseLatency('0,,,,\n');
    assert.equal(none.rows, 0);
    assert.ok([none.p50Ms, none.p90Ms, none.p99Ms, none.maxMs].every(Number.isNaN));
    assert.throws(() => parseLatency('ERROR: syntax error'), /unexpected psql output/);
    assert.throws(() => parseLatency('5,,,,'), /unexpected psql output/, 'rows counted but no times');
    assert.throws(() => parseLatency('0,1,2,3,4'), /unexpected psql output/, 'times without rows');
    assert.throws(() => parseLatency('{1,2,3},4,5'), /unexpected psql output/);
    assert.throws(() => parseLatency(',,,,'), /unexpected psql output/);
  });
});

describe('per-second counts', () => {
  it('perSecondCounts bins times into the whole seconds of the window, ignoring what lies outside', () => {
    assert.deepEqual(perSecondCounts([999, 1000, 1500, 1999, 2000, 3999, 4000, 500], 1000, 3), [3, 1, 1]);
    assert.deepEqual(perSecondCounts([], 0, 2), [0, 0]);
  });

  it('storedPerSecondSql groups the prefix’s rows of the window by second', () => {
    const sql = storedPerSecondSql('http-k4-', Date.parse('2026-11-27T14:00:00Z'), 30);
    assert.match(sql, /stored_at >= '2026-11-27T14:00:00\.000Z'::timestamptz AND stored_at < '2026-11-27T14:00:30\.000Z'::timestamptz GROUP BY s ORDER BY s$/);
    assert.match(sql, /device_id LIKE 'http-k4-%'/);
    assert.throws(() => storedPerSecondSql("x'", 0, 1), /prefix/);
  });

  it('parsePerSecond fills the seconds without rows with 0', () => {
    assert.deepEqual(parsePerSecond('0,10\n2,7\n', 4), [10, 0, 7, 0]);
    assert.deepEqual(parsePerSecond('', 2), [0, 0]);
    assert.deepEqual(parsePerSecond('5,1\n', 2), [0, 0], 'a second outside the window is dropped');
    assert.throws(() => parsePerSecond('ERROR: relation', 2), /unexpected psql output/);
  });
});
