/**
 * `throughput`: the operator as the bottleneck. N Memcached objects (default 2,000) with
 * `spec.size` 0 — Deployments without pods, so the control plane does little per object —
 * created at once in one namespace watched by the Memcached operator, run with
 * `--max-concurrent-reconciles <c>` when `--max-concurrent-reconciles` is given (a list runs
 * each value, and `--n 500,2000,5000` each size, one result file per combination).
 *
 * Figures: time from the first create sent to the last owned Deployment seen (and to the last
 * Memcached status written), objects/s over it and between the 10th and 90th percentile
 * Deployment, the operator's requests by verb, the seconds its requests waited in its client-side
 * rate limiter, its reconciles, CPU seconds and peak RSS. Unless `--settle 0`: the memory figure
 * too — once the controller-manager has observed every Deployment (so the cached objects carry
 * their status), `--settle` seconds (default 20) of idle, then the operator's RSS, with the
 * number of objects its cache holds (Memcacheds + Deployments; no pods at size 0). The slope of
 * RSS over cached objects across sizes is the report's (bench/lib/throughput.ts `rssSlope`).
 */
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { log, now, sleep, watchObjects } from '../lib/kube.ts';
import { PhaseProbe, clientFigures } from '../lib/probe.ts';
import { sumBy, total, type Sample } from '../lib/prom.ts';
import { MiB } from '../lib/proc.ts';
import { round, summarize } from '../lib/stats.ts';
import { throughputCommand, throughputFigures } from '../lib/throughput.ts';
import { createMemcachedsAndWait, MEMCACHED_DEFAULT_COMMAND, MemcachedType, startMemcachedOperator, stopMemcachedOperator } from './memcached.ts';

const SIZE = 0;
const CLIENT_METRICS = ['rest_client_requests_total', 'rest_client_rate_limiter_duration_seconds', 'workqueue_retries_total', 'controller_runtime_reconcile_errors_total'];

const counter = (before: Sample[], after: Sample[], name: string) => total(sumBy(after, name)) - total(sumBy(before, name));

type DeploymentLike = KubeObject & { status?: { observedGeneration?: number } };

export async function runThroughput(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n, maxConcurrentReconciles, settleS } = ctx.options;
  const command = throughputCommand(ctx.options.operatorCmd ?? MEMCACHED_DEFAULT_COMMAND, maxConcurrentReconciles);
  const { namespace, op } = await startMemcachedOperator(ctx, 'tp', 'throughput', command);
  const abort = new AbortController();
  try {
    const readyAt = await op.waitReady();
    log(`memcached operator pid ${op.pid} ready in ${((readyAt - op.startedAt) / 1000).toFixed(2)} s (${command})`);
    const names = Array.from({ length: n }, (_, i) => `tp-${String(i).padStart(5, '0')}`);
    const wanted = new Set(names);
    const deploymentsAt = new Map<string, number>();
    const observedAt = new Map<string, number>();
    const statusAt = new Map<string, number>();
    await watchObjects(ctx.client, Kinds.Deployment, { namespace }, (type, obj, at) => {
      const name = obj.metadata.name!;
      if (type === 'DELETED' || !wanted.has(name)) return;
      const owned = obj.metadata.ownerReferences?.some((ref) => ref.controller && ref.kind === 'Memcached' && ref.name === name);
      if (!owned) return;
      if (!deploymentsAt.has(name)) deploymentsAt.set(name, at);
      const d = obj as DeploymentLike;
      if (!observedAt.has(name) && (d.status?.observedGeneration ?? 0) >= (d.metadata.generation ?? 1)) observedAt.set(name, at);
    }, abort.signal);
    await watchObjects(ctx.client, MemcachedType, { namespace }, (type, obj, at) => {
      const name = obj.metadata.name!;
      const nodes = (obj as KubeObject & { status?: { nodes?: string[] } }).status?.nodes;
      if (type !== 'DELETED' && wanted.has(name) && !statusAt.has(name) && Array.isArray(nodes)) statusAt.set(name, at);
    }, abort.signal);

    const clientBefore = await op.metrics(CLIENT_METRICS);
    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir, op);
    log(`throughput: creating ${n} Memcached objects (size ${SIZE}), operator concurrency ${maxConcurrentReconciles ?? 'default'}`);
    const { t0, sentAt, createdAt } = await createMemcachedsAndWait(ctx, 'throughput', namespace, names, { size: SIZE }, deploymentsAt, statusAt);
    const lastDeployment = Math.max(...deploymentsAt.values());
    const lastStatus = Math.max(...statusAt.values());
    const phase = await probe.end(Math.max(lastDeployment, lastStatus));
    const clientAfter = await op.metrics(CLIENT_METRICS);
    const figures = throughputFigures(n, t0, [...deploymentsAt.values()], [...statusAt.values()]);
    const perDeployment = names.map((name) => round((deploymentsAt.get(name)! - sentAt.get(name)!) / 1000));
    const d = summarize(perDeployment);
    const { operatorAfter: _omit, ...phaseFigures } = phase;
    log(`throughput: ${n} Deployments in ${figures.wallS} s (${figures.objectsPerS} objects/s), statuses in ${figures.wallStatusS} s`);

    let idle: Record<string, number> | undefined;
    if (settleS > 0) {
      const idleDeadline = now() + ctx.options.timeoutS * 1000;
      let lastPrint = now();
      while (observedAt.size < n && now() < idleDeadline) {
        await sleep(500);
        if (now() - lastPrint > 10_000) {
          lastPrint = now();
          log(`throughput: waiting for the controller-manager to observe every Deployment: ${observedAt.size}/${n}`);
        }
      }
      const observedS = round(((observedAt.size === n ? Math.max(...observedAt.values()) : now()) - t0) / 1000);
      await sleep(settleS * 1000);
      op.sampler.sample();
      idle = {
        controlPlaneObservedAllS: observedS,
        observed: observedAt.size,
        settleS,
        rssMiB: round((op.sampler.lastRssBytes ?? 0) / MiB, 1),
        peakRssMiB: round(op.sampler.peakRssBytes / MiB, 1),
      };
      log(`throughput: RSS after ${settleS} s idle ${idle.rssMiB} MiB (peak ${idle.peakRssMiB} MiB)`);
    }
    return {
      figures: {
        ...figures,
        maxConcurrentReconciles: maxConcurrentReconciles ?? null,
        createsS: round((createdAt - t0) / 1000),
        deploymentCreated: { p50S: round(d.p50), p99S: round(d.p99) },
        operatorClient: clientFigures(clientBefore, clientAfter),
        reconcileErrors: counter(clientBefore, clientAfter, 'controller_runtime_reconcile_errors_total'),
        queueRetries: counter(clientBefore, clientAfter, 'workqueue_retries_total'),
        cachedObjects: 2 * n,
        ...phaseFigures,
        ...(idle ? { idle } : {}),
      },
      samples: { deploymentCreatedS: perDeployment },
      operatorCommand: command,
    };
  } finally {
    abort.abort();
    await stopMemcachedOperator(ctx, 'throughput', namespace, op);
  }
}
