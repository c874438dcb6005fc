/**
 * `armada`: N ArmadaCharts of the test chart (default 50, one release each, `target_state:
 * deployed`) created at once in one namespace watched by the Armada operator, against the floor
 * of the same N releases installed by running `helm install --wait` directly, P at a time.
 *
 * Floor first (its own namespace, removed afterwards), then the operator. P (`--workers`,
 * default 4, the operator's default number of concurrent chart reconciles) is the parallelism of
 * the floor; with `--workers` the operator gets `--max-concurrent-reconciles P` too, so both run
 * at most P Helm commands at a time. A chart is done when its status says `actual_state: deployed`,
 * `satisfied: true`; a floor release when its `helm install --wait` returned.
 *
 * Figures: wall time of both and their ratio, per-release time (p50/p99), the operator's requests
 * by verb, its own CPU seconds and peak RSS, the CPU seconds of the Helm processes it ran (its
 * reaped children) against those of the floor's, the API server's requests by verb.
 *
 * The operator command defaults to the bundle (`node operators/armada/dist/armada-operator.mjs`);
 * it receives KUBECONFIG and WATCH_NAMESPACE by environment. The charts name the test chart by
 * its absolute path, so they do not depend on the operator's chart root.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { customResource } from '@iot-operator/runtime';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { createNamespace, deleteNamespaceAndWait, installCrd, log, mapLimit, now, repoRoot, stripFinalizers, uniqueName, watchObjects } from '../lib/kube.ts';
import { bundledOperatorCommand, OperatorProcess } from '../lib/operator.ts';
import { PhaseProbe } from '../lib/probe.ts';
import { clkTck } from '../lib/proc.ts';
import { round, summarize } from '../lib/stats.ts';

const run = promisify(execFile);

export const ArmadaChartType = customResource('armada.airshipit.org', 'v1alpha1', 'ArmadaChart', 'armadacharts');
export const ARMADA_CRDS = ['armadacharts', 'armadachartgroups', 'armadamanifests'].map((p) => `operators/armada/deploy/crds/armada_v1alpha1_${p.slice(0, -1)}_crd.yml`);
export const ARMADA_DEFAULT_COMMAND = bundledOperatorCommand('armada');
/** The operator's default number of ArmadaCharts reconciled in parallel (operators/armada/src/operator.ts). */
export const ARMADA_DEFAULT_WORKERS = 4;
const TEST_CHART = path.join(repoRoot, 'operators/armada/helm-charts/testchart');
const HELM_TIMEOUT_S = 300;

/** CPU seconds of the reaped children of `pid` (cutime + cstime of /proc/<pid>/stat). */
function childrenCpuSeconds(pid: number | 'self'): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).trim().split(/\s+/);
  // After the name: field 3 (state) is index 0, so cutime (16) and cstime (17) are 13 and 14.
  return (Number(fields[13] ?? 0) + Number(fields[14] ?? 0)) / clkTck();
}

async function helmBinary(): Promise<string> {
  const { stdout } = await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000 });
  return stdout.trim().split('\n').at(-1)!;
}

/** The same N releases installed by `helm install --wait`, `workers` at a time: the floor. */
async function helmFloor(ctx: BenchContext, helm: string, names: string[], workers: number) {
  const namespace = uniqueName('armada-floor');
  await createNamespace(ctx.client, namespace);
  try {
    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir);
    const helmCpuBefore = childrenCpuSeconds('self');
    log(`armada floor: helm install --wait of ${names.length} releases, ${workers} at a time`);
    const t0 = now();
    const perRelease = await mapLimit(names, workers, async (name) => {
      const start = now();
      await run(helm, ['--kubeconfig', ctx.kubeconfig, 'install', name, TEST_CHART, '--namespace', namespace, '--wait', '--timeout', `${HELM_TIMEOUT_S}s`], { timeout: (HELM_TIMEOUT_S + 30) * 1000 });
      return round((now() - start) / 1000);
    });
    const wallS = round((now() - t0) / 1000);
    const helmCpuS = round(childrenCpuSeconds('self') - helmCpuBefore, 2);
    const { operatorAfter: _none, ...phase } = await probe.end();
    return { wallS, perRelease, helmCpuS, phase };
  } finally {
    await deleteNamespaceAndWait(ctx.client, namespace, ctx.options.timeoutS * 1000);
  }
}

export async function runArmada(ctx: BenchContext): Promise<ScenarioOutput> {
  if (!existsSync(path.join(repoRoot, 'operators/armada/src/main.ts')) || ARMADA_CRDS.some((f) => !existsSync(path.join(repoRoot, f)))) {
    throw new Error('the Armada operator (operators/armada/src/main.ts and its CRDs) is not there yet');
  }
  const { n } = ctx.options;
  const workers = ctx.options.workers ?? ARMADA_DEFAULT_WORKERS;
  for (const crd of ARMADA_CRDS) await installCrd(ctx.kubeconfig, ctx.client, crd);
  const helm = await helmBinary();
  const names = Array.from({ length: n }, (_, i) => `bench-${String(i).padStart(3, '0')}`);

  const floor = ctx.options.floor ? await helmFloor(ctx, helm, names, workers) : undefined;
  if (floor) log(`armada floor: ${floor.wallS} s for ${n} releases`);

  const namespace = uniqueName('armada');
  await createNamespace(ctx.client, namespace);
  const command = ctx.options.operatorCmd ?? `${ARMADA_DEFAULT_COMMAND}${ctx.options.workers === undefined ? '' : ` --max-concurrent-reconciles ${workers}`}`;
  const op = await OperatorProcess.start({
    command,
    env: { KUBECONFIG: ctx.kubeconfig, WATCH_NAMESPACE: namespace, HELM_BINARY: helm },
    logFile: path.join(ctx.logDir, `armada-operator-${namespace}.log`),
    memoryLimitMiB: ctx.options.memoryLimitMiB,
  });
  const abort = new AbortController();
  try {
    const readyAt = await op.waitReady();
    log(`armada operator pid ${op.pid} ready in ${((readyAt - op.startedAt) / 1000).toFixed(2)} s`);
    const wanted = new Set(names);
    const deployedAt = new Map<string, number>();
    await watchObjects(ctx.client, ArmadaChartType, { namespace }, (type, obj, at) => {
      const name = obj.metadata.name!;
      const status = (obj as { status?: { actual_state?: string; satisfied?: boolean } }).status;
      if (type !== 'DELETED' && wanted.has(name) && !deployedAt.has(name) && status?.actual_state === 'deployed' && status.satisfied === true) deployedAt.set(name, at);
    }, abort.signal);

    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir, op);
    const helmCpuBefore = childrenCpuSeconds(op.pid);
    log(`armada: creating ${n} ArmadaCharts of the test chart`);
    const t0 = now();
    const sentAt = new Map<string, number>();
    await mapLimit(names, 50, async (name) => {
      sentAt.set(name, now());
      await ctx.client.create(ArmadaChartType, {
        apiVersion: 'armada.airshipit.org/v1alpha1',
        kind: 'ArmadaChart',
        metadata: { name, namespace },
        spec: { chart_name: 'testchart', release: name, source: { type: 'local', location: TEST_CHART }, target_state: 'deployed' },
      });
    });
    const createdAt = now();
    const deadline = now() + ctx.options.timeoutS * 1000;
    let lastPrint = now();
    while (deployedAt.size < n) {
      if (now() > deadline) throw new Error(`armada: ${deployedAt.size}/${n} charts deployed after ${ctx.options.timeoutS} s`);
      await new Promise((r) => setTimeout(r, 100));
      if (now() - lastPrint > 5000) {
        lastPrint = now();
        log(`armada: charts deployed ${deployedAt.size}/${n}, ${((now() - t0) / 1000).toFixed(1)} s`);
      }
    }
    const last = Math.max(...deployedAt.values());
    const helmCpuS = round(childrenCpuSeconds(op.pid) - helmCpuBefore, 2);
    const phase = await probe.end(last);
    const perChart = names.map((name) => round((deployedAt.get(name)! - sentAt.get(name)!) / 1000));
    const c = summarize(perChart);
    const wallS = round((last - t0) / 1000);
    const { operatorAfter: _omit, ...figures } = phase;
    const f = floor ? summarize(floor.perRelease) : undefined;
    return {
      figures: {
        n,
        workers,
        wallS,
        createsS: round((createdAt - t0) / 1000),
        deployed: { p50S: round(c.p50), p99S: round(c.p99) },
        helmCpuS,
        ...figures,
        ...(floor && f
          ? {
              floor: { wallS: floor.wallS, perRelease: { p50S: round(f.p50), p99S: round(f.p99) }, helmCpuS: floor.helmCpuS, ...floor.phase },
              ratioToFloor: round(wallS / floor.wallS, 2),
            }
          : {}),
      },
      samples: { deployedS: perChart, ...(floor ? { floorInstallS: floor.perRelease } : {}) },
      operatorCommand: command,
    };
  } finally {
    abort.abort();
    await op.stop();
    // Without the operator nobody would remove the finalizers: strip them, then drop everything
    // (the releases' objects and Helm's records) with the namespace.
    await stripFinalizers(ctx.client, ArmadaChartType, namespace).catch(() => undefined);
    const t = now();
    await deleteNamespaceAndWait(ctx.client, namespace, ctx.options.timeoutS * 1000);
    log(`armada namespace ${namespace} removed (${((now() - t) / 1000).toFixed(0)} s)`);
  }
}
