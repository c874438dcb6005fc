/**
 * Unit tests of the scale scenario's pure parts: the per-instance costs it derives from a burst,
 * the growth table across N in the report, and the N = 1,000 targets it is judged on.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BenchResult } from './lib/results.ts';
import { evaluateTargets, scaleGrowthTable } from './report.ts';
import { perInstanceCost } from './scenarios/scale.ts';

function scale(n: number, f: { ratio: number; rss: number; cpuMs: number; verified: number; writesAfter?: number; idleWrites?: number; churnOver?: number }, options: Record<string, unknown> = {}): BenchResult {
  return {
    scenario: 'scale',
    startedAt: '2026-01-01T00:00:00.000Z',
    ok: true,
    options: { n, m: 5, controllerManagerQps: 200, schedulerQps: 200, ...options },
    versions: { node: 'v20.0.0', kubernetes: 'v1.33.13', gitCommit: 'abcdef0123456789', gitDirty: false },
    machine: { cores: 2, memoryGiB: 24, cpuModel: 'cpu', loadavgStart: [1, 1, 1], kubeApiserversRunning: 1 },
    figures: {
      n,
      ratioWallToFloor: f.ratio,
      perInstance: { cpuMs: f.cpuMs, requests: 20 },
      burst: { wallS: n / 4, operator: { peakRssMiB: f.rss } },
      steady: { idle: { writesPerMin: f.idleWrites ?? 0 }, resync: { writes: 0 }, rss: { idleEndMiB: f.rss - 10 } },
      churnP99OverFloorS: f.churnOver ?? 0.2,
      restart: { killToVerifiedS: f.verified, writes: f.writesAfter ?? 0 },
    },
    samples: {},
  };
}

describe('perInstanceCost', () => {
  it('divides the burst\'s requests, writes, reconciles and CPU by N', () => {
    assert.deepEqual(perInstanceCost(1000, { requests: { total: 24_500, writes: 8_000 }, reconciles: 3_000, cpuS: 42.5 }), { requests: 24.5, writes: 8, reconciles: 3, cpuMs: 42.5 });
  });

  it('refuses N = 0 instead of reporting infinities', () => {
    assert.throws(() => perInstanceCost(0, { requests: { total: 1, writes: 1 }, reconciles: 1, cpuS: 1 }), /N > 0/);
  });
});

describe('scaleGrowthTable', () => {
  it('has one row per N, smallest first, with medians over that N\'s runs', () => {
    const table = scaleGrowthTable([scale(2000, { ratio: 1.2, rss: 300, cpuMs: 50, verified: 30 }), scale(1000, { ratio: 1.0, rss: 140, cpuMs: 40, verified: 10 }), scale(1000, { ratio: 1.1, rss: 160, cpuMs: 44, verified: 14 }), scale(1000, { ratio: 1.05, rss: 150, cpuMs: 42, verified: 12 })]);
    const lines = table.split('\n');
    assert.equal(lines.length, 4, 'header, rule and two sizes');
    assert.match(lines[2]!, /^\| 1000 \| 3 \| 250 \| 1.05 \| 150 \| 140 \| 42 \| 20 \|/);
    assert.match(lines[3]!, /^\| 2000 \| 1 \| 500 \| 1.20 \| 300 \|/);
  });

  it('leaves out runs of another operator command or under a memory limit, and failed runs', () => {
    const other = scale(100, { ratio: 1, rss: 90, cpuMs: 30, verified: 2 }, { operatorCmd: 'node other.mjs' });
    const limited = scale(100, { ratio: 1, rss: 90, cpuMs: 30, verified: 2 }, { operatorMemoryLimitMiB: 256 });
    const failed = { ...scale(100, { ratio: 1, rss: 90, cpuMs: 30, verified: 2 }), ok: false };
    assert.equal(scaleGrowthTable([other, limited, failed]), '');
  });
});

describe('scale targets (N = 1,000)', () => {
  const verdict = (results: BenchResult[], prefix: string) => evaluateTargets(results).find((r) => r.target.startsWith(prefix))!;

  it('judges ratio, memory, restart and churn at N = 1,000 only, naming the control plane\'s limits', () => {
    const runs = [scale(1000, { ratio: 1.08, rss: 140, cpuMs: 40, verified: 12 }), scale(1000, { ratio: 1.12, rss: 155, cpuMs: 40, verified: 16 }), scale(1000, { ratio: 1.09, rss: 149, cpuMs: 40, verified: 14 }), scale(2000, { ratio: 3, rss: 999, cpuMs: 1, verified: 99 })];
    const ratio = verdict(runs, 'scale N = 1,000: burst wall');
    assert.equal(ratio.verdict, 'holds');
    assert.equal(ratio.figure, '1.09 ×');
    assert.match(ratio.basis, /QPS 200 \/ 200; 3 runs/);
    assert.equal(verdict(runs, 'scale N = 1,000: operator peak RSS').figure, '149 MiB');
    assert.equal(verdict(runs, 'scale N = 1,000: restart').verdict, 'holds');
    assert.equal(verdict(runs, 'scale N = 1,000: churn').verdict, 'holds');
  });

  it('misses when any restart, idle window or resync wrote, and when re-checking took longer than 15 s', () => {
    const runs = [scale(1000, { ratio: 1, rss: 100, cpuMs: 40, verified: 20, writesAfter: 0 }), scale(1000, { ratio: 1, rss: 100, cpuMs: 40, verified: 20, idleWrites: 0.5 })];
    const writes = verdict(runs, 'scale N = 1,000: writes');
    assert.equal(writes.verdict, 'misses');
    assert.equal(writes.figure, '0.500');
    assert.equal(verdict(runs, 'scale N = 1,000: restart').verdict, 'misses');
  });

  it('says "not measured" without a scale run at N = 1,000', () => {
    assert.equal(verdict([scale(2000, { ratio: 1, rss: 1, cpuMs: 1, verified: 1 })], 'scale N = 1,000: burst wall').verdict, 'not measured');
  });
});
