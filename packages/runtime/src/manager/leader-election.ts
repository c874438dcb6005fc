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
 * - A leader that cannot renew within the renew deadline calls `onStoppedLeading` at once.
 * - `release` (on graceful shutdown) empties holderIdentity so a successor takes over
 *   without waiting for the lease to expire.
 */
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

/** The three Lease calls leader election needs; the real client and unit-test fakes implement it. */
export interface LeaseAccess {
  get(): Promise<LeaseObject | undefined>;
  create(lease: LeaseObject): Promise<LeaseObject>;
  replace(lease: LeaseObject): Promise<LeaseObject>;
}

export interface ElectionClock {
  now(): number;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export interface LeaderElectionConfig {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export const leaderElectionDefaults = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

export interface LeaderCallbacks {
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

const microTime = (ms: number): string => new Date(ms).toISOString().replace('Z', '000Z');

export class LeaderElector {
  private observed: { record: string; at: number } | undefined;
  private current: LeaseObject | undefined;
  private leading = false;

  constructor(
    private readonly config: LeaderElectionConfig,
    private readonly access: LeaseAccess,
    private readonly clock: ElectionClock,
    private readonly onError?: (err: unknown) => void,
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /** Campaigns until elected, then renews until the lease is lost or the signal aborts. */
  async run(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<void> {
    while (!signal.aborted && !(await this.tryAcquireOrRenew())) {
      await this.clock.sleep(this.config.retryPeriodMs, signal);
    }
    if (signal.aborted) return;
    this.leading = true;
    callbacks.onStartedLeading();
    let lastRenew = this.clock.now();
    while (!signal.aborted) {
      await this.clock.sleep(this.config.retryPeriodMs, signal);
      if (signal.aborted) break;
      if (await this.tryAcquireOrRenew()) {
        lastRenew = this.clock.now();
      } else if (this.clock.now() - lastRenew >= this.config.renewDeadlineMs || this.heldByOther()) {
        this.leading = false;
        callbacks.onStoppedLeading();
        return;
      }
    }
  }

  /** Gives the lease up so that another candidate can take it at once. */
  async release(): Promise<void> {
    if (!this.leading || !this.current) return;
    this.leading = false;
    try {
      await this.access.replace({
        ...this.current,
        spec: { ...this.current.spec, holderIdentity: null, leaseDurationSeconds: 1, acquireTime: null, renewTime: microTime(this.clock.now()) },
      });
    } catch {
      // Best effort: the lease expires by itself otherwise.
    }
  }

  /** One attempt; true when this candidate holds the lease afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.clock.now();
    const desired: LeaseSpec = {
      holderIdentity: this.config.identity,
      leaseDurationSeconds: Math.round(this.config.leaseDurationMs / 1000),
      renewTime: microTime(now),
    };
    try {
      const existing = await this.access.get();
      if (!existing) {
        this.current = await this.access.create({
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.config.name, namespace: this.config.namespace },
          spec: { ...desired, acquireTime: microTime(now), leaseTransitions: 0 },
        });
        this.observe(this.current, now);
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
      this.current = await this.access.replace({
        ...existing,
        spec: {
          ...spec,
          ...desired,
          acquireTime: mine ? spec.acquireTime : microTime(now),
          leaseTransitions: mine ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
        },
      });
      this.observe(this.current, now);
      return true;
    } catch (err) {
      // A lost race (conflict, already exists) or an unreachable API server: not holding it now.
      // A leader keeps trying until its renew deadline passes.
      this.onError?.(err);
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
