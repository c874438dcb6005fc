/**
 * The pure parts of the `throughput` scenario: option lists, its figures from the times
 * Deployments and statuses were first seen, and the memory-growth slope.
 *
 * Guarantees: no I/O, inputs never mutated. `parseList` accepts "4" or "1,4,16" (positive
 * integers, duplicates dropped, order kept) and rejects anything else with an error naming the
 * flag. `throughputFigures` measures from `t0` (the first create sent): the wall time to the last
 * Deployment, objects/s over it, and the steady rate between the 10th and 90th percentile
 * Deployment (startup and tail left out); missing times are an error, never a silent NaN.
 * `rssSlope` fits resident memory against cached objects by least squares and gives MiB per
 * 1,000 objects; undefined with fewer than two distinct object counts.
 */
import { round } from './stats.ts';

/** "1,4,16" → [1, 4, 16]; undefined when the flag was not given. */
export function parseList(value: string | undefined, flag: string): number[] | undefined {
  if (value === undefined) return undefined;
  const parts = value.split(',').map((p) => p.trim());
  const out: number[] = [];
  for (const p of parts) {
    const n = Number(p);
    if (p === '' || !Number.isInteger(n) || n < 1) throw new Error(`--${flag} must be a positive integer or a comma-separated list of them, got "${value}"`);
    if (!out.includes(n)) out.push(n);
  }
  return out;
}

/** Every combination, first list outermost: [[a1, b1], [a1, b2], [a2, b1], ...]. */
export function combinations<A, B>(as: readonly A[], bs: readonly B[]): [A, B][] {
  return as.flatMap((a) => bs.map((b) => [a, b] as [A, B]));
}

/** The operator command with `--max-concurrent-reconciles`, when a concurrency is asked for. */
export function throughputCommand(base: string, maxConcurrentReconciles: number | undefined): string {
  return maxConcurrentReconciles === undefined ? base : `${base} --max-concurrent-reconciles ${maxConcurrentReconciles}`;
}

export interface ThroughputFigures {
  n: number;
  /** First create sent → last owned Deployment seen (s). */
  wallS: number;
  /** First create sent → last Memcached status written (s). */
  wallStatusS: number;
  /** n / wallS. */
  objectsPerS: number;
  /** Deployments per second between the 10th and the 90th percentile Deployment. */
  steadyObjectsPerS: number;
  /** Time to half of the Deployments (s). */
  halfS: number;
}

/**
 * Figures from monotonic times (ms): `t0` the first create sent, `deploymentsAt` when each
 * owned Deployment was first seen, `statusAt` when each Memcached's status was first seen written.
 */
export function throughputFigures(n: number, t0: number, deploymentsAt: readonly number[], statusAt: readonly number[]): ThroughputFigures {
  if (n < 1) throw new Error('throughput figures need at least one object');
  if (deploymentsAt.length !== n || statusAt.length !== n) throw new Error(`expected ${n} Deployment and status times, got ${deploymentsAt.length} and ${statusAt.length}`);
  const d = [...deploymentsAt].map((t) => (t - t0) / 1000).sort((a, b) => a - b);
  const lastStatus = Math.max(...statusAt.map((t) => (t - t0) / 1000));
  const wallS = d[d.length - 1]!;
  const at = (q: number) => d[Math.min(d.length - 1, Math.max(0, Math.ceil(q * d.length) - 1))]!;
  const lo = at(0.1);
  const hi = at(0.9);
  const between = Math.ceil(0.9 * n) - Math.ceil(0.1 * n);
  return {
    n,
    wallS: round(wallS),
    wallStatusS: round(lastStatus),
    objectsPerS: round(wallS > 0 ? n / wallS : Number.POSITIVE_INFINITY, 1),
    steadyObjectsPerS: round(hi > lo && between > 0 ? between / (hi - lo) : n / Math.max(wallS, 1e-3), 1),
    halfS: round(at(0.5)),
  };
}

export interface RssPoint {
  /** Objects in the operator's cache (Memcacheds + Deployments + pods it watches). */
  cachedObjects: number;
  rssMiB: number;
}

/** Least-squares slope of RSS over cached objects, in MiB per 1,000 objects, and the fitted RSS at 0 objects. */
export function rssSlope(points: readonly RssPoint[]): { miBPer1000: number; interceptMiB: number } | undefined {
  const usable = points.filter((p) => Number.isFinite(p.cachedObjects) && Number.isFinite(p.rssMiB));
  if (new Set(usable.map((p) => p.cachedObjects)).size < 2) return undefined;
  const mx = usable.reduce((s, p) => s + p.cachedObjects, 0) / usable.length;
  const my = usable.reduce((s, p) => s + p.rssMiB, 0) / usable.length;
  let sxy = 0;
  let sxx = 0;
  for (const p of usable) {
    sxy += (p.cachedObjects - mx) * (p.rssMiB - my);
    sxx += (p.cachedObjects - mx) ** 2;
  }
  const slope = sxy / sxx;
  return { miBPer1000: round(slope * 1000, 2), interceptMiB: round(my - slope * mx, 1) };
}
