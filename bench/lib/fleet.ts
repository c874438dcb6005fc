/**
 * The pure parts of the `fleet` scenario (scenarios/fleet.ts, fleet/devices.ts): the figures made
 * of what the devices (their connection runs, the simulator's `ConnectRun`) and the processes
 * recorded.
 *
 * Guarantees: no I/O; inputs are never mutated. Times are milliseconds since the epoch, all taken
 * on this machine's clock (the device processes' and the runner's).
 * - `sumBuckets` adds per-second counts element by element (the longest list sets the length);
 *   `rateFigures` gives the messages per second over the whole window and its median, slowest
 *   and fastest second.
 * - `connectFigures` describes a set of connection runs measured from one instant (a herd's
 *   start, the gateway's kill): how many connected, when the last one did (only when all did),
 *   the time to CONNACK at p50, p90, p99 and max over all the runs — a device never connected
 *   counts as slower than every other, so a percentile that falls on one is left out rather than
 *   taken from the devices that did —, the attempts, and the failed attempts by kind, summed.
 *   `connectedBySecond` is the number connected at the end of each second from that instant.
 *   `runSince` picks a device's run that an instant (the gateway's kill) began: the first one
 *   started then or later, or else the one still trying then.
 * - `latencyFigures` gives p50, p90, p99 and max of latencies in ms; `delayRatio` is how much a
 *   p99 grew over a baseline one (0.1 = 10 % later).
 * - `refusalsByReason` reads `iot_gateway_refusals_total{reason}` of the gateway's /metrics,
 *   without the reasons at 0.
 * - `coresUsed` turns CPU seconds read at a phase's start and end into cores used over its wall
 *   time, per process.
 * - `probeFigures` describes probes of the gateway's /healthz, one after the other: latency p50,
 *   p99 and max, how many took longer than `limitMs` (a kubelet probe's timeout), and the longest
 *   run of consecutive ones that did: how many, and seconds from the first one's start to the last
 *   one's end.
 * - `parseTcpExt` reads the `TcpExt` counters of /proc/net/netstat by name (ListenOverflows: a
 *   connection completed while the listener's accept queue was full; SyncookiesSent …).
 */
import type { ConnectRun } from '../../workloads/iot-service/src/simulator/fleet.ts';
import { parseMetrics, sumBy } from './prom.ts';
import { percentile, round } from './stats.ts';

export function sumBuckets(lists: readonly (readonly number[])[]): number[] {
  const length = Math.max(0, ...lists.map((l) => l.length));
  return Array.from({ length }, (_, i) => lists.reduce((sum, l) => sum + (l[i] ?? 0), 0));
}

export interface RateFigures {
  total: number;
  perS: number;
  medianSecondPerS: number;
  slowestSecondPerS: number;
  fastestSecondPerS: number;
}

export function rateFigures(perSecond: readonly number[]): RateFigures {
  const total = perSecond.reduce((s, n) => s + n, 0);
  return {
    total,
    perS: perSecond.length ? round(total / perSecond.length, 1) : Number.NaN,
    medianSecondPerS: percentile(perSecond, 50),
    slowestSecondPerS: perSecond.length ? Math.min(...perSecond) : Number.NaN,
    fastestSecondPerS: perSecond.length ? Math.max(...perSecond) : Number.NaN,
  };
}

export interface LatencyFigures {
  count: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

export function latencyFigures(latenciesMs: readonly number[]): LatencyFigures {
  return {
    count: latenciesMs.length,
    p50Ms: round(percentile(latenciesMs, 50), 1),
    p90Ms: round(percentile(latenciesMs, 90), 1),
    p99Ms: round(percentile(latenciesMs, 99), 1),
    maxMs: round(percentile(latenciesMs, 100), 1),
  };
}

export function delayRatio(p99Ms: number, baselineP99Ms: number): number {
  return round(p99Ms / baselineP99Ms - 1, 3);
}

export function mergeCounts(counts: readonly Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of counts) for (const [key, n] of Object.entries(c)) out[key] = (out[key] ?? 0) + n;
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

export interface ConnectFigures {
  devices: number;
  connected: number;
  /** Seconds from the instant to the last CONNACK; absent unless every device connected. */
  allConnectedS?: number;
  /** Seconds to CONNACK; a percentile falling on a device never connected is absent. */
  connackS: { p50?: number; p90?: number; p99?: number; max?: number };
  attempts: { total: number; mean: number; max: number };
  failures: Record<string, number>;
}

/** The q-th percentile of `sorted` (ascending, +Infinity last), by the closest ranks; undefined when it involves +Infinity. */
function reached(sorted: readonly number[], q: number): number | undefined {
  if (sorted.length === 0) return undefined;
  const rank = (q / 100) * (sorted.length - 1);
  const [lo, hi] = [sorted[Math.floor(rank)]!, sorted[Math.ceil(rank)]!];
  return Number.isFinite(hi) ? round(lo + (hi - lo) * (rank - Math.floor(rank)), 2) : undefined;
}

export function connectFigures(runs: readonly ConnectRun[], from: number): ConnectFigures {
  const times = runs.map((r) => (r.connectedAt === undefined ? Number.POSITIVE_INFINITY : (r.connectedAt - from) / 1000)).sort((a, b) => a - b);
  const connected = times.filter((t) => Number.isFinite(t)).length;
  const attempts = runs.map((r) => r.attempts);
  const totalAttempts = attempts.reduce((s, n) => s + n, 0);
  const percentiles = { p50: reached(times, 50), p90: reached(times, 90), p99: reached(times, 99), max: reached(times, 100) };
  return {
    devices: runs.length,
    connected,
    ...(connected === runs.length && runs.length > 0 ? { allConnectedS: round(times.at(-1)!, 2) } : {}),
    connackS: Object.fromEntries(Object.entries(percentiles).filter(([, v]) => v !== undefined)),
    attempts: { total: totalAttempts, mean: runs.length ? round(totalAttempts / runs.length, 2) : Number.NaN, max: Math.max(0, ...attempts) },
    failures: mergeCounts(runs.map((r) => r.failures)),
  };
}

export function runSince(runs: readonly ConnectRun[], instant: number): ConnectRun | undefined {
  const last = runs.at(-1);
  return runs.find((r) => r.startedAt >= instant) ?? (last && (last.connectedAt === undefined || last.connectedAt >= instant) ? last : undefined);
}

export function connectedBySecond(runs: readonly ConnectRun[], from: number): number[] {
  const seconds = runs.filter((r) => r.connectedAt !== undefined).map((r) => Math.max(0, Math.floor((r.connectedAt! - from) / 1000)));
  const length = seconds.length ? Math.max(...seconds) + 1 : 0;
  const out = new Array<number>(length).fill(0);
  for (const s of seconds) out[s]!++;
  for (let i = 1; i < length; i++) out[i]! += out[i - 1]!;
  return out;
}

export function refusalsByReason(metricsText: string): Record<string, number> {
  const byReason = sumBy(parseMetrics(metricsText, ['iot_gateway_refusals_total']), 'iot_gateway_refusals_total', ['reason']);
  return Object.fromEntries(Object.entries(byReason).filter(([, n]) => n > 0));
}

/** One probe: when it started (ms since the epoch) and how long it took to answer (or its timeout). */
export interface Probe {
  at: number;
  ms: number;
}

export interface ProbeFigures {
  probes: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  overLimit: number;
  longestRunOverLimit: number;
  longestRunOverLimitS: number;
}

export function probeFigures(probes: readonly Probe[], limitMs: number): ProbeFigures {
  const latencies = probes.map((p) => p.ms);
  let [run, longest, longestS] = [0, 0, 0];
  let runStart = 0;
  for (const p of probes) {
    if (p.ms <= limitMs) {
      run = 0;
      continue;
    }
    if (run++ === 0) runStart = p.at;
    longest = Math.max(longest, run);
    longestS = Math.max(longestS, (p.at + p.ms - runStart) / 1000);
  }
  return {
    probes: probes.length,
    p50Ms: round(percentile(latencies, 50), 0),
    p99Ms: round(percentile(latencies, 99), 0),
    maxMs: round(percentile(latencies, 100), 0),
    overLimit: latencies.filter((ms) => ms > limitMs).length,
    longestRunOverLimit: longest,
    longestRunOverLimitS: round(longestS, 1),
  };
}

export function parseTcpExt(netstat: string): Record<string, number> {
  const [names, values] = netstat.split('\n').filter((line) => line.startsWith('TcpExt:'));
  const keys = names?.split(/\s+/).slice(1) ?? [];
  const numbers = values?.split(/\s+/).slice(1).map(Number) ?? [];
  return Object.fromEntries(keys.map((key, i) => [key, numbers[i] ?? 0]));
}

export function coresUsed(start: Record<string, number>, end: Record<string, number>, wallS: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, cpuS] of Object.entries(end)) {
    const before = start[name];
    if (before !== undefined) out[name] = round((cpuS - before) / wallS, 2);
  }
  return out;
}
