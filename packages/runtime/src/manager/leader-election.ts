/**
 * Leader election on a coordination.k8s.io/v1 Lease (guarantee 6), with client-go's defaults:
 * lease duration 15 s, renew deadline 10 s, retry period 2 s.
 *
 * Guarantees:
 * - At most one holder acts at a time: a candidate takes the Lease only when it is free
 *   (no holder), released, or its holder has not renewed it for a full lease duration as
 *   observed on this candidate's own clock (never by comparing clocks across machines).
 * - Writes are guarded by the Lease's resourceVersion: two candidates racing for it cannot
 *   both win.
 * - Every Lease request runs under a deadline (the renew deadline) and is cancelled when it
 *   passes, as client-go runs each renewal under a deadline context: a request that hangs can
 *   never keep a leader alive. A leader that cannot renew within the renew deadline — counted
 *   from the start of the renewal, hung requests included — calls `onStoppedLeading` at once;
 *   so does one that finds another holder.
 * - When `run`'s signal aborts while leading, the lease is released (holderIdentity emptied, so a
 *   successor takes over without waiting for it to expire) only after the renew loop has
 *   stopped and its last request has finished or been cancelled: the loop can never take the
 *   lease back after the release.
 * - `healthCheck()` reports an error while this candidate believes it leads but has not renewed
 *   the lease for a lease duration plus 20 s (client-go's leader-election healthz adaptor), so
 *   /healthz fails when the elector is stuck.
 */
import { isConflict } from '../client/errors.ts';
import type { KubeObject } from '../client/resource.ts';

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number;
}

export interface LeaseObject extends KubeObject {
  spec?: LeaseSpec;
}

/**
 * The three Lease calls leader election needs; the real client and unit-test fakes implement it.
 * An implementation should abandon the request when `signal` aborts; the elector does not wait
 * for one that does not.
 */
export interface LeaseAccess {
  get(signal: AbortSignal): Promise<LeaseObject | undefined>;
  create(lease: LeaseObject, signal: AbortSignal): Promise<LeaseObject>;
  replace(lease: LeaseObject, signal: AbortSignal): Promise<LeaseObject>;
}

export interface ElectionClock {
  now(): number;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export interface LeaderElectionConfig {
  namespace: string;
  name: string;
  identity: string;
  /** Labels the Lease carries: set on creation and put back on every write if removed. */
  labels?: Record<string, string>;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export const leaderElectionDefaults = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

/** How long past the lease duration a leader may go without renewing before its health check fails. */
export const maxTolerableExpiredLeaseMs = 20_000;

/** How long releasing the lease on shutdown may take before it is left to expire. */
export const releaseDeadlineMs = 5_000;

export interface LeaderCallbacks {
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

const microTime = (ms: number): string => new Date(ms).toISOString().replace('Z', '000Z');

export class LeaderElector {
  private observed: { record: string; at: number } | undefined;
  private current: LeaseObject | undefined;
  private leading = false;
  private lastRenewedAt = 0;

  constructor(
    private readonly config: LeaderElectionConfig,
    private readonly access: LeaseAccess,
    private readonly clock: ElectionClock,
    private readonly onError?: (err: unknown) => void,
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /**
   * Campaigns until elected, then renews until the lease is lost (`onStoppedLeading`) or the
   * signal aborts; in the latter case, with `releaseOnCancel`, releases the lease last.
   */
  async run(signal: AbortSignal, callbacks: LeaderCallbacks, options: { releaseOnCancel?: boolean } = {}): Promise<void> {
    while (!signal.aborted && !(await this.attempt(signal))) {
      await this.clock.sleep(this.config.retryPeriodMs, signal);
    }
    if (signal.aborted) return;
    this.leading = true;
    this.lastRenewedAt = this.clock.now();
    callbacks.onStartedLeading();
    while (!signal.aborted) {
      await this.clock.sleep(this.config.retryPeriodMs, signal);
      if (signal.aborted) break;
      if (!(await this.renew(signal)) && !signal.aborted) {
        this.leading = false;
        callbacks.onStoppedLeading();
        return;
      }
    }
    if (options.releaseOnCancel) await this.release();
    this.leading = false;
  }

  /** An error message while this candidate leads but has not renewed for too long; undefined when healthy. */
  healthCheck(): string | undefined {
    if (!this.leading) return undefined;
    const sinceMs = this.clock.now() - this.lastRenewedAt;
    if (sinceMs <= this.config.leaseDurationMs + maxTolerableExpiredLeaseMs) return undefined;
    return `leader election: lease ${this.config.namespace}/${this.config.name} not renewed for ${Math.round(sinceMs / 1000)} s`;
  }

  /** One renewal: attempts every retry period until one succeeds or the renew deadline passes. */
  private async renew(signal: AbortSignal): Promise<boolean> {
    const deadline = this.clock.now() + this.config.renewDeadlineMs;
    for (;;) {
      if (await this.attempt(signal, deadline)) {
        this.lastRenewedAt = this.clock.now();
        return true;
      }
      if (signal.aborted || this.heldByOther() || this.clock.now() >= deadline) return false;
      await this.clock.sleep(Math.min(this.config.retryPeriodMs, deadline - this.clock.now()), signal);
      if (this.clock.now() >= deadline) return false;
    }
  }

  /**
   * `tryAcquireOrRenew` cancelled when `signal` aborts or at `deadline` (default: one renew
   * deadline from now); false when cancelled, whether or not the access honours the cancellation.
   */
  private async attempt(signal: AbortSignal, deadline = this.clock.now() + this.config.renewDeadlineMs): Promise<boolean> {
    const cancel = new AbortController();
    let finished = false;
    const onAbort = () => cancel.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(onAbort, Math.max(0, deadline - this.clock.now()));
    const cancelled = new Promise<false>((resolve) =>
      cancel.signal.addEventListener('abort', () => {
        if (!finished && !signal.aborted) this.onError?.(new Error(`lease request cancelled: no answer within the renew deadline (${this.config.renewDeadlineMs} ms)`));
        resolve(false);
      }, { once: true }),
    );
    try {
      return await Promise.race([this.tryAcquireOrRenew(cancel.signal), cancelled]);
    } finally {
      finished = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      cancel.abort();
    }
  }

  /**
   * Gives the lease up so that another candidate can take it at once; waits at most 5 s (or the
   * renew deadline, if shorter). Works on the Lease as it is now, not as last seen: a renewal
   * cancelled by the shutdown may still have been applied and moved its resourceVersion on.
   */
  private async release(): Promise<void> {
    if (!this.leading || !this.current) return;
    this.leading = false;
    const cancel = new AbortController();
    const timer = setTimeout(() => cancel.abort(), Math.min(this.config.renewDeadlineMs, releaseDeadlineMs));
    try {
      for (;;) {
        const lease = await this.access.get(cancel.signal);
        if (lease?.spec?.holderIdentity !== this.config.identity) return;
        try {
          await this.access.replace(
            { ...lease, spec: { ...lease.spec, holderIdentity: null, leaseDurationSeconds: 1, acquireTime: null, renewTime: microTime(this.clock.now()) } },
            cancel.signal,
          );
          return;
        } catch (err) {
          if (!isConflict(err) || cancel.signal.aborted) throw err;
        }
      }
    } catch (err) {
      // Best effort: the lease expires by itself otherwise.
      this.onError?.(err);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * One attempt; true when this candidate holds the lease afterwards. Once `signal` has aborted,
   * nothing that arrives later is taken into account.
   */
  async tryAcquireOrRenew(signal: AbortSignal = new AbortController().signal): Promise<boolean> {
    const now = this.clock.now();
    const desired: LeaseSpec = {
      holderIdentity: this.config.identity,
      leaseDurationSeconds: Math.round(this.config.leaseDurationMs / 1000),
      renewTime: microTime(now),
    };
    try {
      const existing = await this.access.get(signal);
      if (signal.aborted) return false;
      if (!existing) {
        const created = await this.access.create(
          {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.config.name, namespace: this.config.namespace, labels: this.config.labels },
            spec: { ...desired, acquireTime: microTime(now), leaseTransitions: 0 },
          },
          signal,
        );
        if (signal.aborted) return false;
        this.current = created;
        this.observe(created, now);
        return true;
      }
      this.observe(existing, now);
      const spec = existing.spec ?? {};
      const holder = spec.holderIdentity ?? '';
      const mine = holder === this.config.identity;
      if (!mine && holder !== '' && !this.expired(existing, now)) {
        this.current = existing;
        return false;
      }
      const replaced = await this.access.replace(
        {
          ...existing,
          metadata: this.config.labels ? { ...existing.metadata, labels: { ...existing.metadata.labels, ...this.config.labels } } : existing.metadata,
          spec: {
            ...spec,
            ...desired,
            acquireTime: mine ? spec.acquireTime : microTime(now),
            leaseTransitions: mine ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
          },
        },
        signal,
      );
      if (signal.aborted) return false;
      this.current = replaced;
      this.observe(replaced, now);
      return true;
    } catch (err) {
      // A lost race (conflict, already exists), an unreachable API server or a cancelled
      // request: not holding it now. A leader keeps trying until its renew deadline passes.
      // A cancelled request was reported by `attempt` already (or is part of a shutdown).
      if (!signal.aborted) this.onError?.(err);
      return false;
    }
  }

  private heldByOther(): boolean {
    const holder = this.current?.spec?.holderIdentity ?? '';
    return holder !== '' && holder !== this.config.identity;
  }

  /** Remembers when this candidate last saw the lease record change, on its own clock. */
  private observe(lease: LeaseObject, now: number): void {
    const record = JSON.stringify(lease.spec ?? {});
    if (this.observed?.record !== record) this.observed = { record, at: now };
  }

  private expired(lease: LeaseObject, now: number): boolean {
    const durationMs = (lease.spec?.leaseDurationSeconds ?? this.config.leaseDurationMs / 1000) * 1000;
    return this.observed === undefined || this.observed.at + durationMs <= now;
  }
}
