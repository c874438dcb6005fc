/**
 * How a component ends: SIGTERM (or SIGINT) → readiness off, then an orderly stop, then exit.
 *
 * Guarantees: on the first signal `stop` runs once; the process exits 0 when it completes and 1
 * when it fails or takes longer than `graceMs` (default 20 s, inside Kubernetes' default 30 s
 * termination grace period), each outcome logged as one line; a second signal changes nothing.
 * `startComponent` logs a line with the component's version, runs `start`, logs `started`, and
 * exits 1 with the error logged when starting fails. `leaveEndpoints` waits ENDPOINT_DRAIN_MS:
 * what a component serving behind a Service does after it turned unready and before it closes its
 * listeners.
 */

import { setTimeout as sleep } from 'node:timers/promises';

import type { Logger } from './log.ts';

export const DEFAULT_GRACE_MS = 20_000;

/**
 * How long a stopping pod keeps serving behind its Service: a deleted pod leaves the Service's
 * endpoints only when kube-proxy next syncs, after its SIGTERM (0.7–0.9 s on the local cluster,
 * more on a loaded one). A new connection routed to it meanwhile would be refused while it lives
 * and, once it exited and its address is gone, go unanswered until the client gives up (a lost
 * device request: bench/analysis.md, issue 54). Outside Kubernetes (no KUBERNETES_SERVICE_HOST,
 * which the kubelet sets in every container) there is no Service to leave.
 */
export const ENDPOINT_DRAIN_MS = process.env.KUBERNETES_SERVICE_HOST ? 5_000 : 0;

/** Waits until kube-proxy no longer sends this pod new connections (ENDPOINT_DRAIN_MS). */
export async function leaveEndpoints(): Promise<void> {
  await sleep(ENDPOINT_DRAIN_MS);
}

export interface Running {
  /** Stops serving and releases connections; resolves when done. */
  stop(): Promise<void>;
}

export function stopOnSignal(log: Logger, running: Running, graceMs = DEFAULT_GRACE_MS): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info('stopping', { signal, graceMs });
    const deadline = setTimeout(() => {
      log.error('stop did not complete within the grace period; exiting', { graceMs });
      process.exit(1);
    }, graceMs);
    deadline.unref();
    running.stop().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        log.error('stop failed', { error });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

export async function startComponent(log: Logger, version: string, start: () => Promise<Running>): Promise<void> {
  log.info('starting', { version, pid: process.pid, node: process.version });
  try {
    const running = await start();
    // The signal handlers first: a SIGTERM sent by whoever reads `started` must find them.
    stopOnSignal(log, running);
    log.info('started', { version });
  } catch (error) {
    log.error('start failed', { error, version });
    process.exit(1);
  }
}
