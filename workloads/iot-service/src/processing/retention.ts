/**
 * Telemetry retention: rows older than `spec.retention` are deleted by the database in small
 * batches.
 *
 * Guarantees: `keepRetention` deletes, every `intervalMs` (default one minute) and once at start,
 * what is older than `seconds` in batches of at most `batch` rows (store.ts `deleteExpired`, one
 * short statement each) until a batch comes back short, so no statement holds locks for long and
 * a large backlog of expired rows is worked off within one round. A failed round is logged and
 * the next one tries again; a round still running when the next is due is not run twice. It stops
 * when `signal` aborts. Several processing replicas may run it at once: a row is deleted once,
 * whoever gets it.
 */

import type { Logger } from '../shared/log.ts';

export interface ExpiringStore {
  deleteExpired(seconds: number, limit: number): Promise<number>;
}

export interface RetentionOptions {
  store: ExpiringStore;
  seconds: number;
  log: Logger;
  signal: AbortSignal;
  intervalMs?: number;
  batch?: number;
}

export async function deleteExpiredRows(options: RetentionOptions): Promise<number> {
  const batch = options.batch ?? 5_000;
  let deleted = 0;
  for (;;) {
    options.signal.throwIfAborted();
    const now = await options.store.deleteExpired(options.seconds, batch);
    deleted += now;
    if (now < batch) return deleted;
  }
}

export function keepRetention(options: RetentionOptions): void {
  let running: Promise<void> | undefined;
  const round = () =>
    (running ??= deleteExpiredRows(options).then(
      (deleted) => {
        if (deleted > 0) options.log.info('expired telemetry deleted', { rows: deleted, retentionSeconds: options.seconds });
      },
      (error: unknown) => {
        if (!options.signal.aborted) options.log.warn('retention round failed; trying again at the next', { error });
      },
    ).finally(() => (running = undefined)));
  void round();
  const timer = setInterval(() => void round(), options.intervalMs ?? 60_000);
  options.signal.addEventListener('abort', () => clearInterval(timer), { once: true });
}
