/**
 * Token buckets by key (a device id, a source address): how often something may happen per key.
 *
 * Guarantees: each key's bucket holds at most `capacity` tokens and gains `perSecond` tokens a
 * second, starting full. `take` removes one token and returns 0, or, when the bucket is empty,
 * takes none and returns how many milliseconds until one is there — or, with `banMs`, bans the
 * key: every `take` and `wait` for it then answers the rest of the ban, `banMs` from the moment
 * the bucket was found empty. `wait` answers the same without taking — or, asked for `tokens`,
 * how long until the bucket holds that many (at most `capacity` ever are). `reserve` (pacing, never
 * banning) takes a token that may not be there yet — the bucket goes below zero — and returns
 * how long until it is due, or takes nothing and returns undefined when that is more than
 * `maxWaitMs`; callers that each wait what `reserve` returned proceed at no more than `perSecond`
 * after the first `capacity`, in the order they reserved. At most `maxKeys` keys are
 * remembered (the least recently used forgotten first; a forgotten key starts full again).
 */

export interface TokenBucketOptions {
  capacity: number;
  perSecond: number;
  banMs?: number;
  maxKeys?: number;
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
  bannedUntil: number;
}

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly options: TokenBucketOptions) {}

  take(key: string): number {
    const bucket = this.refilled(key);
    const waitMs = this.waitOf(bucket);
    if (waitMs > 0) {
      if (this.options.banMs && bucket.bannedUntil <= bucket.at) {
        bucket.bannedUntil = bucket.at + this.options.banMs;
        return this.options.banMs;
      }
      return waitMs;
    }
    bucket.tokens -= 1;
    return 0;
  }

  reserve(key: string, maxWaitMs: number): number | undefined {
    const bucket = this.refilled(key);
    const waitMs = bucket.tokens >= 1 ? 0 : ((1 - bucket.tokens) / this.options.perSecond) * 1000;
    if (waitMs > maxWaitMs) return undefined;
    bucket.tokens -= 1;
    return waitMs;
  }

  wait(key: string, tokens = 1): number {
    return this.waitOf(this.refilled(key), tokens);
  }

  private waitOf(bucket: Bucket, tokens = 1): number {
    if (bucket.bannedUntil > bucket.at) return bucket.bannedUntil - bucket.at;
    return bucket.tokens >= tokens ? 0 : Math.ceil(((tokens - bucket.tokens) / this.options.perSecond) * 1000);
  }

  private refilled(key: string): Bucket {
    const now = (this.options.now ?? Date.now)();
    const bucket = this.buckets.get(key) ?? { tokens: this.options.capacity, at: now, bannedUntil: 0 };
    bucket.tokens = Math.min(this.options.capacity, bucket.tokens + ((now - bucket.at) / 1000) * this.options.perSecond);
    bucket.at = now;
    this.buckets.delete(key); // re-inserted last: the map's order is least recently used first
    this.buckets.set(key, bucket);
    for (const oldest of this.buckets.keys()) {
      if (this.buckets.size <= (this.options.maxKeys ?? 100_000)) break;
      this.buckets.delete(oldest);
    }
    return bucket;
  }
}
