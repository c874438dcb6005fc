/**
 * `steady`: after a burst of N instances, the operator is left idle for M minutes (default 5),
 * then forced to resync every IoTService (SIGHUP).
 *
 * Figures: during the idle window, operator requests per minute by verb and writes per minute
 * (must be 0); during the resync, reconciles, requests and writes (must be 0: every instance is
 * unchanged); resident memory at the start and end of the idle window and after the resync
 * (drift = end − start).
 *
 * Guarantees: the idle window starts only after the burst has settled (all Available and the
 * work queue empty), so trailing burst work is not counted as steady-state traffic; the resync
 * is complete when the operator reports at least N more reconciles and an empty, idle queue.
 */
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { log, now, sleep } from '../lib/kube.ts';
import type { OperatorProcess } from '../lib/operator.ts';
import { PhaseProbe, reconcileCount } from '../lib/probe.ts';
import { sumWhere } from '../lib/prom.ts';
import { MiB } from '../lib/proc.ts';
import { round } from '../lib/stats.ts';
import { burstPhase, closeSession, openSession, type IoTSession } from './burst.ts';

/** Waits until the operator's queue is empty and no worker is busy, twice in a row `quietMs` apart. */
export async function waitQuiet(op: OperatorProcess, timeoutMs: number, quietMs = 1000): Promise<void> {
  const deadline = now() + timeoutMs;
  let quietSince: number | undefined;
  while (now() < deadline) {
    const m = await op.metrics(['workqueue_depth', 'controller_runtime_active_workers']);
    const busy = sumWhere(m, 'workqueue_depth') + sumWhere(m, 'controller_runtime_active_workers');
    if (busy === 0) {
      quietSince ??= now();
      if (now() - quietSince >= quietMs) return;
    } else quietSince = undefined;
    await sleep(100);
  }
  throw new Error(`the operator's work queue did not drain within ${timeoutMs / 1000} s`);
}

/** Idle M minutes on a settled landscape of N instances, then a forced resync (SIGHUP). */
export async function steadyPhase(ctx: BenchContext, s: IoTSession, n: number, m: number): Promise<Record<string, unknown>> {
  await waitQuiet(s.operator, 120_000);
  const op = s.operator;

  op.sampler.sample();
  const rssStart = op.sampler.lastRssBytes ?? 0;
  const idle = await PhaseProbe.begin(ctx.client, ctx.clusterDir, op);
  const idleMs = m * 60_000;
  const t0 = now();
  log(`steady: idle for ${m} min`);
  while (now() - t0 < idleMs) {
    await sleep(Math.min(30_000, idleMs - (now() - t0)));
    op.sampler.sample();
    log(`steady: idle ${((now() - t0) / 60_000).toFixed(1)}/${m} min, RSS ${((op.sampler.lastRssBytes ?? 0) / MiB).toFixed(1)} MiB`);
  }
  const idleFigures = await idle.end();
  const rssEnd = op.sampler.lastRssBytes ?? 0;
  const minutes = idleFigures.durationS / 60;
  const ir = idleFigures.operator!.requests;

  const resync = await PhaseProbe.begin(ctx.client, ctx.clusterDir, op);
  const before = reconcileCount(resync.operatorBefore ?? []);
  log('steady: SIGHUP (resync every IoTService)');
  const tResync = now();
  op.signal('SIGHUP');
  const deadline = now() + ctx.options.timeoutS * 1000;
  for (;;) {
    const count = reconcileCount(await op.metrics(['controller_runtime_reconcile_total']));
    if (count - before >= n) break;
    if (now() > deadline) throw new Error(`resync: only ${count - before} of ${n} reconciles after ${ctx.options.timeoutS} s`);
    await sleep(50);
  }
  const reconciledAt = now();
  await waitQuiet(op, 120_000);
  const resyncFigures = await resync.end();
  const rssAfter = op.sampler.lastRssBytes ?? 0;
  const rr = resyncFigures.operator!.requests;
  return {
    idleMinutes: round(minutes, 2),
    idle: {
      writesPerMin: round(ir.writes / minutes, 2),
      requestsPerMin: round(ir.total / minutes, 2),
      requestsByVerb: ir.byVerb,
      reconciles: idleFigures.operator!.reconciles,
      cpuS: idleFigures.operator!.cpuS,
      apiserverRequestsPerMin: idleFigures.apiserver ? round(idleFigures.apiserver.total / minutes, 1) : undefined,
    },
    resync: {
      reconciles: resyncFigures.operator!.reconciles,
      allReconciledS: round((reconciledAt - tResync) / 1000),
      writes: rr.writes,
      requests: rr.total,
      requestsByVerb: rr.byVerb,
      cpuS: resyncFigures.operator!.cpuS,
    },
    rss: {
      idleStartMiB: round(rssStart / MiB, 1),
      idleEndMiB: round(rssEnd / MiB, 1),
      afterResyncMiB: round(rssAfter / MiB, 1),
      driftMiB: round((rssEnd - rssStart) / MiB, 1),
      peakMiB: round(op.sampler.peakRssBytes / MiB, 1),
    },
  };
}

export async function runSteady(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n, m } = ctx.options;
  const s = await openSession(ctx, 'st');
  try {
    const burst = await burstPhase(ctx, s, n, 'steady/burst');
    const steady = await steadyPhase(ctx, s, n, m);
    return {
      figures: { n, ...steady, burst: { wallS: burst.figures.wallS, available: burst.figures.available } },
      samples: { burstAvailableS: burst.availableS },
      operatorCommand: s.command,
    };
  } finally {
    await closeSession(ctx, s);
  }
}
