/**
 * Reading Prometheus text exposition (format 0.0.4), as served by the operator's /metrics and
 * the API server's /metrics.
 *
 * Guarantees: pure functions, no I/O. `parseMetrics` returns every sample line (comments and
 * blank lines skipped) with its labels unescaped (\\, \" and \n) and its value parsed (NaN, +Inf
 * and -Inf included); a malformed line is skipped, never thrown on, so one odd line of a large
 * scrape does not lose the rest. `names` limits parsing to the given metric names (a histogram's
 * `_bucket`, `_sum` and `_count` lines belong to its base name), which keeps parsing the API
 * server's multi-megabyte scrape cheap. `sumBy` adds samples grouped by label values;
 * `deltaBy` subtracts two such sums key by key (counters only grow, so keys missing before count
 * from 0). `histogramQuantile` estimates a quantile from cumulative buckets the way PromQL's
 * `histogram_quantile` does (linear interpolation inside the bucket; a quantile falling into
 * the +Inf bucket returns the largest finite bound).
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const lineRe = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?\s*$/;

function parseValue(text: string): number {
  if (text === '+Inf' || text === 'Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  if (text === 'NaN') return Number.NaN;
  const n = Number(text);
  return Number.isNaN(n) ? Number.NaN : n;
}

/** Parses `a="x",b="y\"z"` into an object; undefined when malformed. */
export function parseLabels(text: string): Record<string, string> | undefined {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    while (text[i] === ' ' || text[i] === ',') i++;
    if (i >= text.length) break;
    const eq = text.indexOf('=', i);
    if (eq < 0) return undefined;
    const key = text.slice(i, eq).trim();
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(key) || text[eq + 1] !== '"') return undefined;
    let j = eq + 2;
    let value = '';
    for (;;) {
      if (j >= text.length) return undefined;
      const c = text[j]!;
      if (c === '\\') {
        const next = text[j + 1];
        value += next === 'n' ? '\n' : (next ?? '');
        j += 2;
      } else if (c === '"') {
        j++;
        break;
      } else {
        value += c;
        j++;
      }
    }
    labels[key] = value;
    i = j;
  }
  return labels;
}

function baseName(name: string): string {
  return name.replace(/_(bucket|sum|count)$/, '');
}

export function parseMetrics(text: string, names?: readonly string[]): Sample[] {
  const wanted = names ? new Set(names) : undefined;
  const samples: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (wanted) {
      const end = line.search(/[{\s]/);
      const name = end < 0 ? line : line.slice(0, end);
      if (!wanted.has(name) && !wanted.has(baseName(name))) continue;
    }
    const m = lineRe.exec(line);
    if (!m) continue;
    const labels = m[3] !== undefined ? parseLabels(m[3]) : {};
    if (!labels) continue;
    samples.push({ name: m[1]!, labels, value: parseValue(m[4]!) });
  }
  return samples;
}

/** Sums the samples of `name`, grouped by the values of `by` joined with a space ('' when `by` is empty). */
export function sumBy(samples: readonly Sample[], name: string, by: readonly string[] = []): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) {
    if (s.name !== name || !Number.isFinite(s.value)) continue;
    const key = by.map((l) => s.labels[l] ?? '').join(' ');
    out[key] = (out[key] ?? 0) + s.value;
  }
  return out;
}

/** after − before, key by key; keys with a zero difference are dropped. */
export function deltaBy(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(after)) {
    const d = value - (before[key] ?? 0);
    if (d !== 0) out[key] = d;
  }
  return out;
}

export function total(values: Record<string, number>): number {
  return Object.values(values).reduce((s, v) => s + v, 0);
}

/** The sum of one metric's samples whose labels include `match`. */
export function sumWhere(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name || !Number.isFinite(s.value)) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** Cumulative bucket counts of histogram `name` (by upper bound `le`), summed over every other label matching `match`. */
export function histogramBuckets(samples: readonly Sample[], name: string, match: Record<string, string> = {}): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${name}_bucket` || s.labels.le === undefined) continue;
    if (!Object.entries(match).every(([k, v]) => s.labels[k] === v)) continue;
    const le = parseValue(s.labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + s.value);
  }
  return buckets;
}

/** after − before per bucket bound (the observations made between two scrapes). */
export function bucketDelta(before: Map<number, number>, after: Map<number, number>): Map<number, number> {
  const out = new Map<number, number>();
  for (const [le, count] of after) out.set(le, count - (before.get(le) ?? 0));
  return out;
}

/** PromQL-style histogram_quantile over cumulative buckets; NaN when there are no observations. */
export function histogramQuantile(q: number, buckets: Map<number, number>): number {
  const sorted = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  if (sorted.length === 0) return Number.NaN;
  const totalCount = sorted[sorted.length - 1]![1];
  if (!(totalCount > 0)) return Number.NaN;
  const rank = q * totalCount;
  let prevBound = 0;
  let prevCount = 0;
  for (const [bound, count] of sorted) {
    if (count >= rank) {
      if (bound === Number.POSITIVE_INFINITY) return prevBound;
      if (count === prevCount) return bound;
      return prevBound + (bound - prevBound) * ((rank - prevCount) / (count - prevCount));
    }
    prevBound = bound;
    prevCount = count;
  }
  return prevBound;
}
