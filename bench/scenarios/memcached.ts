/**
 * `memcached`: N Memcached objects (default 1000, `spec.size` 1) created at once in one
 * namespace watched by the Memcached operator.
 *
 * Done when every Memcached's Deployment (named after it) asks for `spec.size` replicas and has
 * them all rolled out and ready — a criterion any Memcached operator can be held to — and,
 * separately, when every Memcached's `status.nodes` lists `spec.size` pods (our operator's
 * status contract).
 *
 * Figures: wall time to both criteria, per-object time (p50/p99), the operator's requests by
 * verb, its CPU seconds and peak RSS, the API server's requests by verb.
 *
 * The operator command defaults to our Memcached operator
 * (`node --import tsx operators/memcached/src/main.ts`); it receives KUBECONFIG and
 * WATCH_NAMESPACE (the benchmark namespace) by environment.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Kinds, customResource, type KubeObject } from '@iot-operator/runtime';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { createNamespace, deleteNamespaceAndWait, installCrd, log, mapLimit, now, repoRoot, uniqueName, watchObjects } from '../lib/kube.ts';
import { bundledOperatorCommand, OperatorProcess } from '../lib/operator.ts';
import { PhaseProbe } from '../lib/probe.ts';
import { workloadReady, type WorkloadLike } from '../lib/readiness.ts';
import { round, summarize } from '../lib/stats.ts';

export const MemcachedType = customResource('cache.example.com', 'v1alpha1', 'Memcached', 'memcacheds');
export const MEMCACHED_CRD = 'operators/memcached/deploy/crds/cache_v1alpha1_memcached_crd.yaml';
export const MEMCACHED_DEFAULT_COMMAND = bundledOperatorCommand('memcached');
const SIZE = 1;

export async function runMemcached(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n } = ctx.options;
  const command = ctx.options.operatorCmd ?? MEMCACHED_DEFAULT_COMMAND;
  const { namespace, op } = await startMemcachedOperator(ctx, 'mc', 'memcached', command);
  const abort = new AbortController();
  try {
    const readyAt = await op.waitReady();
    log(`memcached operator pid ${op.pid} ready in ${((readyAt - op.startedAt) / 1000).toFixed(2)} s`);
    const names = Array.from({ length: n }, (_, i) => `mc-${String(i).padStart(4, '0')}`);
    const wanted = new Set(names);
    const deploymentsAt = new Map<string, number>();
    const statusAt = new Map<string, number>();
    await watchObjects(ctx.client, Kinds.Deployment, { namespace }, (type, obj, at) => {
      const name = obj.metadata.name!;
      const d = obj as WorkloadLike;
      if (type !== 'DELETED' && wanted.has(name) && !deploymentsAt.has(name) && d.spec?.replicas === SIZE && workloadReady(d)) deploymentsAt.set(name, at);
    }, abort.signal);
    await watchObjects(ctx.client, MemcachedType, { namespace }, (type, obj, at) => {
      const name = obj.metadata.name!;
      const nodes = (obj as KubeObject & { status?: { nodes?: string[] } }).status?.nodes;
      if (type !== 'DELETED' && wanted.has(name) && !statusAt.has(name) && nodes?.length === SIZE) statusAt.set(name, at);
    }, abort.signal);

    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir, op);
    log(`memcached: creating ${n} Memcached objects (size ${SIZE})`);
    const { t0, sentAt, createdAt } = await createMemcachedsAndWait(ctx, 'memcached', namespace, names, SIZE, deploymentsAt, statusAt);
    const lastDeployment = Math.max(...deploymentsAt.values());
    const lastStatus = Math.max(...statusAt.values());
    const phase = await probe.end(Math.max(lastDeployment, lastStatus));
    const perDeployment = names.map((name) => round((deploymentsAt.get(name)! - sentAt.get(name)!) / 1000));
    const perStatus = names.map((name) => round((statusAt.get(name)! - sentAt.get(name)!) / 1000));
    const d = summarize(perDeployment);
    const st = summarize(perStatus);
    const { operatorAfter: _omit, ...figures } = phase;
    return {
      figures: {
        n,
        wallS: round((lastDeployment - t0) / 1000),
        wallStatusS: round((lastStatus - t0) / 1000),
        createsS: round((createdAt - t0) / 1000),
        deploymentReady: { p50S: round(d.p50), p99S: round(d.p99) },
        statusFilled: { p50S: round(st.p50), p99S: round(st.p99) },
        ...figures,
      },
      samples: { deploymentReadyS: perDeployment, statusFilledS: perStatus },
      operatorCommand: command,
    };
  } finally {
    abort.abort();
    await stopMemcachedOperator(ctx, 'memcached', namespace, op);
  }
}

/**
 * Installs the Memcached CRD, creates a namespace named after `prefix` and starts the operator
 * command watching it (its log in the run's log directory, named after `scenario`).
 */
export async function startMemcachedOperator(ctx: BenchContext, prefix: string, scenario: string, command: string): Promise<{ namespace: string; op: OperatorProcess }> {
  if (!existsSync(path.join(repoRoot, 'operators/memcached/src/main.ts')) || !existsSync(path.join(repoRoot, MEMCACHED_CRD))) {
    throw new Error('the Memcached operator (operators/memcached/src/main.ts and its CRD) is not there yet');
  }
  await installCrd(ctx.kubeconfig, ctx.client, MEMCACHED_CRD);
  const namespace = uniqueName(prefix);
  await createNamespace(ctx.client, namespace);
  const op = await OperatorProcess.start({
    command,
    env: { KUBECONFIG: ctx.kubeconfig, WATCH_NAMESPACE: namespace, OPERATOR_NAME: namespace },
    logFile: path.join(ctx.logDir, `${scenario}-operator-${namespace}.log`),
    memoryLimitMiB: ctx.options.memoryLimitMiB,
  });
  return { namespace, op };
}

/** Stops the operator and deletes its namespace (waiting for it to go), logging how long that took. */
export async function stopMemcachedOperator(ctx: BenchContext, scenario: string, namespace: string, op: OperatorProcess): Promise<void> {
  await op.stop();
  const t = now();
  await deleteNamespaceAndWait(ctx.client, namespace, ctx.options.timeoutS * 1000);
  log(`${scenario} namespace ${namespace} removed (${((now() - t) / 1000).toFixed(0)} s)`);
}

/**
 * Creates the named Memcacheds (`spec.size` = size, 200 creates in flight) and waits until every
 * name is in both `deploymentsAt` and `statusAt` (filled by the caller's watches), logging
 * progress every 5 s; fails after the run's timeout. Returns when the first create was sent,
 * each name's send time and when the last create had been sent.
 */
export async function createMemcachedsAndWait(
  ctx: BenchContext,
  scenario: string,
  namespace: string,
  names: readonly string[],
  size: number,
  deploymentsAt: ReadonlyMap<string, number>,
  statusAt: ReadonlyMap<string, number>,
): Promise<{ t0: number; sentAt: Map<string, number>; createdAt: number }> {
  const n = names.length;
  const t0 = now();
  const sentAt = new Map<string, number>();
  await mapLimit(names, 200, async (name) => {
    sentAt.set(name, now());
    await ctx.client.create(MemcachedType, { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name, namespace }, spec: { size } });
  });
  const createdAt = now();
  const deadline = now() + ctx.options.timeoutS * 1000;
  let lastPrint = now();
  while (deploymentsAt.size < n || statusAt.size < n) {
    if (now() > deadline) throw new Error(`${scenario}: ${deploymentsAt.size}/${n} Deployments, ${statusAt.size}/${n} statuses after ${ctx.options.timeoutS} s`);
    await new Promise((r) => setTimeout(r, 100));
    if (now() - lastPrint > 5000) {
      lastPrint = now();
      log(`${scenario}: Deployments ${deploymentsAt.size}/${n}, statuses ${statusAt.size}/${n}, ${((now() - t0) / 1000).toFixed(1)} s`);
    }
  }
  return { t0, sentAt, createdAt };
}
