/**
 * Before/after measurement of one phase of a scenario: the operator's own request counters
 * (`rest_client_requests_total`), reconciles and CPU; the API server's `apiserver_request_total`
 * by verb (every client, the control plane's own controllers included), its lists and watches by
 * resource, and the watches it closed on a client too slow to take their events
 * (`apiserver_terminated_watchers_total`: the client then watches again, or lists again); CPU
 * seconds of each control-plane component and of the whole host (to tell operator cost from
 * cluster cost and to show machine noise).
 *
 * Guarantees: every figure is a difference between a scrape at `begin` and one at `end`, so
 * counters accumulated before the phase (cache sync, an earlier phase) never leak into it. The
 * operator part is present only when an operator runs (and a companion's, measured the same way,
 * only when one runs beside it); a failed API server scrape is recorded as absent rather than
 * failing the run.
 */
import https from 'node:https';
import type { KubeClient } from '@iot-operator/runtime';
import { now, scrapeApiserver } from './kube.ts';
import type { OperatorProcess } from './operator.ts';
import { deltaBy, parseMetrics, sumBy, total, type Sample } from './prom.ts';
import { MiB, componentFlag, readComponentsCpu, readHostCpu } from './proc.ts';
import { round } from './stats.ts';

export const WRITE_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];
const OPERATOR_METRICS = ['rest_client_requests_total', 'controller_runtime_reconcile_total', 'workqueue_queue_duration_seconds', 'workqueue_depth', 'controller_runtime_active_workers'];

export interface RequestFigures {
  byVerb: Record<string, number>;
  total: number;
}

export interface ApiserverFigures extends RequestFigures {
  listsByResource: Record<string, number>;
  watchesByResource: Record<string, number>;
  /** Watches the API server closed because their client fell behind, by resource. */
  terminatedWatchersByResource: Record<string, number>;
}

export interface OperatorRequestFigures extends RequestFigures {
  byVerbCode: Record<string, number>;
  writes: number;
}

/** Control-plane components whose API clients are rate-limited on the client side (client-go QPS/burst). */
export const RATE_LIMITED_COMPONENTS = ['kube-controller-manager', 'kube-scheduler'];
const CLIENT_METRICS = ['rest_client_requests_total', 'rest_client_rate_limiter_duration_seconds'];

export interface ClientFigures {
  /** Requests the component sent to the API server. */
  requests: number;
  /** Seconds its requests waited in client-go's rate limiter (summed over requests). */
  rateLimiterWaitS: number;
}

/** Scrapes a component's /metrics on its secure port (its /metrics is open without credentials). */
export function scrapeComponent(clusterDir: string, component: string): Promise<Sample[] | undefined> {
  const port = componentFlag(clusterDir, component, 'secure-port');
  if (!port) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const req = https.get({ host: '127.0.0.1', port: Number(port), path: '/metrics', rejectUnauthorized: false, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(res.statusCode === 200 ? parseMetrics(Buffer.concat(chunks).toString('utf8'), CLIENT_METRICS) : undefined));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

async function scrapeComponents(clusterDir: string): Promise<Record<string, Sample[] | undefined>> {
  const out: Record<string, Sample[] | undefined> = {};
  await Promise.all(RATE_LIMITED_COMPONENTS.map(async (c) => (out[c] = await scrapeComponent(clusterDir, c))));
  return out;
}

export function clientFigures(before: Sample[], after: Sample[]): ClientFigures {
  const sum = (samples: Sample[], name: string) => total(sumBy(samples, name));
  return {
    requests: sum(after, 'rest_client_requests_total') - sum(before, 'rest_client_requests_total'),
    rateLimiterWaitS: round(sum(after, 'rest_client_rate_limiter_duration_seconds_sum') - sum(before, 'rest_client_rate_limiter_duration_seconds_sum'), 1),
  };
}

/** A process's own figures over a phase: its requests and reconciles (its /metrics), CPU and RSS (/proc). */
export interface ProcessFigures {
  requests: OperatorRequestFigures;
  reconciles: number;
  cpuS: number;
  peakRssMiB: number;
  rssEndMiB: number;
}

export interface PhaseFigures {
  durationS: number;
  operator?: ProcessFigures;
  /** The process run beside the operator (`--companion-cmd`), measured as the operator is. */
  companion?: ProcessFigures;
  apiserver?: ApiserverFigures;
  componentsCpuS: Record<string, number>;
  /** Per rate-limited control-plane component: its requests and its time waiting in the client-side rate limiter. */
  controlPlaneClients?: Record<string, ClientFigures>;
  host: { busyCpuS: number; utilisation: number };
}

export function operatorRequestFigures(before: Sample[], after: Sample[]): OperatorRequestFigures {
  const byVerbCode = deltaBy(sumBy(before, 'rest_client_requests_total', ['method', 'code']), sumBy(after, 'rest_client_requests_total', ['method', 'code']));
  const byVerb = deltaBy(sumBy(before, 'rest_client_requests_total', ['method']), sumBy(after, 'rest_client_requests_total', ['method']));
  const writes = WRITE_METHODS.reduce((s, m) => s + (byVerb[m] ?? 0), 0);
  return { byVerb, byVerbCode, total: total(byVerb), writes };
}

/** The API server's requests over a phase (all clients), and the watches it closed on slow clients. */
export function apiserverFigures(before: Sample[], after: Sample[]): ApiserverFigures {
  const delta = (name: string, by: string[], keep: (s: Sample) => boolean = () => true) =>
    deltaBy(sumBy(before.filter(keep), name, by), sumBy(after.filter(keep), name, by));
  const byVerb = delta('apiserver_request_total', ['verb']);
  const ofVerb = (verb: string) => delta('apiserver_request_total', ['resource'], (s) => s.labels.verb === verb);
  return {
    byVerb,
    total: total(byVerb),
    listsByResource: ofVerb('LIST'),
    watchesByResource: ofVerb('WATCH'),
    terminatedWatchersByResource: delta('apiserver_terminated_watchers_total', ['resource']),
  };
}

export function reconcileCount(samples: Sample[]): number {
  return total(sumBy(samples, 'controller_runtime_reconcile_total'));
}

/** One process over a phase: its metrics and CPU at the start, read again at the end. */
class ProcessPhase {
  private cpuBefore = 0;

  private constructor(
    private readonly process: OperatorProcess,
    readonly before: Sample[],
  ) {}

  /** Scrapes its metrics; `start` then reads the CPU to count from. */
  static async begin(process: OperatorProcess): Promise<ProcessPhase> {
    return new ProcessPhase(process, await process.metrics(OPERATOR_METRICS));
  }

  start(): void {
    this.process.sampler.sample();
    this.cpuBefore = this.process.sampler.lastCpuS ?? 0;
  }

  /** Reads /proc at the end of the phase (its metrics are scraped after, by `end`). */
  sample(): void {
    this.process.sampler.sample();
  }

  /** Its figures over the phase and its metrics at the end, or undefined when it has exited. */
  async end(): Promise<{ figures: ProcessFigures; after: Sample[] } | undefined> {
    if (!this.process.running) return undefined;
    const after = await this.process.metrics(OPERATOR_METRICS);
    const s = this.process.sampler;
    return {
      after,
      figures: {
        requests: operatorRequestFigures(this.before, after),
        reconciles: reconcileCount(after) - reconcileCount(this.before),
        cpuS: round((s.lastCpuS ?? 0) - this.cpuBefore, 2),
        peakRssMiB: round(s.peakRssBytes / MiB, 1),
        rssEndMiB: round((s.lastRssBytes ?? 0) / MiB, 1),
      },
    };
  }
}

export class PhaseProbe {
  private constructor(
    private readonly client: KubeClient,
    private readonly clusterDir: string,
    private readonly operator: ProcessPhase | undefined,
    private readonly companion: ProcessPhase | undefined,
    private readonly startedAt: number,
    private readonly apiserverBefore: Sample[] | undefined,
    private readonly componentsBefore: Record<string, number>,
    private readonly hostBefore: { busyS: number; totalS: number },
    private readonly clientsBefore: Record<string, Sample[] | undefined>,
  ) {}

  /** The operator's metrics when the phase began. */
  get operatorBefore(): Sample[] | undefined {
    return this.operator?.before;
  }

  static async begin(client: KubeClient, clusterDir: string, operator?: OperatorProcess, companion?: OperatorProcess): Promise<PhaseProbe> {
    const [operatorPhase, companionPhase, apiserverBefore, clientsBefore] = await Promise.all([
      operator && ProcessPhase.begin(operator),
      companion && ProcessPhase.begin(companion),
      scrapeApiserver(client).catch(() => undefined),
      scrapeComponents(clusterDir),
    ]);
    operatorPhase?.start();
    companionPhase?.start();
    return new PhaseProbe(client, clusterDir, operatorPhase, companionPhase, now(), apiserverBefore, readComponentsCpu(clusterDir), readHostCpu(), clientsBefore);
  }

  /** Ends the phase: `endedAt` (monotonic ms) defaults to now; scrapes happen after it. */
  async end(endedAt = now()): Promise<PhaseFigures & { operatorAfter?: Sample[] }> {
    const host = readHostCpu();
    const components = readComponentsCpu(this.clusterDir);
    this.operator?.sample();
    this.companion?.sample();
    const [operatorEnd, companionEnd, apiserverAfter, clientsAfter] = await Promise.all([
      this.operator?.end(),
      this.companion?.end(),
      scrapeApiserver(this.client).catch(() => undefined),
      scrapeComponents(this.clusterDir),
    ]);
    const componentsCpuS: Record<string, number> = {};
    for (const [name, cpu] of Object.entries(components)) componentsCpuS[name] = round(cpu - (this.componentsBefore[name] ?? 0), 2);
    const busy = host.busyS - this.hostBefore.busyS;
    const all = host.totalS - this.hostBefore.totalS;
    const figures: PhaseFigures & { operatorAfter?: Sample[] } = {
      durationS: round((endedAt - this.startedAt) / 1000),
      componentsCpuS,
      host: { busyCpuS: round(busy, 2), utilisation: round(all > 0 ? busy / all : 0, 3) },
    };
    const clients: Record<string, ClientFigures> = {};
    for (const c of RATE_LIMITED_COMPONENTS) {
      const b = this.clientsBefore[c];
      const a = clientsAfter[c];
      if (b && a) clients[c] = clientFigures(b, a);
    }
    if (Object.keys(clients).length > 0) figures.controlPlaneClients = clients;
    if (this.apiserverBefore && apiserverAfter) {
      figures.apiserver = apiserverFigures(this.apiserverBefore, apiserverAfter);
    }
    if (operatorEnd) {
      figures.operator = operatorEnd.figures;
      figures.operatorAfter = operatorEnd.after;
    }
    if (companionEnd) figures.companion = companionEnd.figures;
    return figures;
  }
}
