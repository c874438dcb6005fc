/**
 * A token bucket, as client-go's flowcontrol token bucket (golang.org/x/time/rate): `qps` tokens
 * a second, at most `burst` of them saved up.
 *
 * Guarantees: each `reserve()` takes one token and says how long its caller must wait for it
 * (0 while tokens are left); reservations are served in the order made, so over any interval of
 * t seconds at most burst + qps × t reservations fall due. `wait(signal)` sleeps until due; a
 * wait cut short by its signal gives its token back. Used for the client's request rate and the
 * work queue's overall retry rate.
 */

export interface RateLimit {
  /** Tokens per second; 0 or less = no limit. */
  qps: number;
  /** Tokens that may be spent at once after a quiet period (at least 1). */
  burst: number;
}

export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    readonly limit: RateLimit,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(limit.qps > 0) || !(limit.burst >= 1)) throw new Error(`a token bucket needs qps > 0 and burst >= 1, got qps ${limit.qps}, burst ${limit.burst}`);
    this.tokens = limit.burst;
    this.last = this.now();
  }

  /** Takes a token; the milliseconds until it is due. */
  reserve(): number {
    const now = this.now();
    this.tokens = Math.min(this.limit.burst, this.tokens + ((now - this.last) / 1000) * this.limit.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.limit.qps) * 1000;
  }

  /** Waits for a token; resolves with the milliseconds waited. */
  async wait(signal?: AbortSignal): Promise<number> {
    const ms = this.reserve();
    if (ms <= 0) return 0;
    try {
      await sleep(ms, signal);
    } catch (err) {
      this.tokens = Math.min(this.limit.burst, this.tokens + 1);
      throw err;
    }
    return ms;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
