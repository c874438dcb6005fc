/**
 * `memcached`: N Memcached objects (default 1000, `spec.size` 1) created at once in one
 * namespace watched by the Memcached operator.
 *
 * Done when every Memcached's Deployment (named after it) asks for `spec.size` replicas and has
 * them all rolled out and ready — a criterion any Memcached operator can be held to — and,
 * separately, when every Memcached's `status.nodes` lists `spec.size` pods (our operator's
 * status contract).
 *
 * `--go-sample <dir>` runs the controller-runtime Memcached operator of operator-sdk's samples
 * (testdata/go/v4/memcached-operator, built with `go build -o bin/manager ./cmd/main.go`) on the
 * same cluster as ours: its CRD, Memcacheds with its sample's spec (size set to the scenario's),
 * done when every Deployment is ready (its status holds conditions, no nodes); its webhook off,
 * its metrics on plain HTTP and its log at error level, as ours runs at warn.
 *
 * Figures: wall time to both criteria, per-object time (p50/p99), the operator's requests by
 * verb, its CPU seconds and peak RSS, the API server's requests by verb.
 *
 * The operator command defaults to our Memcached operator as its image runs it (the bundle, with
 * the image's V8 flags); it receives KUBECONFIG and WATCH_NAMESPACE (the benchmark namespace) by
 * environment.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
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

/** Where operator-sdk's Go sample keeps its CRD and its sample Memcached. */
const GO_SAMPLE_CRD = 'config/crd/bases/cache.example.com_memcacheds.yaml';
const GO_SAMPLE_MEMCACHED = 'config/samples/cache_v1alpha1_memcached.yaml';

/** The Go sample as its config/manager/manager.yaml runs it, less the webhook, with plain-HTTP metrics and errors-only logs. */
export function goSampleCommand(dir: string): string {
  const env = 'ENABLE_WEBHOOKS=false MEMCACHED_IMAGE=memcached:1.4.36-alpine';
  return `env ${env} ${path.join(dir, 'bin/manager')} --metrics-secure=false --zap-log-level=error --health-probe-bind-address {healthAddress} --metrics-bind-address {metricsAddress}`;
}

/** The spec of the Memcacheds created: ours is `{ size }`; the Go sample's is its sample's with that size. */
function memcachedSpec(goSample: string | undefined, size: number): Record<string, unknown> {
  if (!goSample) return { size };
  const sample = parseYaml(readFileSync(path.join(goSample, GO_SAMPLE_MEMCACHED), 'utf8')) as { spec?: Record<string, unknown> };
  return { ...sample.spec, size };
}

export async function runMemcached(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n } = ctx.options;
  const command = ctx.options.operatorCmd ?? MEMCACHED_DEFAULT_COMMAND;
  const goSample = ctx.options.goSample;
  const { namespace, op } = await startMemcachedOperator(ctx, 'mc', 'memcached', command, goSample ? path.join(goSample, GO_SAMPLE_CRD) : MEMCACHED_CRD);
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
    const waitForStatus = !goSample;
    const spec = memcachedSpec(goSample, SIZE);
    const { t0, sentAt, createdAt } = await createMemcachedsAndWait(ctx, 'memcached', namespace, names, spec, deploymentsAt, waitForStatus ? statusAt : undefined);
    const lastDeployment = Math.max(...deploymentsAt.values());
    const lastStatus = waitForStatus ? Math.max(...statusAt.values()) : lastDeployment;
    const phase = await probe.end(Math.max(lastDeployment, lastStatus));
    const perDeployment = names.map((name) => round((deploymentsAt.get(name)! - sentAt.get(name)!) / 1000));
    const perStatus = waitForStatus ? names.map((name) => round((statusAt.get(name)! - sentAt.get(name)!) / 1000)) : undefined;
    const d = summarize(perDeployment);
    const st = perStatus && summarize(perStatus);
    const { operatorAfter: _omit, ...figures } = phase;
    return {
      figures: {
        n,
        wallS: round((lastDeployment - t0) / 1000),
        ...(st && { wallStatusS: round((lastStatus - t0) / 1000) }),
        createsS: round((createdAt - t0) / 1000),
        deploymentReady: { p50S: round(d.p50), p99S: round(d.p99) },
        ...(st && { statusFilled: { p50S: round(st.p50), p99S: round(st.p99) } }),
        ...figures,
      },
      samples: { deploymentReadyS: perDeployment, ...(perStatus && { statusFilledS: perStatus }) },
      operatorCommand: command,
    };
  } finally {
    abort.abort();
    await stopMemcachedOperator(ctx, 'memcached', namespace, op);
  }
}

/**
 * Installs the Memcached CRD (`crd`, relative to the repository or absolute), creates a namespace
 * named after `prefix` and starts the operator command watching it (its log in the run's log
 * directory, named after `scenario`).
 */
export async function startMemcachedOperator(ctx: BenchContext, prefix: string, scenario: string, command: string, crd = MEMCACHED_CRD): Promise<{ namespace: string; op: OperatorProcess }> {
  if (!existsSync(path.resolve(repoRoot, crd))) throw new Error(`the Memcached CRD ${crd} is not there`);
  await installCrd(ctx.kubeconfig, ctx.client, crd);
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

/**
 * Deletes the operator's namespace (waiting for it to go, logging how long that took), then stops
 * the operator: an operator that puts finalizers on its Memcacheds (the Go sample does) removes
 * them as they are deleted.
 */
export async function stopMemcachedOperator(ctx: BenchContext, scenario: string, namespace: string, op: OperatorProcess): Promise<void> {
  const t = now();
  try {
    await deleteNamespaceAndWait(ctx.client, namespace, ctx.options.timeoutS * 1000);
    log(`${scenario} namespace ${namespace} removed (${((now() - t) / 1000).toFixed(0)} s)`);
  } finally {
    await op.stop();
  }
}

/**
 * Creates the named Memcacheds (with `spec`, 200 creates in flight) and waits until every
 * name is in `deploymentsAt` and, when given, `statusAt` (filled by the caller's watches), logging
 * progress every 5 s; fails after the run's timeout. Returns when the first create was sent,
 * each name's send time and when the last create had been sent.
 */
export async function createMemcachedsAndWait(
  ctx: BenchContext,
  scenario: string,
  namespace: string,
  names: readonly string[],
  spec: Record<string, unknown>,
  deploymentsAt: ReadonlyMap<string, number>,
  statusAt: ReadonlyMap<string, number> | undefined,
): Promise<{ t0: number; sentAt: Map<string, number>; createdAt: number }> {
  const n = names.length;
  const t0 = now();
  const sentAt = new Map<string, number>();
  await mapLimit(names, 200, async (name) => {
    sentAt.set(name, now());
    await ctx.client.create(MemcachedType, { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name, namespace }, spec });
  });
  const createdAt = now();
  const deadline = now() + ctx.options.timeoutS * 1000;
  let lastPrint = now();
  const statuses = () => (statusAt ? `, statuses ${statusAt.size}/${n}` : '');
  while (deploymentsAt.size < n || (statusAt && statusAt.size < n)) {
    if (now() > deadline) throw new Error(`${scenario}: ${deploymentsAt.size}/${n} Deployments${statuses()} after ${ctx.options.timeoutS} s`);
    await new Promise((r) => setTimeout(r, 100));
    if (now() - lastPrint > 5000) {
      lastPrint = now();
      log(`${scenario}: Deployments ${deploymentsAt.size}/${n}${statuses()}, ${((now() - t0) / 1000).toFixed(1)} s`);
    }
  }
  return { t0, sentAt, createdAt };
}
