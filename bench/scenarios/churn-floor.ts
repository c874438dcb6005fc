/**
 * The floor of `churn`: the same N instances and the same rate of version changes, with no
 * operator. Instances are created directly (as in `floor`); a version change re-renders the
 * instance with the operator's own pure functions and server-side applies exactly the children
 * whose desired form changed (ConfigMap and workloads), as fast as the API server takes them.
 *
 * Figures: time from the change to every workload of the instance rolled out and ready on the
 * new image (the same end state `churn` waits for, minus the operator), p50/p99.
 *
 * Guarantees: the rounds, the fraction and the rule "an instance still rolling out is not
 * picked again" are those of `churn`; the landscape is deleted (and waited for) at the end, or
 * removed by the caller's `teardown`.
 */
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { CHILD_TYPES, INSTANCE_LABEL, landscapeSelector } from '@iot-operator/iot';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { instanceName } from '../lib/iot.ts';
import { InstanceTracker, createRendered, renderInstance, type RenderedInstance } from '../lib/instances.ts';
import { createLandscape, log, mapLimit, now, sleep, uniqueName, watchObjects } from '../lib/kube.ts';
import { teardownFloor, type FloorPopulation } from './floor.ts';
import { PhaseProbe } from '../lib/probe.ts';
import { workloadReady, type WorkloadLike } from '../lib/readiness.ts';
import { round, summarize } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';

const VERSIONS = ['2.4.1', '2.4.2'] as const;
const CHANGEABLE = new Set(['ConfigMap', 'Service', 'NetworkPolicy', 'StatefulSet', 'Deployment']);

function firstImage(obj: KubeObject): string {
  return (obj.spec as { template?: { spec?: { containers?: { image?: string }[] } } } | undefined)?.template?.spec?.containers?.[0]?.image ?? '';
}

/**
 * The churn floor on a landscape of its own, or on a ready floor population (`floorBurst` with
 * `keep`), which it then tears down: with `teardown` if given, else through the API (`teardownFloor`).
 */
export async function churnFloor(ctx: BenchContext, population?: FloorPopulation, teardown: (ctx: BenchContext, landscape: string) => Promise<void> = teardownFloor): Promise<ScenarioOutput> {
  const { n, m, periodS, fraction } = ctx.options;
  const landscape = population?.landscape ?? uniqueName('fc');
  const secret = population?.pullSecret ?? (await createLandscape(ctx.client, landscape));
  const rendered = new Map<string, RenderedInstance>();
  if (population) for (const r of population.rendered) rendered.set(r.id, r);
  else for (let i = 0; i < n; i++) rendered.set(instanceName(i), renderInstance(landscape, instanceName(i), secret, VERSIONS[0]));
  const setup = new InstanceTracker(ctx.client, landscape, ['workloads']);
  const abort = new AbortController();
  return withTeardown(async () => {
    if (!population) {
      await setup.start();
      for (const r of rendered.values()) setup.expect(r);
      const t0 = now();
      log(`churn floor: creating ${n} instances without an operator`);
      await mapLimit([...rendered.values()], n, (r) => createRendered(ctx.client, r));
      await setup.waitAll('churn floor/setup', ['workloads'], t0, ctx.options.timeoutS * 1000);
      await setup.stop();
    }

    // Per instance: workload key -> image and readiness, and the change being waited for.
    const workloads = new Map<string, Map<string, { image: string; ready: boolean }>>();
    const pending = new Map<string, { version: string; changedAt: number }>();
    const latencies: number[] = [];
    const check = (id: string, at: number) => {
      const want = pending.get(id);
      const seen = workloads.get(id);
      const expected = rendered.get(id)?.workloads.length ?? 5;
      if (!want || !seen || seen.size < expected) return;
      if ([...seen.values()].every((w) => w.ready && w.image.endsWith(`:${want.version}`))) {
        pending.delete(id);
        latencies.push(round((at - want.changedAt) / 1000));
      }
    };
    const onEvent = (type: string, obj: KubeObject, at: number) => {
      const id = obj.metadata.labels?.[INSTANCE_LABEL];
      if (!id || type === 'DELETED') return;
      let seen = workloads.get(id);
      if (!seen) workloads.set(id, (seen = new Map()));
      seen.set(`${obj.kind}/${obj.metadata.name}`, { image: firstImage(obj), ready: workloadReady(obj as WorkloadLike) });
      check(id, at);
    };
    for (const type of [Kinds.Deployment, Kinds.StatefulSet]) await watchObjects(ctx.client, type, { labelSelector: landscapeSelector(landscape) }, onEvent, abort.signal);

    const version = new Map([...rendered.keys()].map((id) => [id, VERSIONS[0] as string]));
    const perRound = Math.max(1, Math.round(n * fraction));
    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir);
    const start = now();
    let changes = 0;
    for (let round_ = 0; now() - start < m * 60_000; round_++) {
      const roundStart = now();
      const idle = [...rendered.keys()].filter((id) => !pending.has(id));
      const picked = idle.sort(() => Math.random() - 0.5).slice(0, perRound);
      await Promise.all(
        picked.map(async (id) => {
          const next = version.get(id) === VERSIONS[0] ? VERSIONS[1] : VERSIONS[0];
          const before = rendered.get(id)!;
          const after = renderInstance(landscape, id, secret, next);
          const changed = after.children.filter((o, i) => CHANGEABLE.has(o.kind!) && JSON.stringify(o) !== JSON.stringify(before.children[i]));
          pending.set(id, { version: next, changedAt: now() });
          await Promise.all(changed.map((o) => ctx.client.apply(CHILD_TYPES[o.kind!]!, o, { fieldManager: 'bench-floor', force: true })));
          rendered.set(id, after);
          version.set(id, next);
          changes++;
        }),
      );
      if (round_ % 6 === 5) log(`churn floor: ${((now() - start) / 1000).toFixed(0)} s, ${changes} changes, ${latencies.length} done, ${pending.size} rolling out`);
      await sleep(Math.max(0, periodS * 1000 - (now() - roundStart)));
    }
    log(`churn floor: changes stopped after ${changes}; waiting for ${pending.size} to roll out`);
    const deadline = now() + ctx.options.timeoutS * 1000;
    while (pending.size > 0) {
      if (now() > deadline) throw new Error(`churn floor: ${pending.size} changes not rolled out after ${ctx.options.timeoutS} s`);
      await sleep(200);
    }
    const phase = await probe.end();
    const l = summarize(latencies);
    return {
      figures: {
        changes,
        changeToReady: { p50S: round(l.p50), p95S: round(l.p95), p99S: round(l.p99), maxS: round(l.max) },
        controlPlaneClients: phase.controlPlaneClients,
        componentsCpuS: phase.componentsCpuS,
      },
      samples: { floorChangeToReadyS: latencies },
    };
  }, async () => {
    abort.abort();
    await setup.stop();
    await teardown(ctx, landscape);
  }, log);
}
