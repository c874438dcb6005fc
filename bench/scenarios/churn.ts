/**
 * `churn`: N instances (default 100) are kept; every `--period` seconds (default 10) `spec.version`
 * of `--fraction` of them (default 10 %) is changed, for M minutes (default 5). An instance whose
 * previous change is still rolling out is not picked again until it is Available.
 *
 * Figures: time from the spec change (just before the PATCH is sent) to Available for the new
 * generation, p50/p99; within it, the time until the operator has applied the change (every
 * workload of the instance carries the new image: the operator's share) — the rest is the
 * control plane rolling the pods; the operator's `workqueue_queue_duration_seconds` p50/p99 over the churn
 * window (estimated from its histogram buckets, as PromQL's histogram_quantile would); requests
 * per minute and per change; operator CPU and peak RSS.
 *
 * Unless `--no-floor`, the same churn is first run without the operator (`churn-floor.ts`) in the
 * same run, and its change → workloads ready times are recorded beside the operator's.
 *
 * Guarantees: the window is measured after the initial burst has settled; changes stop after M
 * minutes and every pending change is waited for before the figures are taken.
 */
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { INSTANCE_LABEL, landscapeSelector } from '@iot-operator/iot';
import { AvailabilityTracker, IoTServiceV1alpha1Type, instanceName } from '../lib/iot.ts';
import { log, now, sleep, watchObjects } from '../lib/kube.ts';
import { PhaseProbe } from '../lib/probe.ts';
import { bucketDelta, histogramBuckets, histogramQuantile } from '../lib/prom.ts';
import { round, summarize } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';
import { burstPhase, closeSession, openSession, type IoTSession } from './burst.ts';
import { waitQuiet } from './steady.ts';
import { churnFloor } from './churn-floor.ts';

const VERSIONS = ['2.4.1', '2.4.2'] as const;

export async function runChurn(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n } = ctx.options;
  const floor = ctx.options.floor ? await churnFloor(ctx) : undefined;
  const s = await openSession(ctx, 'ch');
  return withTeardown(async () => {
    const burst = await burstPhase(ctx, s, n, 'churn/burst');
    const churn = await churnPhase(ctx, s, n);
    return {
      figures: { ...churn.figures, burst: { wallS: burst.figures.wallS, available: burst.figures.available }, ...(floor ? { floor: floor.figures } : {}) },
      samples: { ...churn.samples, burstAvailableS: burst.availableS, ...(floor?.samples ?? {}) },
      operatorCommand: s.command,
    };
  }, () => closeSession(ctx, s), log);
}

/** M minutes of version changes on a settled landscape of N instances, until every change is Available. */
export async function churnPhase(ctx: BenchContext, s: IoTSession, n: number): Promise<Omit<ScenarioOutput, 'operatorCommand'>> {
  const { m, periodS, fraction } = ctx.options;
  await waitQuiet(s.operator, 120_000);
  const names = Array.from({ length: n }, (_, i) => instanceName(i));
  const version = new Map(names.map((name) => [name, VERSIONS[0] as string]));
  const pending = new Map<string, number>();
  const latencies: number[] = [];
  const tracker = new AvailabilityTracker(ctx.client, s.landscape);
  tracker.onAvailable = (name, at) => {
    const changedAt = pending.get(name);
    if (changedAt === undefined) return;
    pending.delete(name);
    latencies.push(round((at - changedAt) / 1000));
  };
  await tracker.start();
  // The operator's share: from the change until every workload of the instance has the new image.
  const images = new Map<string, Map<string, string>>();
  const appliedWaiting = new Map<string, { version: string; changedAt: number }>();
  const appliedS: number[] = [];
  const WORKLOADS = 5;
  const checkApplied = (id: string, at: number) => {
    const waiting = appliedWaiting.get(id);
    const seen = images.get(id);
    if (!waiting || !seen || seen.size < WORKLOADS) return;
    if ([...seen.values()].every((image) => image.endsWith(`:${waiting.version}`))) {
      appliedWaiting.delete(id);
      appliedS.push(round((at - waiting.changedAt) / 1000));
    }
  };
  const workloadWatch = new AbortController();
  const onWorkload = (type: string, obj: KubeObject, at: number) => {
    const id = obj.metadata.labels?.[INSTANCE_LABEL];
    if (!id || type === 'DELETED') return;
    const image = (obj.spec as { template?: { spec?: { containers?: { image?: string }[] } } } | undefined)?.template?.spec?.containers?.[0]?.image ?? '';
    let seen = images.get(id);
    if (!seen) images.set(id, (seen = new Map()));
    seen.set(`${obj.kind}/${obj.metadata.name}`, image);
    checkApplied(id, at);
  };
  for (const type of [Kinds.Deployment, Kinds.StatefulSet]) await watchObjects(ctx.client, type, { labelSelector: landscapeSelector(s.landscape) }, onWorkload, workloadWatch.signal);
  const perRound = Math.max(1, Math.round(n * fraction));
  const queueBefore = histogramBuckets(await s.operator.metrics(['workqueue_queue_duration_seconds']), 'workqueue_queue_duration_seconds');
  const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir, s.operator);
  const t0 = now();
  let changes = 0;
  let skipped = 0;
  try {
    for (let round_ = 0; now() - t0 < m * 60_000; round_++) {
      const roundStart = now();
      const idle = names.filter((name) => !pending.has(name));
      const picked = shuffle(idle).slice(0, perRound);
      skipped += perRound - picked.length;
      await Promise.all(
        picked.map(async (name) => {
          const next = version.get(name) === VERSIONS[0] ? VERSIONS[1] : VERSIONS[0];
          const changedAt = now();
          pending.set(name, changedAt);
          appliedWaiting.set(name, { version: next, changedAt });
          const updated = await ctx.client.patch(IoTServiceV1alpha1Type, name, s.landscape, { spec: { version: next } }, 'merge');
          version.set(name, next);
          tracker.expect(name, updated.metadata.generation ?? 1);
          changes++;
        }),
      );
      if (round_ % 6 === 5) log(`churn: ${((now() - t0) / 1000).toFixed(0)} s, ${changes} changes, ${latencies.length} done, ${pending.size} rolling out`);
      await sleep(Math.max(0, periodS * 1000 - (now() - roundStart)));
    }
    log(`churn: changes stopped after ${changes}; waiting for ${pending.size} to become Available`);
    await tracker.waitAll('churn/settle', pending.size, now(), ctx.options.timeoutS * 1000);
  } finally {
    await tracker.stop();
    workloadWatch.abort();
  }
  const phase = await probe.end();
  const queue = bucketDelta(queueBefore, histogramBuckets(phase.operatorAfter ?? [], 'workqueue_queue_duration_seconds'));
  const l = summarize(latencies);
  const ap = summarize(appliedS);
  const minutes = phase.durationS / 60;
  const op = phase.operator!;
  return {
    figures: {
      n,
      minutes: round(minutes, 2),
      periodS,
      perRound,
      changes,
      skippedBusy: skipped,
      changeToAvailable: { p50S: round(l.p50), p95S: round(l.p95), p99S: round(l.p99), maxS: round(l.max) },
      changeToApplied: { p50S: round(ap.p50), p95S: round(ap.p95), p99S: round(ap.p99), maxS: round(ap.max), count: ap.count },
      queueDuration: { p50S: round(histogramQuantile(0.5, queue), 4), p99S: round(histogramQuantile(0.99, queue), 4), items: queue.get(Number.POSITIVE_INFINITY) ?? 0 },
      operator: {
        requestsPerMin: round(op.requests.total / minutes, 1),
        writesPerChange: round(op.requests.writes / Math.max(1, changes), 2),
        requestsByVerb: op.requests.byVerb,
        reconciles: op.reconciles,
        cpuS: op.cpuS,
        peakRssMiB: op.peakRssMiB,
      },
      apiserver: phase.apiserver,
      componentsCpuS: phase.componentsCpuS,
      controlPlaneClients: phase.controlPlaneClients,
      host: phase.host,
    },
    samples: { changeToAvailableS: latencies, changeToAppliedS: appliedS },
  };
}

function shuffle<T>(items: T[]): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
