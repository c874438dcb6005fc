/**
 * The work queue: client-go's rate-limiting work queue semantics (guarantees 2 and 4).
 *
 * Guarantees:
 * - Dedup: a key waiting in the queue is held once, however often it is added.
 * - One worker per key: a key handed out by `get` is not handed out again until `done`; a key
 *   added while it is being processed is queued again once at `done` (dirty + processing sets).
 * - FIFO among distinct keys.
 * - `addAfter` delays an add; several delayed adds of one key keep the earliest deadline.
 * - `addRateLimited` delays by the longer of the key's own exponential backoff (5 ms ×
 *   2^failures, capped at 1000 s; `forget` resets it after a success) and the queue's overall
 *   token bucket (10 retries a second, bursts of 100): client-go's default controller rate
 *   limiter, so many keys failing at once retry at most 100 + 10 × t times in t seconds.
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

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
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
  }

  get length(): number {
    return this.queue.length;
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.metrics?.queueAdds.inc({ name: this.name });
    this.dirty.add(key);
    if (!this.addedAt.has(key)) this.addedAt.set(key, performance.now());
    if (this.processing.has(key)) return;
    this.enqueue(key);
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
    if (this.dirty.has(key)) this.enqueue(key);
    else if (this.processing.size === 0) this.notifyDrained();
  }

  shutdown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.queue.length = 0;
    this.dirty.clear();
    this.setDepth();
    for (const waiter of this.waiters.splice(0)) waiter.resolve(undefined);
    if (this.processing.size === 0) this.notifyDrained();
  }

  /** Resolves once no key is being processed (call after `shutdown`). */
  drain(): Promise<void> {
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private enqueue(key: string): void {
    const waiter = this.waiters.shift();
    if (waiter) {
      this.queue.push(key);
      waiter.resolve(this.take());
      return;
    }
    this.queue.push(key);
    this.setDepth();
  }

  private take(): string | undefined {
    const key = this.queue.shift();
    if (key === undefined) return undefined;
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

  private setDepth(): void {
    this.metrics?.queueDepth.set({ name: this.name }, this.queue.length);
  }

  private notifyDrained(): void {
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }
}
