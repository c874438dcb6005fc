/**
 * The work queue: client-go's rate-limiting work queue semantics (guarantees 2 and 4).
 *
 * Guarantees:
 * - Dedup: a key waiting in the queue is held once, however often it is added.
 * - One worker per key: a key handed out by `get` is not handed out again until `done`; a key
 *   added while it is being processed is queued again once at `done` (dirty + processing sets).
 * - Two priorities, as controller-runtime's priority queue has: `add(key, 'low')` is for work that
 *   can wait (a primary object's first appearance, a periodic resync), any other add is normal.
 *   FIFO within each priority; while keys of both wait, they are handed out alternately, so
 *   follow-up work of keys already started is not held behind a backlog of new keys and new keys
 *   still get at least every other turn. A waiting key added again at normal priority moves to
 *   the normal keys; a key added while being processed is queued again with the highest priority
 *   it was added with meanwhile.
 * - `addAfter` delays an add; several delayed adds of one key keep the earliest deadline.
 * - `addRateLimited` delays by the longer of the key's own exponential backoff (5 ms ×
 *   2^failures, capped at 1000 s; `forget` resets it after a success) and the queue's overall
 *   token bucket (10 retries a second, bursts of 100): client-go's default controller rate
 *   limiter, so many keys failing at once retry at most 100 + 10 × t times in t seconds.
 * - Its metrics' series exist from its creation (depth, adds and retries at 0), as client-go's
 *   queue metrics do, so a rate or a dashboard panel over them has data before the first retry.
 * - `shutdown` stops new adds and wakes idle workers; `get` then returns undefined once the
 *   queue is empty; `drain` resolves when no key is being processed any more.
 */
import { TokenBucket, type RateLimit } from '../client/token-bucket.ts';
import type { RuntimeMetrics } from '../metrics/runtime-metrics.ts';

export interface BackoffConfig {
  baseDelayMs: number;
  maxDelayMs: number;
}

export const defaultBackoff: BackoffConfig = { baseDelayMs: 5, maxDelayMs: 1_000_000 };
/** client-go's overall bucket of the default controller rate limiter. */
export const defaultRetryRateLimit: RateLimit = { qps: 10, burst: 100 };

/** Per-key exponential backoff, as client-go's ItemExponentialFailureRateLimiter. */
export class ExponentialBackoff {
  private readonly failures = new Map<string, number>();
  constructor(private readonly config: BackoffConfig = defaultBackoff) {}

  when(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    return Math.min(this.config.baseDelayMs * 2 ** n, this.config.maxDelayMs);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  forget(key: string): void {
    this.failures.delete(key);
  }
}

interface Waiter {
  resolve(key: string | undefined): void;
}

/** How urgent an add is: 'low' for work that can wait behind follow-ups of work already started. */
export type Priority = 'normal' | 'low';

export class WorkQueue {
  private readonly queue: string[] = [];
  /** Low-priority keys in arrival order; an entry counts only while its key is in `queuedLow`. */
  private readonly lowQueue: string[] = [];
  private readonly queuedLow = new Set<string>();
  /** Whether the last key handed out was a low-priority one (the other priority goes next; normal first). */
  private lastTurnLow = true;
  private readonly dirty = new Set<string>();
  /** Keys added while being processed, only at low priority: queued low again at `done`. */
  private readonly dirtyLow = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly waiters: Waiter[] = [];
  private readonly drainWaiters: (() => void)[] = [];
  private shuttingDown = false;
  readonly backoff: ExponentialBackoff;
  private readonly retryBucket: TokenBucket;

  constructor(
    readonly name: string,
    private readonly metrics?: RuntimeMetrics,
    backoff: BackoffConfig = defaultBackoff,
    retryRateLimit: RateLimit = defaultRetryRateLimit,
  ) {
    this.backoff = new ExponentialBackoff(backoff);
    this.retryBucket = new TokenBucket(retryRateLimit);
    metrics?.trackQueue(name, () => this.startedAt.values());
    metrics?.queueDepth.set({ name }, 0);
    metrics?.queueAdds.inc({ name }, 0);
    metrics?.queueRetries.inc({ name }, 0);
  }

  get length(): number {
    return this.queue.length + this.queuedLow.size;
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  add(key: string, priority: Priority = 'normal'): void {
    if (this.shuttingDown) return;
    if (this.dirty.has(key)) {
      if (priority === 'normal') this.raise(key);
      return;
    }
    this.metrics?.queueAdds.inc({ name: this.name });
    this.dirty.add(key);
    if (!this.addedAt.has(key)) this.addedAt.set(key, performance.now());
    if (this.processing.has(key)) {
      if (priority === 'low') this.dirtyLow.add(key);
      return;
    }
    this.enqueue(key, priority);
  }

  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.delayed.set(key, { at, timer });
  }

  addRateLimited(key: string): void {
    this.metrics?.queueRetries.inc({ name: this.name });
    this.addAfter(key, Math.max(this.backoff.when(key), this.retryBucket.reserve()));
  }

  forget(key: string): void {
    this.backoff.forget(key);
  }

  /** Waits for the next key; undefined once the queue is shut down and empty. */
  get(): Promise<string | undefined> {
    const key = this.take();
    if (key !== undefined || this.shuttingDown) return Promise.resolve(key);
    return new Promise((resolve) => this.waiters.push({ resolve }));
  }

  done(key: string): void {
    this.processing.delete(key);
    const started = this.startedAt.get(key);
    if (started !== undefined) {
      this.metrics?.workDuration.observe({ name: this.name }, (performance.now() - started) / 1000);
      this.startedAt.delete(key);
    }
    if (this.dirty.has(key)) this.enqueue(key, this.dirtyLow.delete(key) ? 'low' : 'normal');
    else if (this.processing.size === 0) this.notifyDrained();
  }

  shutdown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.queue.length = 0;
    this.lowQueue.length = 0;
    this.queuedLow.clear();
    this.dirty.clear();
    this.dirtyLow.clear();
    this.setDepth();
    for (const waiter of this.waiters.splice(0)) waiter.resolve(undefined);
    if (this.processing.size === 0) this.notifyDrained();
  }

  /** Resolves once no key is being processed (call after `shutdown`). */
  drain(): Promise<void> {
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private enqueue(key: string, priority: Priority): void {
    if (priority === 'low') {
      this.lowQueue.push(key);
      this.queuedLow.add(key);
    } else {
      this.queue.push(key);
    }
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve(this.take());
    else this.setDepth();
  }

  /** A key waiting (or due again after processing) at low priority becomes normal. */
  private raise(key: string): void {
    this.dirtyLow.delete(key);
    if (!this.queuedLow.delete(key)) return;
    this.queue.push(key);
  }

  private take(): string | undefined {
    const takeLow = this.queuedLow.size > 0 && (this.queue.length === 0 || !this.lastTurnLow);
    const key = takeLow ? this.nextLow() : this.queue.shift();
    if (key === undefined) return undefined;
    this.lastTurnLow = takeLow;
    this.setDepth();
    this.dirty.delete(key);
    this.processing.add(key);
    const added = this.addedAt.get(key);
    if (added !== undefined) {
      this.metrics?.queueDuration.observe({ name: this.name }, (performance.now() - added) / 1000);
      this.addedAt.delete(key);
    }
    this.startedAt.set(key, performance.now());
    return key;
  }

  /** The first low-priority entry whose key still waits at low priority (raised keys left stale entries). */
  private nextLow(): string | undefined {
    for (let key = this.lowQueue.shift(); key !== undefined; key = this.lowQueue.shift()) {
      if (this.queuedLow.delete(key)) return key;
    }
    return undefined;
  }

  private setDepth(): void {
    this.metrics?.queueDepth.set({ name: this.name }, this.length);
  }

  private notifyDrained(): void {
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }
}
