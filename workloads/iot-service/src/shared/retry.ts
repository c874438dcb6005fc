/**
 * Retrying an operation that waits for a dependency (the database, the broker).
 *
 * Guarantees: `retry` calls `attempt` until it resolves and returns its value; after each failure
 * it calls `onFailure` and waits `delayMs(n)` (n = failures so far; default 0.2 s doubling up to
 * 5 s); once `signal` aborts it makes no further attempt and rejects with the signal's reason.
 * An error `onFailure` throws ends it at once with that error (a failure not worth retrying).
 */

import { setTimeout as sleep } from 'node:timers/promises';

export function backoff(failures: number): number {
  return Math.min(200 * 2 ** (failures - 1), 5_000);
}

export async function retry<T>(
  attempt: () => Promise<T>,
  options: { signal: AbortSignal; onFailure: (error: unknown, failures: number) => void; delayMs?: (failures: number) => number },
): Promise<T> {
  const delayMs = options.delayMs ?? backoff;
  for (let failures = 1; ; failures++) {
    options.signal.throwIfAborted();
    try {
      return await attempt();
    } catch (error) {
      options.signal.throwIfAborted();
      options.onFailure(error, failures);
      await sleep(delayMs(failures), undefined, { signal: options.signal }).catch(() => options.signal.throwIfAborted());
    }
  }
}
