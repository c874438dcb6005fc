/**
 * Unit tests of the throughput scenario's pure parts (bench/lib/throughput.ts) and its report
 * tables (bench/report.ts `throughputTables`): option lists, figures from first-seen times,
 * the RSS slope per 1,000 cached objects, and concurrencies side by side.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BenchResult } from './lib/results.ts';
import { combinations, parseList, rssSlope, throughputCommand, throughputFigures } from './lib/throughput.ts';
import { buildReport, sizeKey, throughputTables } from './report.ts';

describe('parseList', () => {
  it('reads one value or a comma-separated list, keeping order and dropping duplicates', () => {
    assert.equal(parseList(undefined, 'n'), undefined);
    assert.deepEqual(parseList('2000', 'n'), [2000]);
    assert.deepEqual(parseList('1, 4,16,4', 'max-concurrent-reconciles'), [1, 4, 16]);
  });

  it('rejects what is not a positive integer, naming the flag', () => {
    for (const bad of ['', '0', '1,,4', '2.5', '-1', 'four']) assert.throws(() => parseList(bad, 'n'), /--n must be a positive integer/);
  });
});

describe('combinations', () => {
  it('gives every pair, the first list outermost', () => {
    assert.deepEqual(combinations([500, 2000], [1, 16]), [[500, 1], [500, 16], [2000, 1], [2000, 16]]);
    assert.deepEqual(combinations([100], [undefined]), [[100, undefined]]);
  });
});

describe('throughputCommand', () => {
  it('appends the concurrency only when one is asked for', () => {
    assert.equal(throughputCommand('node op.mjs', undefined), 'node op.mjs');
    assert.equal(throughputCommand('node op.mjs', 4), 'node op.mjs --max-concurrent-reconciles 4');
  });
});

describe('throughputFigures', () => {
  it('measures from the first create to the last Deployment and the last status', () => {
    // 10 objects, t0 = 1000 ms, a Deployment every 100 ms from 1100 ms; statuses 50 ms later.
    const deployments = Array.from({ length: 10 }, (_, i) => 1100 + i * 100);
    const statuses = deployments.map((t) => t + 50).reverse();
    const f = throughputFigures(10, 1000, deployments, statuses);
    assert.equal(f.wallS, 1);
    assert.equal(f.wallStatusS, 1.05);
    assert.equal(f.objectsPerS, 10);
    // the 1st and the 9th Deployment (0.1 s and 0.9 s): 8 objects in 0.8 s
    assert.equal(f.steadyObjectsPerS, 10);
    assert.equal(f.halfS, 0.5);
    assert.equal(f.n, 10);
  });

  it('leaves a slow start out of the steady rate', () => {
    // The first Deployment after 5 s, then 99 more at 100 a second.
    const deployments = [6000, ...Array.from({ length: 99 }, (_, i) => 6010 + i * 10)];
    const f = throughputFigures(100, 1000, deployments, deployments);
    assert.equal(f.wallS, 5.99);
    assert.equal(f.objectsPerS, 16.7);
    assert.equal(f.steadyObjectsPerS, 100);
  });

  it('refuses incomplete samples', () => {
    assert.throws(() => throughputFigures(3, 0, [1, 2], [1, 2, 3]), /expected 3/);
    assert.throws(() => throughputFigures(0, 0, [], []), /at least one/);
  });
});

describe('rssSlope', () => {
  it('fits MiB per 1,000 cached objects by least squares', () => {
    const s = rssSlope([
      { cachedObjects: 1000, rssMiB: 60 },
      { cachedObjects: 4000, rssMiB: 75 },
      { cachedObjects: 10000, rssMiB: 105 },
    ]);
    assert.deepEqual(s, { miBPer1000: 5, interceptMiB: 55 });
  });

  it('needs two distinct sizes', () => {
    assert.equal(rssSlope([{ cachedObjects: 1000, rssMiB: 60 }, { cachedObjects: 1000, rssMiB: 62 }]), undefined);
    assert.equal(rssSlope([]), undefined);
  });
});

function run(n: number, c: number | undefined, figures: Record<string, unknown>, options: Record<string, unknown> = {}): BenchResult {
  return {
    scenario: 'throughput',
    startedAt: '2026-01-01T00:00:00.000Z',
    ok: true,
    options: { n, ...(c === undefined ? {} : { maxConcurrentReconciles: c }), settleS: 20, ...options },
    versions: { node: 'v22.0.0', kubernetes: 'v1.33.13', gitCommit: 'abcdef0123456789', gitDirty: false },
    machine: { cores: 2, memoryGiB: 24, cpuModel: 'cpu', loadavgStart: [1, 1, 1], kubeApiserversRunning: 1 },
    figures: { n, cachedObjects: 2 * n, ...figures },
    samples: {},
  };
}

describe('throughputTables', () => {
  const fig = (objectsPerS: number, cpuS: number, idleRss?: number) => ({
    objectsPerS,
    steadyObjectsPerS: objectsPerS * 1.1,
    wallS: 2000 / objectsPerS,
    operatorClient: { rateLimiterWaitS: 0 },
    operator: { requests: { total: 4100, writes: 4000, byVerb: { PATCH: 4000 } }, cpuS, peakRssMiB: 100 },
    ...(idleRss === undefined ? {} : { idle: { rssMiB: idleRss, peakRssMiB: idleRss + 20 } }),
  });

  it('puts the concurrencies side by side, sizes and concurrencies in numeric order, medians over runs', () => {
    const lines = throughputTables([run(2000, 16, fig(200, 10)), run(2000, 4, fig(150, 11)), run(2000, 4, fig(170, 13)), run(2000, 1, fig(50, 12))]).join('\n');
    const rows = lines.split('\n').filter((l) => l.startsWith('| 2000'));
    assert.deepEqual(rows.map((r) => r.split('|')[2]!.trim()), ['1', '4', '16']);
    assert.match(rows[1]!, /^\| 2000 \| 4 \| 2 \| 160 \|/);
    assert.match(rows[1]!, /\| 12 \| 100 \|$/);
  });

  it('leaves out other operator commands and failed runs, and says nothing without runs', () => {
    assert.deepEqual(throughputTables([]), []);
    assert.deepEqual(throughputTables([run(2000, 1, fig(50, 1), { operatorCmd: 'node --cpu-prof x' })]), []);
    assert.deepEqual(throughputTables([{ ...run(2000, 1, fig(50, 1)), ok: false }]), []);
  });

  it('reports RSS at idle per size and its slope per 1,000 cached objects', () => {
    const lines = throughputTables([run(500, 4, fig(100, 2, 60)), run(2000, 4, fig(100, 8, 66)), run(5000, 4, fig(100, 20, 78))]).join('\n');
    assert.match(lines, /\| 5000 \| 4 \| 20 \(default\) \| 10000 \| 1 \| 98 \| 78 \|/);
    assert.match(lines, /Concurrency 4: RSS at idle grows 2(\.00)? MiB per 1,000 cached objects \(least squares over 3 runs at N = 500, 2000, 5000; 58 MiB at none\); peak RSS 2(\.00)? MiB per 1,000/);
  });

  it('counts memory runs on a controller-manager with a raised rate limit, apart, and leaves them out of the side-by-side table', () => {
    const lines = throughputTables([run(500, 4, fig(100, 2, 60), { controllerManagerQps: 200 }), run(5000, 4, fig(100, 20, 78), { controllerManagerQps: 200 })]).join('\n');
    assert.doesNotMatch(lines, /Side by side/);
    assert.match(lines, /\| 500 \| 4 \| 200 \| 1000 \| 1 \| 80 \| 60 \|/);
    assert.match(lines, /Concurrency 4: RSS at idle grows 2 MiB per 1,000 cached objects \(least squares over 2 runs at N = 500, 5000;/);
  });

  it('keys result groups by concurrency and puts the tables into the report\'s results page', () => {
    assert.equal(sizeKey(run(2000, 16, {})), 'n=2000 concurrency=16');
    const { results } = buildReport({ results: [run(2000, 1, fig(50, 12)), run(2000, 16, fig(200, 10))], svgName: 'x.svg' });
    assert.match(results, /### throughput: the operator as the bottleneck/);
    assert.match(results, /### throughput \(n=2000 concurrency=1; 1 run\)/);
    assert.match(results, /objects\/s \(N \/ wall time to the last Deployment\) \| 200 \|/);
  });
});
