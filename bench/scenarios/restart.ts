/**
 * `restart`: with N instances Available (default 100) and the operator idle, the operator is
 * killed with SIGKILL and started again with the same command.
 *
 * Figures: time from the restart to caches synced (/readyz 200), both from the kill and from
 * the new process's spawn; time until it has verified every instance (at least N reconciles of
 * the IoTService controller in `controller_runtime_reconcile_total`) and until its work queues are
 * empty and its workers idle (every follow-up read done); the writes it made (must be 0: nothing changed while it
 * was down) and its requests by verb, counted over its first `settle` seconds (default: until
 * verified plus 5 s); its CPU seconds and peak RSS over that time.
 *
 * Guarantees: the new process's counters start at zero, so every request it makes is counted;
 * the /readyz and /metrics polls (every 20 ms and 100 ms) bound the measurement error.
 */
import path from 'node:path';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { startIoTOperator } from '../lib/iot.ts';
import { log, now, sleep } from '../lib/kube.ts';
import { operatorRequestFigures, reconcileCount } from '../lib/probe.ts';
import { sumWhere } from '../lib/prom.ts';
import { MiB } from '../lib/proc.ts';
import { round } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';
import { burstPhase, closeSession, openSession, type IoTSession } from './burst.ts';
import { waitQuiet } from './steady.ts';

/**
 * Kills the session's idle operator with SIGKILL and starts it again with the same command (the
 * session then holds the new process); measured until it has verified every instance.
 */
/** The IoT operator's controller of IoTServices (its other controller looks after namespaces). */
const PRIMARY_CONTROLLER = 'iotservice';

export async function restartPhase(ctx: BenchContext, s: IoTSession, n: number): Promise<Record<string, unknown>> {
  await waitQuiet(s.operator, 120_000);
  await sleep(2000);
  log(`restart: kill -9 operator pid ${s.operator.pid}`);
  const tKill = now();
  await s.operator.kill9();
  const op = await startIoTOperator({
    command: s.command,
    kubeconfig: ctx.kubeconfig,
    landscape: s.landscape,
    workers: ctx.options.workers,
    memoryLimitMiB: ctx.options.memoryLimitMiB,
    logFile: path.join(ctx.logDir, `operator-${s.landscape}-restarted.log`),
  });
  s.operator = op;
  const readyAt = await op.waitReady(ctx.options.timeoutS * 1000, 20);
  log(`restart: ready after ${((readyAt - tKill) / 1000).toFixed(2)} s`);
  const deadline = now() + ctx.options.timeoutS * 1000;
  let verifiedAt: number;
  for (;;) {
    const count = sumWhere(await op.metrics(['controller_runtime_reconcile_total']), 'controller_runtime_reconcile_total', { controller: PRIMARY_CONTROLLER });
    if (count >= n) {
      verifiedAt = now();
      break;
    }
    if (now() > deadline) throw new Error(`restart: only ${count} of ${n} reconciles after ${ctx.options.timeoutS} s`);
    await sleep(100);
  }
  const quietMs = 1000;
  await waitQuiet(op, 120_000, quietMs);
  const quietAt = now() - quietMs;
  await sleep(5000);
  const after = await op.metrics(['rest_client_requests_total', 'controller_runtime_reconcile_total']);
  op.sampler.sample();
  const requests = operatorRequestFigures([], after);
  const settleS = (now() - op.startedAt) / 1000;
  return {
    killToReadyS: round((readyAt - tKill) / 1000),
    startToReadyS: round((readyAt - op.startedAt) / 1000),
    killToVerifiedS: round((verifiedAt - tKill) / 1000),
    readyToVerifiedS: round((verifiedAt - readyAt) / 1000),
    killToQuietS: round((quietAt - tKill) / 1000),
    writes: requests.writes,
    requests: requests.total,
    requestsByVerbCode: requests.byVerbCode,
    reconciles: reconcileCount(after),
    settleS: round(settleS, 1),
    cpuS: round(op.sampler.lastCpuS ?? 0, 2),
    peakRssMiB: round(op.sampler.peakRssBytes / MiB, 1),
  };
}

export async function runRestart(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n } = ctx.options;
  const s = await openSession(ctx, 're');
  return withTeardown(async () => {
    const burst = await burstPhase(ctx, s, n, 'restart/burst');
    const restart = await restartPhase(ctx, s, n);
    return {
      figures: { n, ...restart, burst: { wallS: burst.figures.wallS, available: burst.figures.available } },
      samples: { burstAvailableS: burst.availableS },
      operatorCommand: s.command,
    };
  }, () => closeSession(ctx, s), log);
}
