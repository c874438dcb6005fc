/**
 * Unit tests of the report (bench/report.ts) and its chart (bench/lib/svg.ts): the short
 * docs/performance.md (targets, headlines, links) apart from the results page, medians with
 * ranges per scenario and size, expansion of per-verb figures, target verdicts (paired ratios
 * preferred, "not measured" when no run at the target's size exists, failed runs never
 * averaged in), the reference scenario's latency step (and results made before it), the fleet
 * scenario's targets, and a well-formed, escaped SVG.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BenchResult } from './lib/results.ts';
import { buildReport, evaluateTargets, figureRows, headlineRows, markdownTable, sizeKey } from './report.ts';
import { cdfSvg, escapeXml, niceCeil } from './lib/svg.ts';

function result(scenario: string, options: Record<string, unknown>, figures: Record<string, unknown>, samples: Record<string, number[]> = {}, ok = true): BenchResult {
  return {
    scenario,
    startedAt: '2026-01-01T00:00:00.000Z',
    ok,
    ...(ok ? {} : { error: 'Error: boom\n    at somewhere' }),
    options,
    versions: { node: 'v20.0.0', kubernetes: 'v1.33.13', gitCommit: 'abcdef0123456789', gitDirty: false },
    machine: { cores: 2, memoryGiB: 24, cpuModel: 'cpu', loadavgStart: [1.5, 1, 1], kubeApiserversRunning: 1 },
    figures,
    samples,
  };
}

const burst = (wall: number, ratio: number, rss: number, verbs: Record<string, number>) =>
  result('burst', { n: 100, floor: true }, { wallS: wall, ratioWallToFloor: ratio, available: { p50S: wall / 2 }, operator: { peakRssMiB: rss, requests: { byVerb: verbs, total: 0, writes: 0 } } }, { availableS: [1, 2, 3], floorReadyS: [1, 1.5, 2] });

describe('figureRows', () => {
  it('gives the median with the min–max range and the run count', () => {
    const rows = figureRows('burst', [burst(10, 1.1, 100, {}), burst(30, 1.3, 120, {}), burst(20, 1.2, 110, {})]);
    assert.deepEqual(rows.find((r) => r[0]!.startsWith('wall time')), ['wall time to all Available (s)', '20', '10–30', '3']);
    assert.deepEqual(rows.find((r) => r[0]! === 'operator peak RSS (MiB)'), ['operator peak RSS (MiB)', '110', '100–120', '3']);
  });

  it('expands per-verb figures over every verb seen in any run', () => {
    const rows = figureRows('burst', [burst(1, 1, 1, { GET: 4, PATCH: 10 }), burst(1, 1, 1, { POST: 2, GET: 6 })]);
    const verbs = rows.filter((r) => r[0]!.startsWith('operator requests by verb: ')).map((r) => [r[0]!.slice(-5), r[1], r[3]]);
    assert.deepEqual(verbs, [[': GET', '5', '2'], ['PATCH', '10', '1'], [' POST', '2', '1']]);
  });

  it('leaves out figures no run has', () => {
    assert.equal(figureRows('burst', [result('burst', { n: 1 }, { wallS: 1 })]).length, 1);
  });
});

describe('evaluateTargets', () => {
  it('judges burst on ratios measured in the same run, at N = 100 only', () => {
    const rows = evaluateTargets([burst(10, 1.02, 100, {}), burst(12, 1.04, 100, {}), burst(11, 1.4, 100, {}), result('burst', { n: 5 }, { ratioWallToFloor: 9 })]);
    const t = rows.find((r) => r.target.startsWith('burst'))!;
    assert.equal(t.verdict, 'holds');
    assert.equal(t.figure, '1.04 ×');
    assert.match(t.basis, /3 runs/);
  });

  it('falls back to a ratio of medians from separate floor runs', () => {
    const rows = evaluateTargets([result('burst', { n: 100 }, { wallS: 30 }), result('floor', { n: 100 }, { wallS: 20 })]);
    const t = rows.find((r) => r.target.startsWith('burst'))!;
    assert.equal(t.figure, '1.50 ×');
    assert.equal(t.verdict, 'misses');
  });

  it('judges memory on the IoT burst at N = 100', () => {
    const rows = evaluateTargets([burst(10, 1, 86, {}), burst(10, 1, 94, {}), burst(10, 1, 88, {})]);
    const iot = rows.find((r) => r.target.startsWith('IoT operator peak RSS'))!;
    assert.equal(iot.figure, '88 MiB');
    assert.equal(iot.verdict, 'holds');
  });

  it("judges the Memcached operator against operator-sdk's Go sample run beside it", () => {
    const mc = (n: number, rss: number, cpu: number, goSample?: string, ok = true) =>
      result('memcached', { n, ...(goSample && { goSample }) }, { operator: { peakRssMiB: rss, cpuS: cpu } }, {}, ok);
    const go = '/tmp/memcached-operator';
    const runs = [mc(500, 63, 5), mc(500, 64, 6), mc(500, 62, 7, go), mc(500, 62.4, 7.4, go), mc(1000, 40, 1), mc(1000, 40, 1, go), mc(500, 1, 1, go, false)];
    const rows = evaluateTargets(runs);
    const rss = rows.find((r) => r.target.startsWith("Memcached operator peak RSS < the Go sample's"))!;
    assert.equal(rss.figure, '1.02 ×', '63.5 / 62.2: the N = 1000 runs and the failed one are not counted');
    assert.equal(rss.verdict, 'misses');
    assert.match(rss.basis, /63\.5 against 62\.2 MiB.*; 4 runs/);
    const cpu = rows.find((r) => r.target.startsWith("Memcached operator CPU ≤ 0.8 × the Go sample's"))!;
    assert.equal(cpu.figure, '0.764 ×', "5.5 / 7.2: the Go sample's runs are not counted as ours");
    assert.equal(cpu.verdict, 'holds');
    const alone = evaluateTargets([mc(500, 63, 5)]).find((r) => r.target.startsWith("Memcached operator CPU ≤ 0.8 × the Go sample's"))!;
    assert.equal(alone.verdict, 'not measured');
    assert.equal(sizeKey(runs[2]!), "n=500; operator: operator-sdk's Go sample");
  });

  it('judges the N = 1,000 peak against the Go cache run beside it, and keeps such runs out of the others', () => {
    const scale = (ours: number, theirs?: number, n = 1000) =>
      result('scale', { n, ...(theirs !== undefined && { companionCmd: '/tmp/iot-cache-go -lean-pods' }) }, { burst: { operator: { peakRssMiB: ours }, ...(theirs !== undefined && { companion: { peakRssMiB: theirs } }) } });
    const rows = evaluateTargets([scale(190, 250), scale(200, 230), scale(180, 120, 500), scale(300)]);
    const beside = rows.find((r) => r.target.includes('controller-runtime cache'))!;
    assert.equal(beside.figure, '0.815 ×', 'median of 190 / 250 and 200 / 230; the N = 500 run is not counted');
    assert.equal(beside.verdict, 'holds');
    assert.match(beside.basis, /195 against 240 MiB.*; 2 runs/);
    const alone = rows.find((r) => r.target.startsWith('scale N = 1,000: operator peak RSS ≤ 150'))!;
    assert.equal(alone.figure, '300 MiB', 'runs with a companion beside the operator are not judged as shipped');
    assert.equal(evaluateTargets([scale(300)]).find((r) => r.target.includes('controller-runtime cache'))!.verdict, 'not measured');
    assert.equal(sizeKey(scale(190, 250)), 'n=1000 beside: `/tmp/iot-cache-go -lean-pods`', 'its figures are tabled apart from the shipped runs');
  });

  it("judges the fleet's TLS cost, its reconnect herd (not all reconnected: missed, saying how many did) and the flood's delay", () => {
    const fleet = (ratio: number, reconnect: Record<string, unknown>, cold: number, warm: number) =>
      result('fleet', {}, { throughput: { tlsToPlain: ratio }, herd: { devices: 10_000, reconnect }, flood: { p99Growth: { cold, warm } } });
    const rows = evaluateTargets([fleet(0.8, { allConnectedS: 50, connected: 10_000, wallS: 51 }, 0.05, 0.02)]).filter((r) => r.target.startsWith('fleet'));
    assert.deepEqual(rows.map((r) => [r.figure, r.verdict]), [['0.800 × plaintext', 'holds'], ['50 s', 'holds'], ['5 %', 'holds']]);
    const missed = evaluateTargets([fleet(0.6, { connected: 4_000, wallS: 420 }, 0.02, 0.3)]).filter((r) => r.target.startsWith('fleet'));
    assert.deepEqual(missed.map((r) => [r.figure, r.verdict]), [['0.600 × plaintext', 'misses'], ['not all (4000 of 10,000 after 420 s)', 'misses'], ['30 %', 'misses']]);
  });

  it('judges the warm start on the slower of its two starts', () => {
    const start = (absent: number, running: number) => result('start', {}, { clusterAbsentS: absent, clusterRunningS: running });
    const row = evaluateTargets([start(22, 11), start(31, 12), start(25, 10)]).find((r) => r.target.startsWith('warm npm start'))!;
    assert.equal(row.figure, '25 s');
    assert.equal(row.verdict, 'holds');
  });

  it('requires every steady window and resync to write nothing', () => {
    const steady = (perMin: number, resync: number) => result('steady', { n: 100, m: 5 }, { idle: { writesPerMin: perMin }, resync: { writes: resync } });
    assert.equal(evaluateTargets([steady(0, 0), steady(0, 0)]).find((r) => r.target.startsWith('steady'))!.verdict, 'holds');
    const t = evaluateTargets([steady(0, 0), steady(0, 3)]).find((r) => r.target.startsWith('steady'))!;
    assert.equal(t.verdict, 'misses');
    assert.equal(t.figure, '3');
  });

  it('says "not measured" when there is no run, and ignores failed runs', () => {
    const rows = evaluateTargets([result('churn', { n: 100, m: 5 }, { changeToAvailable: { p99S: 1 } }, {}, false)]);
    assert.ok(rows.every((r) => r.verdict === 'not measured'));
  });

  it('judges RSS, latency, churn and restart against their limits', () => {
    const rows = evaluateTargets([
      burst(10, 1, 160, {}),
      result('latency', { k: 30 }, { availableP99MinusFloorS: 0.4 }),
      result('churn', { n: 100, m: 2 }, { changeToAvailable: { p99S: 6 } }),
      result('restart', { n: 100 }, { writes: 0 }),
    ]);
    const verdict = (prefix: string) => rows.find((r) => r.target.startsWith(prefix))!.verdict;
    assert.equal(verdict('IoT operator peak RSS'), 'misses');
    assert.equal(verdict('latency'), 'holds');
    assert.equal(verdict('churn'), 'misses');
    assert.match(rows.find((r) => r.target.startsWith('churn'))!.basis, /M = 2 min/);
    assert.equal(verdict('restart'), 'holds');
  });
});

describe('buildReport', () => {
  const input = {
    results: [burst(10, 1.1, 100, { GET: 1 }), result('burst', { n: 10 }, { wallS: 3 }), result('floor', { n: 100, k: 30 }, { wallS: 9 }), result('steady', { n: 100, m: 5 }, {}, {}, false)],
    svgName: 'burst-distribution.svg',
  };

  it('docs/performance.md: targets, headline figures, the chart and links to the findings and every figure — no per-scenario tables', () => {
    const { markdown } = buildReport(input);
    assert.match(markdown, /^<!-- Generated by npm run generate \(performance-report\); edit bench\/report\.ts \(from bench\/results\/\*\.json\) instead\. -->\n# Performance/);
    assert.match(markdown, /## Targets\n\n\| target \| measured \| verdict \| basis \|/);
    assert.match(markdown, /## Headline figures\n\n\| scenario \| figure \| median \| min–max \| runs \|\n[^\n]*\n\| burst \(n=100\) \| 100 IoTServices at once: wall time to all Available \(s\) \| 10 \|  \| 1 \|/);
    assert.match(markdown, /!\[per-instance time to Available, burst\]\(burst-distribution.svg\)/);
    assert.match(markdown, /\[bench\/analysis.md\]\(\.\.\/bench\/analysis.md\)/);
    assert.match(markdown, /\[bench\/results\/README.md\]\(\.\.\/bench\/results\/README.md\)/);
    assert.match(markdown, /1 failed run \(never averaged in\)/);
    assert.doesNotMatch(markdown, /^## Results|^### burst \(/m, 'the per-scenario tables are on the results page');
    assert.ok(markdown.split('\n').length < 100, 'a short page');
  });

  it('bench/results/README.md: one table per scenario and size, and the failed runs', () => {
    const { results, svg } = buildReport(input);
    assert.match(results, /^<!-- Generated by npm run generate \(performance-report\);.* -->\n# Benchmark results/);
    assert.match(results, /\[docs\/performance.md\]\(\.\.\/\.\.\/docs\/performance.md\)/);
    assert.match(results, /### burst \(n=10; 1 run\)[\s\S]*### burst \(n=100; 1 run\)[\s\S]*### floor \(n=100 k=30; 1 run\)/);
    assert.match(results, /## Failed runs\n\n- steady \(n=100 m=5\) at 2026-01-01T00:00:00.000Z: Error: boom\n/);
    assert.match(svg, /^<!-- Generated by npm run generate \(performance-report\);.* -->\n<svg /);
    assert.equal((svg.match(/<polyline /g) ?? []).length, 2, 'one operator line and one floor line');
  });

  it('links as given', () => {
    const { markdown, results } = buildReport({ ...input, links: { analysis: 'a.md', results: 'r.md', bench: 'b.md' }, docFromResults: 'p.md', analysisFromResults: 'f.md' });
    assert.match(markdown, /\]\(a.md\)/);
    assert.match(markdown, /\]\(r.md\)/);
    assert.match(markdown, /\]\(b.md\)/);
    assert.match(results, /\]\(p.md\)[\s\S]*\]\(f.md\)/);
  });

  it('leaves out headlines no run has', () => {
    assert.deepEqual(headlineRows([result('floor', { n: 100, k: 30 }, { wallS: 9 })]), []);
    assert.doesNotMatch(buildReport({ results: [], svgName: 'x.svg' }).markdown, /## Headline figures/);
  });

  it('is deterministic', () => {
    const input = { results: [burst(10, 1.1, 100, { GET: 1, POST: 2 })], svgName: 'x.svg' };
    assert.equal(buildReport(input).markdown, buildReport(input).markdown);
    assert.equal(buildReport(input).results, buildReport(input).results);
  });
});

describe('reference: the latency step', () => {
  const throughput = { ackedPerSecondMedian: { k001: 1700, k004: 2800 }, storedPerSecondMedian: { k001: 1690, k004: 2790 }, saturation: { devices: null, peakPerS: 2800 } };
  const latency = (p99Ms: number) => ({
    share: 0.8, peakStoredPerS: 2790, targetPerS: 2232, peakAckMs: 1.4, protocol: 'mqtt', devices: 4, intervalMs: 0, ackedPerS: 2250.5, storedPerS: 2249.8,
    latencyMs: { rows: 67000, p50Ms: 4.2, p90Ms: 9.9, p99Ms, maxMs: 640 }, workingSetMiB: { 'database-0': 190, 'gateway-0': 60 },
  });
  const before = result('reference', { devices: [1, 4] }, { applyToAvailableS: 40, mqtt: throughput, memory: { idleMiB: { 'database-0': 39 } } });
  const withLatency = (p99Ms: number) => result('reference', { devices: [1, 4] }, { applyToAvailableS: 42, mqtt: { ...throughput, latency: latency(p99Ms) }, memory: { idleMiB: { 'database-0': 40 } } });
  const row = (rows: string[][], label: string) => rows.find((r) => r[0] === label);

  it('a result made before the latency step renders as before: no latency rows', () => {
    const rows = figureRows('reference', [before]);
    assert.deepEqual(rows.map((r) => r[0]), [
      'create → Available (s)',
      'MQTT messages acknowledged in the median second, devices k001',
      'MQTT messages acknowledged in the median second, devices k004',
      'MQTT messages stored in the median second, devices k001',
      'MQTT messages stored in the median second, devices k004',
      'MQTT peak acknowledged messages/s (median second)',
      'working set idle (MiB): database-0',
    ]);
    assert.match(buildReport({ results: [before], svgName: 'x.svg' }).results, /### reference \(defaults; 1 run\)/);
  });

  it('shows the offered, acknowledged and stored rates, devices, p50/p90/p99/max and the pods’ memory of the latency step', () => {
    const rows = figureRows('reference', [withLatency(181)]);
    assert.deepEqual(row(rows, 'MQTT latency step: share of the peak stored rate offered'), ['MQTT latency step: share of the peak stored rate offered', '0.800', '', '1']);
    assert.equal(row(rows, 'MQTT latency step: messages/s offered (planned)')?.[1], '2232');
    assert.equal(row(rows, 'MQTT latency step: devices')?.[1], '4');
    assert.equal(row(rows, 'MQTT latency step: pause after each acknowledgement (ms)')?.[1], '0');
    assert.equal(row(rows, 'MQTT latency step: messages acknowledged/s (offered, achieved)')?.[1], '2251');
    assert.equal(row(rows, 'MQTT latency step: messages stored/s')?.[1], '2250');
    assert.deepEqual(
      ['p50', 'p90', 'p99', 'max'].map((p) => row(rows, `MQTT latency step: acknowledgement → stored ${p} (ms)`)?.[1]),
      ['4.20', '9.90', '181', '640'],
    );
    assert.equal(row(rows, 'MQTT latency step: working set (MiB): database-0')?.[1], '190');
    assert.equal(row(rows, 'MQTT latency step: working set (MiB): gateway-0')?.[1], '60');
    assert.ok(!rows.some((r) => r[0]!.startsWith('HTTP latency step')), 'a protocol not measured has no rows');
  });

  it('runs with and without the latency step in one group: its figures over the runs that have it', () => {
    const rows = figureRows('reference', [before, withLatency(181), withLatency(300)]);
    assert.deepEqual(row(rows, 'MQTT latency step: acknowledgement → stored p99 (ms)'), ['MQTT latency step: acknowledgement → stored p99 (ms)', '241', '181–300', '2']);
    assert.deepEqual(row(rows, 'create → Available (s)'), ['create → Available (s)', '42', '40–42', '3']);
    const { results } = buildReport({ results: [before, withLatency(181), withLatency(300)], svgName: 'x.svg' });
    assert.match(results, /\| MQTT latency step: acknowledgement → stored p99 \(ms\) \| 241 \| 181–300 \| 2 \|/);
  });
});

describe('markdown and SVG helpers', () => {
  it('escapes pipes in Markdown cells and right-aligns figure columns', () => {
    assert.equal(markdownTable(['a', 'b'], [['x|y', '1']]), '| a | b |\n| --- | ---: |\n| x\\|y | 1 |');
    assert.match(markdownTable(['a', 'b', 'c'], [], 'lrl'), /\| --- \| ---: \| --- \|/);
  });

  it('names a size by n, k and m, and a churn rate other than the specified one', () => {
    assert.equal(sizeKey(result('churn', { n: 100, m: 5, runs: 3, fraction: 0.1, periodS: 10 }, {})), 'n=100 m=5');
    assert.equal(sizeKey(result('churn', { n: 100, m: 5, fraction: 0.01, periodS: 10 }, {})), 'n=100 m=5 fraction=0.01');
    assert.equal(sizeKey(result('sharded', { n: 2000, shards: 3 }, {})), 'n=2000 shards=3', 'runs on 1 and on 3 shards are kept apart');
  });

  it('judges churn only at the specified rate', () => {
    const slow = result('churn', { n: 100, m: 5, fraction: 0.01 }, { changeToAvailable: { p99S: 2 } });
    assert.equal(evaluateTargets([slow]).find((r) => r.target.startsWith('churn'))!.verdict, 'not measured');
  });

  it('rounds the axis up to 1, 2, 2.5 or 5 × 10^k', () => {
    assert.deepEqual([0.7, 1, 1.2, 2.2, 3, 7, 42, 0].map(niceCeil), [1, 1, 2, 2.5, 5, 10, 50, 1]);
  });

  it('draws each series as a step line ending at 100 % and escapes text', () => {
    const svg = cdfSvg([{ label: 'a<b', values: [2, 1], color: 'red' }, { label: 'empty', values: [], color: 'blue' }], { title: 'T & U', xLabel: 's' });
    assert.equal((svg.match(/<polyline /g) ?? []).length, 1);
    assert.match(svg, /T &amp; U/);
    assert.match(svg, /a&lt;b/);
    assert.equal(escapeXml('"<&>'), '&quot;&lt;&amp;&gt;');
    const points = /points="([^"]+)"/.exec(svg)![1]!.split(' ');
    assert.equal(points.length, 5, 'origin plus two points per value');
    assert.match(points.at(-1)!, /,40$/, 'the last step reaches the top of the plot (100 %)');
  });
});

describe('operator variants', () => {
  it('groups runs of another operator command apart and does not judge targets on them', () => {
    const variant = result('burst', { n: 100, operatorCmd: 'node other.mjs' }, { ratioWallToFloor: 5, operator: { peakRssMiB: 90 } });
    assert.equal(sizeKey(variant), 'n=100; operator: `node other.mjs`');
    assert.ok(evaluateTargets([variant]).every((r) => r.verdict === 'not measured'));
    const { results } = buildReport({ results: [variant, burst(10, 1.1, 100, {})], svgName: 'x.svg' });
    assert.match(results, /### burst \(n=100; operator: `node other.mjs`; 1 run\)/);
  });
});

describe('number formatting', () => {
  it('keeps two significant digits below 0.01 instead of printing 0.000', async () => {
    const { formatNumber } = await import('./lib/results.ts');
    assert.deepEqual([0.0001, 0.00456, 0.5, 12.34, 1234.5, 7].map(formatNumber), ['0.0001', '0.0046', '0.500', '12.3', '1235', '7']);
  });
});

describe('cluster variants', () => {
  it('keeps runs on a controller-manager with another rate limit apart and out of the targets', () => {
    const raised = result('churn', { n: 100, m: 5, fraction: 0.1, periodS: 10, controllerManagerQps: 200 }, { changeToAvailable: { p99S: 2 } });
    assert.equal(sizeKey(raised), 'n=100 m=5 controller-manager QPS 200');
    assert.equal(evaluateTargets([raised]).find((r) => r.target.startsWith('churn'))!.verdict, 'not measured');
  });
});

describe('operator memory limit', () => {
  it('keeps runs of an operator in a memory cgroup apart and out of the targets', () => {
    const limited = burst(70, 1, 120, {});
    limited.options.operatorMemoryLimitMiB = 256;
    assert.equal(sizeKey(limited), 'n=100 operator memory limit 256 MiB');
    assert.equal(evaluateTargets([limited]).find((r) => r.target.startsWith('IoT operator peak RSS'))!.verdict, 'not measured');
    assert.equal(evaluateTargets([limited, burst(70, 1, 160, {})]).find((r) => r.target.startsWith('IoT operator peak RSS'))!.figure, '160 MiB');
  });
});

describe('churn target', () => {
  it('names the floor of the same runs beside the verdict', () => {
    const run = result('churn', { n: 100, m: 5, fraction: 0.1, periodS: 10 }, { changeToAvailable: { p99S: 190 }, floor: { changeToReady: { p99S: 189 } } });
    const row = evaluateTargets([run]).find((r) => r.target.startsWith('churn'))!;
    assert.equal(row.verdict, 'misses');
    assert.match(row.basis, /without the operator \(floor, same runs\): p99 189 s/);
  });

  it('adds what runs on a controller-manager with a raised rate limit measured, without judging them', () => {
    const run = result('churn', { n: 100, m: 5, fraction: 0.1, periodS: 10 }, { changeToAvailable: { p99S: 190 } });
    const raised = [7, 9, 8].map((p99) => result('churn', { n: 100, m: 5, fraction: 0.1, periodS: 10, controllerManagerQps: 200 }, { changeToAvailable: { p99S: p99 }, floor: { changeToReady: { p99S: p99 - 1 } } }));
    const row = evaluateTargets([run, ...raised]).find((r) => r.target.startsWith('churn'))!;
    assert.equal(row.figure, '190 s');
    assert.equal(row.verdict, 'misses');
    assert.match(row.basis, /With the controller-manager at QPS 200: p99 8 s; the same churn without the operator \(floor, same runs\): p99 7 s; 3 runs$/);
  });
});
