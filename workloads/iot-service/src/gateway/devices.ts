/**
 * How the gateway decides whether a device id and password are valid: it asks core, and remembers
 * a positive answer for a short while.
 *
 * Guarantees: `authenticate` is true only when core said so for exactly this id and password
 * within the last `ttlMs` (default 30 s) or says so now; a negative answer is never cached, so a
 * device registered after the gateway started is admitted at its first attempt, and a wrong
 * password never hides a right one. The cache keeps SHA-256 digests, not passwords, and at most
 * `maxEntries` devices (oldest dropped first). Concurrent checks of the same pair share one call to
 * core. A failing core check rejects (the caller refuses the device; nothing is cached).
 */

import { createHash, timingSafeEqual } from 'node:crypto';
import type { Endpoint } from '../shared/config.ts';
import { isDeviceId } from '../shared/telemetry.ts';

export type DeviceCheck = (id: string, password: string) => Promise<boolean>;

export const DEFAULT_DEVICE_CACHE_TTL_MS = 30_000;

const digest = (id: string, password: string) => createHash('sha256').update(id).update('\0').update(password).digest();

export class DeviceAuthenticator {
  private readonly admitted = new Map<string, { digest: Buffer; until: number }>();
  private readonly pending = new Map<string, Promise<boolean>>();

  constructor(
    private readonly check: DeviceCheck,
    private readonly options: { ttlMs?: number; maxEntries?: number; now?: () => number } = {},
  ) {}

  async authenticate(id: string, password: string): Promise<boolean> {
    if (!isDeviceId(id) || password === '') return false;
    const now = this.options.now ?? Date.now;
    const key = digest(id, password);
    const cached = this.admitted.get(id);
    if (cached && cached.until > now() && timingSafeEqual(cached.digest, key)) return true;

    const pendingKey = key.toString('hex');
    let answer = this.pending.get(pendingKey);
    if (!answer) {
      answer = this.check(id, password).finally(() => this.pending.delete(pendingKey));
      this.pending.set(pendingKey, answer);
    }
    const valid = await answer;
    if (valid) this.remember(id, key, now() + (this.options.ttlMs ?? DEFAULT_DEVICE_CACHE_TTL_MS));
    return valid;
  }

  private remember(id: string, key: Buffer, until: number): void {
    this.admitted.delete(id);
    this.admitted.set(id, { digest: key, until });
    const max = this.options.maxEntries ?? 10_000;
    for (const oldest of this.admitted.keys()) {
      if (this.admitted.size <= max) break;
      this.admitted.delete(oldest);
    }
  }
}

/** The check against core's `POST /v1/internal/device-auth`, authorised with the api token. */
export function coreDeviceCheck(core: Endpoint, apiToken: string, timeoutMs = 3_000): DeviceCheck {
  const url = `http://${core.host.includes(':') ? `[${core.host}]` : core.host}:${core.port}/v1/internal/device-auth`;
  return async (id, password) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ id, password }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.status !== 200) throw new Error(`core answered the device check with ${response.status}`);
    const body = (await response.json()) as { authenticated?: unknown };
    return body.authenticated === true;
  };
}
