/**
 * Summary statistics for benchmark samples.
 *
 * Guarantees: pure functions, no I/O. `percentile` interpolates linearly between closest ranks
 * (the "type 7" definition used by NumPy and R by default), so p50 of an even-sized sample is the
 * mean of the two middle values and p100 is the maximum; an empty sample gives NaN, never a
 * thrown error. Inputs are never mutated.
 */

/** The q-th percentile (0 ≤ q ≤ 100) of `values`; NaN for an empty sample. */
export function percentile(values: readonly number[], q: number): number {
  if (!(q >= 0 && q <= 100)) throw new RangeError(`percentile must be within [0, 100], got ${q}`);
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return Number.NaN;
  const sorted = [...finite].sort((a, b) => a - b);
  const rank = (q / 100) * (sorted.length - 1);
  const lower = Math.floor(rank);
  const upper = Math.ceil(rank);
  const lo = sorted[lower]!;
  const hi = sorted[upper]!;
  return lo + (hi - lo) * (rank - lower);
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export function mean(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v));
  return finite.length === 0 ? Number.NaN : finite.reduce((s, v) => s + v, 0) / finite.length;
}

export interface Summary {
  count: number;
  min: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

export function summarize(values: readonly number[]): Summary {
  const finite = values.filter((v) => Number.isFinite(v));
  return {
    count: finite.length,
    min: finite.length ? Math.min(...finite) : Number.NaN,
    p50: percentile(finite, 50),
    p95: percentile(finite, 95),
    p99: percentile(finite, 99),
    max: finite.length ? Math.max(...finite) : Number.NaN,
    mean: mean(finite),
  };
}

/** Rounds to `digits` decimals (for JSON and tables); NaN and infinities pass through. */
export function round(value: number, digits = 3): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
