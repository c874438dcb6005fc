/**
 * When an IoTService's status is written: what the operator last wrote per instance, and how
 * often rollout progress may be written.
 *
 * Guarantees:
 * - A status equal to the instance's current one is never written. "Current" is the cached
 *   status, except while the cached object is still the version a write of ours was based on
 *   (the watch event of that write has not arrived yet): then it is the status we wrote, so a
 *   reconcile racing its own write does not repeat it.
 * - A change of phase, observedGeneration or reason is written at once.
 * - Progress within one rollout (the instance Processing before and after, same generation:
 *   pods, ready counts, messages) is written at most once per `progressIntervalMs` per instance;
 *   a skipped state is not lost: the caller is told when to look again and writes the state as it
 *   then is. A user watching sees progress every few seconds instead of on every pod transition,
 *   which spares the API server most status writes of a rollout.
 */
import type { IoTServiceStatus } from '../api/iotservice.ts';
import { statusEqual } from './status.ts';

/** Least time between two progress writes of one instance while it stays Processing. */
export const PROGRESS_INTERVAL_MS = 5_000;

export interface CachedInstance {
  metadata: { resourceVersion?: string };
  status?: IoTServiceStatus;
}

export type StatusDecision =
  /** Write `next`; `current` is what the object holds now (for removing absent fields). */
  | { write: true; current: IoTServiceStatus | undefined }
  /** Nothing to write now; when `retryAfterMs` is set, look again then. */
  | { write: false; current: IoTServiceStatus | undefined; retryAfterMs?: number };

interface LastWrite {
  /** resourceVersion of the object the write was computed from. */
  basedOn: string | undefined;
  status: IoTServiceStatus;
  at: number;
}

export class StatusWrites {
  private readonly last = new Map<string, LastWrite>();

  constructor(
    private readonly progressIntervalMs = PROGRESS_INTERVAL_MS,
    private readonly clock: () => number = Date.now,
  ) {}

  decide(key: string, cached: CachedInstance, next: IoTServiceStatus): StatusDecision {
    const last = this.last.get(key);
    const current = last && last.basedOn === cached.metadata.resourceVersion ? last.status : cached.status;
    if (statusEqual(current, next)) return { write: false, current };
    if (last && isProgressOnly(current, next)) {
      const waitMs = last.at + this.progressIntervalMs - this.clock();
      if (waitMs > 0) return { write: false, current, retryAfterMs: waitMs };
    }
    return { write: true, current };
  }

  /** Records a successful write of `status`, computed from the object at `basedOn`. */
  written(key: string, basedOn: string | undefined, status: IoTServiceStatus): void {
    this.last.set(key, { basedOn, status, at: this.clock() });
  }

  forget(key: string): void {
    this.last.delete(key);
  }
}

function isProgressOnly(current: IoTServiceStatus | undefined, next: IoTServiceStatus): boolean {
  return current?.phase === 'Processing' && next.phase === 'Processing' && current.observedGeneration === next.observedGeneration && current.reason === next.reason;
}
