/**
 * `burst`: N IoTServices (default 100, default spec) created at once on a running, idle
 * operator; measured until every one is Available.
 *
 * Figures: wall time from the first create to the last Available; per-instance time from its
 * create request to Available (p50/p95/p99); the operator's API requests by verb and code, its
 * reconciles, CPU seconds and peak RSS; the API server's requests by verb; CPU seconds of every
 * control-plane component. Unless `--no-floor`, the operator-free floor is measured first in the
 * same run and `ratioWallToFloor` compares the two. With `--companion-cmd`, a second process runs
 * beside the operator from the session's start (the operator's environment, appended flags and
 * memory limit; caches synced before the clock starts) and its requests, CPU and peak RSS over the
 * burst are `companion`.
 *
 * Guarantees: the operator has synced its caches (/readyz 200) before the clock starts, so
 * start-up is not counted; the landscape is torn down after the phase so the next run starts
 * clean: on the runner's own bench cluster by recreating it (lib/recreate.ts), elsewhere through
 * the API (instances deleted through the operator, namespaces waited for).
 */
import type { KubeObject } from '@iot-operator/runtime';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { AvailabilityTracker, IOT_DEFAULT_COMMAND, createInstances, instanceName, startIoTOperator, teardownLandscape } from '../lib/iot.ts';
import { createLandscape, log, now, uniqueName } from '../lib/kube.ts';
import type { OperatorProcess } from '../lib/operator.ts';
import { PhaseProbe, type PhaseFigures } from '../lib/probe.ts';
import { round, summarize } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';
import { recreatableShape, recreateBenchCluster, type ClusterShape } from '../lib/recreate.ts';
import { floorBurst } from './floor.ts';
import path from 'node:path';

export interface IoTSession {
  landscape: string;
  pullSecret: KubeObject;
  operator: OperatorProcess;
  command: string;
  /** Seconds from spawning the operator to /readyz 200. */
  startToReadyS: number;
  /** `--companion-cmd`'s process, running beside the operator. */
  companion?: OperatorProcess;
}

/** A fresh landscape with a started, cache-synced IoT operator. */
export async function openSession(ctx: BenchContext, prefix: string): Promise<IoTSession> {
  const landscape = uniqueName(prefix);
  const pullSecret = await createLandscape(ctx.client, landscape);
  const command = ctx.options.operatorCmd ?? IOT_DEFAULT_COMMAND;
  const start = (command: string, role: string) =>
    startIoTOperator({
      command,
      kubeconfig: ctx.kubeconfig,
      landscape,
      workers: ctx.options.workers,
      memoryLimitMiB: ctx.options.memoryLimitMiB,
      logFile: path.join(ctx.logDir, `${role}-${landscape}.log`),
    });
  const operator = await start(command, 'operator');
  const readyAt = await operator.waitReady();
  log(`operator pid ${operator.pid} ready for landscape ${landscape} in ${((readyAt - operator.startedAt) / 1000).toFixed(2)} s (log ${operator.logFile})`);
  const session: IoTSession = { landscape, pullSecret, operator, command, startToReadyS: round((readyAt - operator.startedAt) / 1000) };
  if (ctx.options.companionCmd) {
    session.companion = await start(ctx.options.companionCmd, 'companion');
    await session.companion.waitReady();
    log(`companion pid ${session.companion.pid} ready (log ${session.companion.logFile})`);
  }
  return session;
}

export async function closeSession(ctx: BenchContext, s: IoTSession): Promise<void> {
  await s.companion?.stop();
  await teardownLandscape(ctx.client, s.landscape, s.operator, ctx.options.timeoutS * 1000);
}

/**
 * Ends a session on a cluster of `shape` (`recreatableShape`): the operator is stopped and the
 * cluster made again, seconds where deleting the landscape through the API waits for the namespace
 * controller (≈ 4 min at N = 500). Without a shape, as `closeSession`.
 */
export async function endSession(ctx: BenchContext, s: IoTSession, shape: ClusterShape | undefined): Promise<void> {
  if (!shape) return closeSession(ctx, s);
  await Promise.all([s.operator.stop(), s.companion?.stop()]);
  await recreateBenchCluster(ctx, shape, `landscape ${s.landscape}`);
}

export interface BurstPhase {
  figures: Record<string, unknown>;
  availableS: number[];
  phase: PhaseFigures;
}

/** Creates N instances at once on the session's operator and waits until all are Available. */
export async function burstPhase(ctx: BenchContext, s: IoTSession, n: number, label = 'burst'): Promise<BurstPhase> {
  const tracker = new AvailabilityTracker(ctx.client, s.landscape);
  await tracker.start();
  try {
    const names = Array.from({ length: n }, (_, i) => instanceName(i));
    for (const name of names) tracker.expect(name, 1);
    const probe = await PhaseProbe.begin(ctx.client, ctx.clusterDir, s.operator, s.companion);
    log(`${label}: creating ${n} IoTServices`);
    const t0 = now();
    const sentAt = await createInstances(ctx.client, s.landscape, names);
    const createdAt = now();
    await tracker.waitAll(label, n, t0, ctx.options.timeoutS * 1000);
    const last = Math.max(...tracker.availableAt.values());
    const phase = await probe.end(last);
    const availableS = names.map((name) => round((tracker.availableAt.get(name)! - sentAt.get(name)!) / 1000));
    const a = summarize(availableS);
    const { operatorAfter: _omit, ...phaseFigures } = phase;
    return {
      availableS,
      phase: phaseFigures,
      figures: {
        n,
        wallS: round((last - t0) / 1000),
        createsS: round((createdAt - t0) / 1000),
        available: { p50S: round(a.p50), p95S: round(a.p95), p99S: round(a.p99), maxS: round(a.max) },
        operatorStartToReadyS: s.startToReadyS,
        ...phaseFigures,
        ...(phase.companion && { companion: { command: ctx.options.companionCmd, ...phase.companion } }),
      },
    };
  } finally {
    await tracker.stop();
  }
}

export async function runBurst(ctx: BenchContext): Promise<ScenarioOutput> {
  const n = ctx.options.n;
  const shape = await recreatableShape(ctx);
  const floor = ctx.options.floor ? await floorBurst(ctx, n, shape !== undefined) : undefined;
  if (shape && floor?.population) await recreateBenchCluster(ctx, shape, `floor landscape ${floor.population.landscape}`);
  const s = await openSession(ctx, 'bu');
  const burst = await withTeardown(() => burstPhase(ctx, s, n), () => endSession(ctx, s, shape), log);
  const figures: Record<string, unknown> = { ...burst.figures };
  const samples: Record<string, number[]> = { availableS: burst.availableS };
  if (floor) {
    figures.floor = floor.figures;
    const floorWall = floor.figures.wallS as number;
    figures.ratioWallToFloor = round((burst.figures.wallS as number) / floorWall);
    figures.ratioWallToFloorPodsReady = round((burst.figures.wallS as number) / (floor.figures.wallPodsReadyS as number));
    samples.floorReadyS = floor.samples.readyS ?? [];
    samples.floorPodsReadyS = floor.samples.podsReadyS ?? [];
  }
  return { figures, samples, operatorCommand: s.command };
}
