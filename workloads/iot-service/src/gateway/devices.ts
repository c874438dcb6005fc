/**
 * How the gateway decides whether a device id and password are valid: it asks core, and remembers
 * the answer — a valid pair for `ttlMs` (default 5 min), an invalid one for `failureTtlMs`
 * (default 5 s).
 *
 * Guarantees: `authenticate` is true only when core said so for exactly this id and password
 * within the last `ttlMs` — and since the last `forget` of the id and `forgetAll` — or says so
 * now, so a repeated login with the accepted password costs no call to core; it is false without
 * asking core when core refused exactly this pair within the last `failureTtlMs` (a device
 * registered after a refusal is admitted at most that much later; another password is asked
 * about at once). `forget(id)` (the device's password was reset or the device deleted) and
 * `forgetAll` (a change may have been missed) drop what was remembered, and an answer of core to
 * a check that was under way when either was called is not remembered (it may predate the
 * change), so every login they concern that begins after the call is asked of core. What is
 * kept are HMACs under a key drawn at start, never passwords, for at most `maxEntries` pairs each
 * way (oldest dropped first). Concurrent checks of the same pair share one call to core, unless a `forget` or
 * `forgetAll` came between them. A failing core check rejects (the caller refuses the device;
 * nothing is cached): `RegistryBusyError` when core shed the check.
 */

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Endpoint } from '../shared/config.ts';
import { isDeviceId } from '../shared/telemetry.ts';

export type DeviceCheck = (id: string, password: string) => Promise<boolean>;

/** core is checking all the devices it can at once: ask again after `retryAfterSeconds`. */
export class RegistryBusyError extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super(`core is busy checking devices; retry after ${retryAfterSeconds} s`);
  }
}

export const DEFAULT_DEVICE_CACHE_TTL_MS = 5 * 60_000;
export const DEFAULT_FAILURE_CACHE_TTL_MS = 5_000;

export interface DeviceAuthenticatorOptions {
  ttlMs?: number;
  failureTtlMs?: number;
  maxEntries?: number;
  now?: () => number;
}

/** Answers kept by device id, each for one password (its HMAC) until a time. */
class Answers {
  private readonly entries = new Map<string, { digest: Buffer; until: number }>();
  constructor(private readonly maxEntries: number) {}

  has(id: string, digest: Buffer, now: number): boolean {
    const entry = this.entries.get(id);
    return entry !== undefined && entry.until > now && timingSafeEqual(entry.digest, digest);
  }

  set(id: string, digest: Buffer, until: number): void {
    this.entries.delete(id);
    this.entries.set(id, { digest, until });
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break;
      this.entries.delete(oldest);
    }
  }

  delete(id: string): void {
    this.entries.delete(id);
  }

  clear(): void {
    this.entries.clear();
  }
}

export class DeviceAuthenticator {
  private readonly key = randomBytes(32);
  private readonly valid: Answers;
  private readonly invalid: Answers;
  private readonly pending = new Map<string, Promise<boolean>>();
  /** Counts the calls of `forget` and `forgetAll`: an answer to a check begun before one is not remembered. */
  private generation = 0;

  constructor(
    private readonly check: DeviceCheck,
    private readonly options: DeviceAuthenticatorOptions = {},
  ) {
    this.valid = new Answers(options.maxEntries ?? 10_000);
    this.invalid = new Answers(options.maxEntries ?? 10_000);
  }

  /** The remembered answer for this pair: true, false, or undefined when core must be asked. */
  remembered(id: string, password: string): boolean | undefined {
    if (!isDeviceId(id) || password === '') return false;
    const now = (this.options.now ?? Date.now)();
    const digest = this.digest(id, password);
    if (this.valid.has(id, digest, now)) return true;
    if (this.invalid.has(id, digest, now)) return false;
    return undefined;
  }

  /** The device's password was reset or the device deleted: nothing remembered of it counts any longer. */
  forget(id: string): void {
    this.generation++;
    this.valid.delete(id);
    this.invalid.delete(id);
  }

  /** A change may have been missed: nothing remembered counts any longer. */
  forgetAll(): void {
    this.generation++;
    this.valid.clear();
    this.invalid.clear();
  }

  async authenticate(id: string, password: string): Promise<boolean> {
    const known = this.remembered(id, password);
    if (known !== undefined) return known;
    const digest = this.digest(id, password);
    const generation = this.generation;
    const pendingKey = `${generation}\0${id}\0${digest.toString('hex')}`;
    let answer = this.pending.get(pendingKey);
    if (!answer) {
      answer = this.check(id, password).finally(() => this.pending.delete(pendingKey));
      this.pending.set(pendingKey, answer);
    }
    const valid = await answer;
    if (generation !== this.generation) return valid; // a change came meanwhile: this answer may predate it
    const now = (this.options.now ?? Date.now)();
    if (valid) {
      this.valid.set(id, digest, now + (this.options.ttlMs ?? DEFAULT_DEVICE_CACHE_TTL_MS));
      this.invalid.delete(id);
    } else {
      this.invalid.set(id, digest, now + (this.options.failureTtlMs ?? DEFAULT_FAILURE_CACHE_TTL_MS));
    }
    return valid;
  }

  private digest(id: string, password: string): Buffer {
    return createHmac('sha256', this.key).update(id).update('\0').update(password).digest();
  }
}

/**
 * The check against core's `POST /v1/internal/device-auth`, authorised with the device-check token
 * (good for that route alone); the request is abandoned after `timeoutMs` (core then does not
 * compute it, see core/api.ts).
 */
export function coreDeviceCheck(core: Endpoint, deviceCheckToken: string, timeoutMs = 3_000): DeviceCheck {
  const url = `http://${core.host.includes(':') ? `[${core.host}]` : core.host}:${core.port}/v1/internal/device-auth`;
  return async (id, password) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${deviceCheckToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ id, password }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.status === 503 && response.headers.has('retry-after')) {
      await response.body?.cancel();
      throw new RegistryBusyError(Number(response.headers.get('retry-after')) || 1);
    }
    if (response.status !== 200) throw new Error(`core answered the device check with ${response.status}`);
    const body = (await response.json()) as { authenticated?: unknown };
    return body.authenticated === true;
  };
}
