/**
 * What a reconciler is: a function from a request (the key of one primary object) and a
 * context to a result.
 *
 * Results (guarantee 4):
 * - `done()` (or returning nothing): success; the key's failure count is forgotten.
 * - `requeueAfter(ms)`: success, look again after `ms`.
 * - a thrown error: retried with the key's exponential backoff (5 ms → 1000 s).
 * - a thrown `TerminalError` (errors/terminal-error.ts): logged and counted, not retried until the
 *   object changes again.
 */
import type { Logger } from 'pino';
import type { KubeApi } from '../client/client.ts';
import type { CacheReader } from '../cache/cache.ts';
import type { EventRecorder } from '../events/recorder.ts';

export interface Request {
  namespace?: string;
  name: string;
}

export interface ReconcileContext {
  client: KubeApi;
  cache: CacheReader;
  log: Logger;
  recorder: EventRecorder;
  /** Aborted when the manager shuts down; long waits should honour it. */
  signal: AbortSignal;
}

export type ReconcileResult = { requeueAfterMs?: number } | void;

export type Reconciler = (request: Request, ctx: ReconcileContext) => Promise<ReconcileResult>;

export const done = (): ReconcileResult => ({});
export const requeueAfter = (ms: number): ReconcileResult => ({ requeueAfterMs: ms });

export function requestKey(request: Request): string {
  return request.namespace ? `${request.namespace}/${request.name}` : request.name;
}
