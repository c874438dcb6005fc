/**
 * `scale`: one IoT operator and N full instances (default 1,000) through every phase a tenant
 * landscape lives through, in one run, so that a landscape of thousands is built once per side:
 *
 * 1. floor: the children of N instances created directly (no operator) until ready — the burst
 *    floor — then the churn floor on that same population, then it is torn down;
 * 2. burst: N IoTServices at once on an idle, cache-synced operator, until all are Available;
 * 3. steady: M idle minutes (writes and requests per minute, RSS at the end), then a forced resync;
 * 4. churn: M minutes of `spec.version` changes, `--fraction` of the instances every `--period`
 *    (default 1 %: at N = 1,000 the ten changes per round that `churn` makes at N = 100, so the
 *    control plane rolls pods at the same rate and the operator's share is what grows);
 * 5. restart: `kill -9` and the same command again, until every instance has been re-checked.
 *
 * Figures: each phase's own figures (as the scenarios of the same name report them) and the
 * costs per instance (`perInstance`) that the growth table of docs/scale.md compares across N.
 *
 * Guarantees: each operator phase starts only when the previous one has settled (queue empty);
 * the ratios compare phases of the same run; the landscape is torn down at the end, failed or not.
 * Teardowns are not measured. On the runner's own bench cluster each one (the floor's, the
 * landscape's at the end) stops what uses the cluster (the operator with SIGTERM) and recreates
 * the cluster with the same shape (lib/recreate.ts): seconds, where deleting 1,000 instance
 * namespaces through the API takes ≈10 minutes. On a cluster given with --kubeconfig everything
 * is deleted through the API, the instances through the operator, as the other scenarios do.
 */
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { log } from '../lib/kube.ts';
import { recreatableShape, recreateBenchCluster } from '../lib/recreate.ts';
import { round } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';
import { burstPhase, endSession, openSession } from './burst.ts';
import { churnFloor } from './churn-floor.ts';
import { churnPhase } from './churn.ts';
import { floorBurst } from './floor.ts';
import { restartPhase } from './restart.ts';
import { steadyPhase } from './steady.ts';

/** What the operator spent per instance in a burst: the figures that show linear (or worse) growth. */
export interface PerInstanceCost {
  requests: number;
  writes: number;
  reconciles: number;
  cpuMs: number;
}

export function perInstanceCost(n: number, operator: { requests: { total: number; writes: number }; reconciles: number; cpuS: number }): PerInstanceCost {
  if (n <= 0) throw new Error(`per-instance cost needs N > 0, got ${n}`);
  return {
    requests: round(operator.requests.total / n, 2),
    writes: round(operator.requests.writes / n, 2),
    reconciles: round(operator.reconciles / n, 2),
    cpuMs: round((operator.cpuS * 1000) / n, 2),
  };
}

export async function runScale(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n, m } = ctx.options;
  const shape = await recreatableShape(ctx);
  const floor = ctx.options.floor ? await floorBurst(ctx, n, true) : undefined;
  const floorTeardown = shape && ((c: BenchContext, landscape: string) => recreateBenchCluster(c, shape, `floor landscape ${landscape}`));
  const churnFloorOut = floor?.population ? await churnFloor(ctx, floor.population, floorTeardown) : undefined;

  const s = await openSession(ctx, 'sc');
  return withTeardown(async () => {
    const burst = await burstPhase(ctx, s, n, 'scale/burst');
    log(`scale: burst done in ${burst.figures.wallS} s; steady for ${m} min`);
    const steady = await steadyPhase(ctx, s, n, m);
    const churn = await churnPhase(ctx, s, n);
    const restart = await restartPhase(ctx, s, n);

    const figures: Record<string, unknown> = { n, burst: burst.figures, steady, churn: churn.figures, restart };
    if (burst.phase.operator) figures.perInstance = perInstanceCost(n, burst.phase.operator);
    if (floor) {
      figures.floor = floor.figures;
      figures.ratioWallToFloor = round((burst.figures.wallS as number) / (floor.figures.wallS as number));
    }
    if (churnFloorOut) {
      figures.churnFloor = churnFloorOut.figures;
      const p99 = (churn.figures.changeToAvailable as { p99S: number }).p99S;
      const floorP99 = (churnFloorOut.figures.changeToReady as { p99S: number }).p99S;
      figures.churnP99OverFloorS = round(p99 - floorP99);
    }
    return {
      figures,
      samples: { availableS: burst.availableS, ...churn.samples, ...(floor?.samples ?? {}), ...(churnFloorOut?.samples ?? {}) },
      operatorCommand: s.command,
    };
  }, () => endSession(ctx, s, shape), log);
}
