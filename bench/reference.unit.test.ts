/**
 * Unit tests of the reference scenario's pure parts (bench/lib/reference.ts): where the
 * acknowledged rate saturates and which step comes next, the kubelet's stats/summary and the
 * cgroup files read into per-pod figures, CPU limits, image sizes from manifests, and the database
 * count of stored messages.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  cpuCores,
  latestWorkingSet,
  limitedBy,
  limitingPod,
  manifestBytes,
  maxWorkingSetWithin,
  nextDevices,
  parseCpuStat,
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
