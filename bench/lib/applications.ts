/**
 * The pure parts of the `applications` scenario (scenarios/applications.ts): which messages or
 * commands of a run fall in its measuring window, how long each took to arrive, and their
 * percentiles.
 *
 * Guarantees: no I/O; inputs are never mutated; times are milliseconds on one clock (this
 * machine's). Something sent within [from, to) counts; one that never arrived counts as sent and
 * missing, never as a latency.
 */
import { percentile, round } from './stats.ts';

/** Something sent (a message, a command) under `id` at `sentAt`. */
export interface Sent {
  id: string;
  sentAt: number;
}

export interface Arrivals {
  /** Sent within the window. */
  sent: number;
  /** Of those, how many arrived, and how long each took (ms, in the order sent). */
  arrived: number;
  latenciesMs: number[];
}

/** The items sent within [from, to) and, for those that arrived (`arrivedAt` by id), the time they took. */
export function arrivalsWithin(sent: Iterable<Sent>, arrivedAt: ReadonlyMap<string, number>, from: number, to: number): Arrivals {
  const latenciesMs: number[] = [];
  let count = 0;
  for (const item of sent) {
    if (item.sentAt < from || item.sentAt >= to) continue;
    count++;
    const at = arrivedAt.get(item.id);
    if (at !== undefined) latenciesMs.push(at - item.sentAt);
  }
  return { sent: count, arrived: latenciesMs.length, latenciesMs };
}

export interface LatencySummary {
  count: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** p50, p95, p99 and the largest of `values` (ms), to 0.1 ms; NaN for none. */
export function latencySummary(values: readonly number[]): LatencySummary {
  const at = (q: number) => round(percentile(values, q), 1);
  return { count: values.length, p50Ms: at(50), p95Ms: at(95), p99Ms: at(99), maxMs: at(100) };
}
