/**
 * The prom-client classes the runtime uses, loaded from their own files in prom-client.
 *
 * prom-client's package entry also loads its default metrics (node:perf_hooks, node:v8), its
 * Pushgateway (node:zlib), its Summary (tdigest, bintrees) and its cluster aggregator, none of
 * which an operator uses (the runtime collects its process metrics itself, process-metrics.ts).
 * Loaded anyway, they cost every operator process ≈ 0.8 MiB of resident memory.
 *
 * Guarantees: `Registry`, `Counter`, `Gauge` and `Histogram` are prom-client's own classes (the
 * objects its entry exports, so a `Registry` made from `prom-client` works with these metrics),
 * typed as its entry types them.
 */
import type * as promClient from 'prom-client';
import RegistryClass from 'prom-client/lib/registry.js';
import CounterClass from 'prom-client/lib/counter.js';
import GaugeClass from 'prom-client/lib/gauge.js';
import HistogramClass from 'prom-client/lib/histogram.js';

export const Registry = RegistryClass;
export type Registry = promClient.Registry;
export const Counter = CounterClass;
export type Counter<T extends string = string> = promClient.Counter<T>;
export const Gauge = GaugeClass;
export type Gauge<T extends string = string> = promClient.Gauge<T>;
export const Histogram = HistogramClass;
export type Histogram<T extends string = string> = promClient.Histogram<T>;
