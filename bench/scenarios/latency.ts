/**
 * `latency`: K instances (default 30), one at a time, on an otherwise idle operator; each is
 * created only after the previous one is Available.
 *
 * Figures: create → all children exist and create → Available, p50/p99. Unless `--no-floor`,
 * the same K instances are first created without the operator in the same run (children
 * created directly, then waited for until their workloads are ready) and `availableP99MinusFloorS`
 * is the difference of the two p99s (the target: within 1 s).
 *
 * Guarantees: children are recognised by the landscape label selector and the exact set the
 * operator's own `desiredChildren` lists (15 objects), seen through watches; "Available" is the
 * IoTService's status for its current generation.
 */
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { AvailabilityTracker, instanceName, iotService, IoTServiceV1alpha1Type } from '../lib/iot.ts';
import { InstanceTracker, renderInstance } from '../lib/instances.ts';
import { log, now, sleep } from '../lib/kube.ts';
import { PhaseProbe } from '../lib/probe.ts';
import { round, summarize } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';
import { closeSession, openSession } from './burst.ts';
import { floorSequential } from './floor.ts';

export async function runLatency(ctx: BenchContext): Promise<ScenarioOutput> {
  const { k } = ctx.options;
  const floor = ctx.options.floor ? await floorSequential(ctx, k) : undefined;
  const s = await openSession(ctx, 'la');
  const available = new AvailabilityTracker(ctx.client, s.landscape);
  const children = new InstanceTracker(ctx.client, s.landscape, ['children']);
  return withTeardown(async () => {
    await Promise.all([available.start(), children.start()]);
    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir, s.operator);
    const childrenS: number[] = [];
    const availableS: number[] = [];
    for (let i = 0; i < k; i++) {
      const name = instanceName(i);
      children.expect(renderInstance(s.landscape, name, s.pullSecret));
      available.expect(name, 1);
      const t = now();
      await ctx.client.create(IoTServiceV1alpha1Type, iotService(name, s.landscape));
      const deadline = now() + ctx.options.timeoutS * 1000;
      while (!available.availableAt.has(name) || !children.at.children.has(name)) {
        if (now() > deadline) throw new Error(`latency: ${name} not Available (or children missing) after ${ctx.options.timeoutS} s`);
        await sleep(10);
      }
      childrenS.push(round((children.at.children.get(name)! - t) / 1000));
      availableS.push(round((available.availableAt.get(name)! - t) / 1000));
      if ((i + 1) % 5 === 0 || i + 1 === k) log(`latency: ${i + 1}/${k}, last Available in ${availableS.at(-1)} s`);
      await sleep(500);
    }
    const phase = await probe.end();
    const c = summarize(childrenS);
    const a = summarize(availableS);
    const figures: Record<string, unknown> = {
      k,
      childrenExistP50S: round(c.p50),
      childrenExistP99S: round(c.p99),
      availableP50S: round(a.p50),
      availableP99S: round(a.p99),
      availableMaxS: round(a.max),
      operator: phase.operator && { requests: phase.operator.requests, reconciles: phase.operator.reconciles, cpuS: phase.operator.cpuS, peakRssMiB: phase.operator.peakRssMiB },
      reconcilesPerInstance: phase.operator ? round(phase.operator.reconciles / k, 1) : undefined,
      requestsPerInstance: phase.operator ? round(phase.operator.requests.total / k, 1) : undefined,
    };
    const samples: Record<string, number[]> = { childrenExistS: childrenS, availableS };
    if (floor) {
      figures.floor = floor.figures;
      figures.availableP99MinusFloorS = round(a.p99 - (floor.figures.readyP99S as number));
      figures.availableP50MinusFloorS = round(a.p50 - (floor.figures.readyP50S as number));
      Object.assign(samples, floor.samples);
    }
    return { figures, samples, operatorCommand: s.command };
  }, async () => {
    await Promise.all([available.stop(), children.stop()]);
    await closeSession(ctx, s);
  }, log);
}
