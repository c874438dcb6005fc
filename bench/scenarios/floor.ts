/**
 * `floor`: the physical floor the operator is measured against. The same children `burst`
 * makes the operator create (rendered with the operator's own pure functions) are created
 * directly, as fast as the API server takes them, with no operator running; then the control
 * plane (controller-manager, scheduler, kwok) brings the workloads up.
 *
 * Figures: wall time until every instance's workloads are rolled out and ready (the same end
 * state the operator calls Available, minus the operator's own status write) and until every pod
 * is Ready; per-instance time to both; and, with `--k`, the same for K instances created one at
 * a time (the per-object floor that `latency` is compared with).
 *
 * Guarantees: nothing of a floor landscape survives the phase (all its namespaces are deleted
 * and waited for), so the operator phase that may follow in the same run starts clean — unless
 * the caller keeps the population for a further floor phase, which then removes it.
 */
import { landscapeSelector } from '@iot-operator/iot';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { instanceName } from '../lib/iot.ts';
import type { KubeObject } from '@iot-operator/runtime';
import { InstanceTracker, createRendered, renderInstance, type RenderedInstance } from '../lib/instances.ts';
import { createLandscape, deleteNamespaceAndWait, deleteNamespacesBySelector, log, mapLimit, now, sleep, uniqueName } from '../lib/kube.ts';
import { PhaseProbe } from '../lib/probe.ts';
import { round, summarize } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';

const seconds = (ms: number): number => round(ms / 1000);

export async function teardownFloor(ctx: BenchContext, landscape: string): Promise<void> {
  const t0 = now();
  await deleteNamespacesBySelector(ctx.client, landscapeSelector(landscape));
  await deleteNamespaceAndWait(ctx.client, landscape);
  log(`floor landscape ${landscape} removed (${((now() - t0) / 1000).toFixed(0)} s)`);
}

/** The children of N instances created without an operator, all ready. */
export interface FloorPopulation {
  landscape: string;
  pullSecret: KubeObject;
  rendered: RenderedInstance[];
}

/**
 * The floor of a burst. The landscape is torn down at the end unless `keep` is set, in which case
 * a ready population is returned for a further floor phase (which then tears it down,
 * `teardownFloor`); a failed phase always tears down what it made.
 */
export async function floorBurst(ctx: BenchContext, n: number, keep = false): Promise<ScenarioOutput & { population?: FloorPopulation }> {
  const landscape = uniqueName('fl');
  const secret = await createLandscape(ctx.client, landscape);
  const rendered = Array.from({ length: n }, (_, i) => renderInstance(landscape, instanceName(i), secret));
  const tracker = new InstanceTracker(ctx.client, landscape, ['workloads', 'pods']);
  let kept = false;
  return withTeardown(async () => {
    await tracker.start();
    for (const r of rendered) tracker.expect(r);
    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir);
    log(`floor: creating the children of ${n} instances (${rendered.reduce((s, r) => s + r.children.length, 0)} objects) without an operator`);
    const t0 = now();
    const sentAt = new Map<string, number>();
    await mapLimit(rendered, n, async (r) => {
      sentAt.set(r.id, now());
      await createRendered(ctx.client, r);
    });
    const createdAt = now();
    await tracker.waitAll('floor', ['workloads', 'pods'], t0, ctx.options.timeoutS * 1000);
    const lastWorkloads = Math.max(...tracker.at.workloads.values());
    const lastPods = Math.max(...tracker.at.pods.values());
    const phase = await probe.end(Math.max(lastWorkloads, lastPods));
    const perWorkloads = rendered.map((r) => seconds(tracker.at.workloads.get(r.id)! - sentAt.get(r.id)!));
    const perPods = rendered.map((r) => seconds(tracker.at.pods.get(r.id)! - sentAt.get(r.id)!));
    const wl = summarize(perWorkloads);
    const pods = summarize(perPods);
    const result = {
      figures: {
        n,
        objects: rendered.reduce((s, r) => s + r.children.length, 0),
        wallS: seconds(lastWorkloads - t0),
        wallPodsReadyS: seconds(lastPods - t0),
        createsS: seconds(createdAt - t0),
        ready: { p50S: round(wl.p50), p95S: round(wl.p95), p99S: round(wl.p99), maxS: round(wl.max) },
        podsReady: { p50S: round(pods.p50), p95S: round(pods.p95), p99S: round(pods.p99), maxS: round(pods.max) },
        apiserver: phase.apiserver,
        componentsCpuS: phase.componentsCpuS,
        controlPlaneClients: phase.controlPlaneClients,
        host: phase.host,
      },
      samples: { readyS: perWorkloads, podsReadyS: perPods },
      ...(keep ? { population: { landscape, pullSecret: secret, rendered } } : {}),
    };
    kept = keep;
    return result;
  }, async () => {
    await tracker.stop();
    if (!kept) await teardownFloor(ctx, landscape);
  }, log);
}

export async function floorSequential(ctx: BenchContext, k: number): Promise<ScenarioOutput> {
  const landscape = uniqueName('fs');
  const secret = await createLandscape(ctx.client, landscape);
  const tracker = new InstanceTracker(ctx.client, landscape, ['children', 'workloads', 'pods']);
  return withTeardown(async () => {
    await tracker.start();
    const created: number[] = [];
    const ready: number[] = [];
    const podsReady: number[] = [];
    for (let i = 0; i < k; i++) {
      const r = renderInstance(landscape, instanceName(i), secret);
      tracker.expect(r);
      const t = now();
      await createRendered(ctx.client, r);
      created.push(seconds(now() - t));
      const deadline = now() + ctx.options.timeoutS * 1000;
      while (!(tracker.at.workloads.has(r.id) && tracker.at.pods.has(r.id))) {
        if (now() > deadline) throw new Error(`floor sequential: instance ${r.id} not ready after ${ctx.options.timeoutS} s`);
        await sleep(20);
      }
      ready.push(seconds(tracker.at.workloads.get(r.id)! - t));
      podsReady.push(seconds(tracker.at.pods.get(r.id)! - t));
      if ((i + 1) % 5 === 0 || i + 1 === k) log(`floor sequential: ${i + 1}/${k}, last ready in ${ready.at(-1)} s`);
      await sleep(500);
    }
    const s = summarize(ready);
    const p = summarize(podsReady);
    const c = summarize(created);
    return {
      figures: {
        k,
        createdP50S: round(c.p50),
        createdP99S: round(c.p99),
        readyP50S: round(s.p50),
        readyP99S: round(s.p99),
        podsReadyP50S: round(p.p50),
        podsReadyP99S: round(p.p99),
      },
      samples: { seqCreatedS: created, seqReadyS: ready, seqPodsReadyS: podsReady },
    };
  }, async () => {
    await tracker.stop();
    await teardownFloor(ctx, landscape);
  }, log);
}

export async function runFloor(ctx: BenchContext): Promise<ScenarioOutput> {
  const burst = await floorBurst(ctx, ctx.options.n);
  if (ctx.options.k <= 0) return burst;
  const seq = await floorSequential(ctx, ctx.options.k);
  return { figures: { ...burst.figures, sequential: seq.figures }, samples: { ...burst.samples, ...seq.samples } };
}
