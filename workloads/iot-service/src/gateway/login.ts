/**
 * A device's login at the gateway (MQTT CONNECT, each HTTP request): its password checked with
 * the device cache (devices.ts) under limits on guessing.
 *
 * Guarantees: a pair the cache knows is answered from it at once, under no limit, so a device
 * whose password was accepted recently is admitted even while others guess at its id. Every other
 * pair goes to core only while its device id and its source address each have a failed-login
 * token left (limits.ts `failedLogins`: 5 per device id, gaining one every 2 s; 20 per source,
 * gaining 2 a second), a check of the same id still with core counting as a token of the id's
 * taken, so guesses at one id sent at once reach core no more often than one after the other
 * would; else it is refused `rate_limited` with the time until one is back, which takes a token
 * of the source's. Each wrong password core refused takes one token from both; a right one takes
 * none, so any number of devices may log in at once from one address. core busy or unreachable → `registry_busy` with a retry time.
 * `sourceLimited` says whether an address is out of tokens now: the gateway then closes its
 * connections as they are accepted (connections.ts), known devices behind that address included,
 * until a token is back.
 */

import type { Logger } from '../shared/log.ts';
import { RegistryBusyError, type DeviceAuthenticator } from './devices.ts';
import { failedLogins } from './limits.ts';
import type { RefusalReason } from './metrics.ts';
import { TokenBuckets } from '../shared/token-buckets.ts';

export type LoginResult = { admitted: true } | { admitted: false; reason: RefusalReason; retryAfterSeconds?: number };

export interface DeviceLoginOptions {
  perDevice?: { capacity: number; perSecond: number };
  perSource?: { capacity: number; perSecond: number };
  now?: () => number;
}

export class DeviceLogin {
  private readonly failuresByDevice: TokenBuckets;
  private readonly failuresBySource: TokenBuckets;
  /** Checks with core in progress, by device id: each may yet take a token. */
  private readonly checking = new Map<string, number>();

  constructor(
    private readonly devices: DeviceAuthenticator,
    private readonly log: Logger,
    options: DeviceLoginOptions = {},
  ) {
    this.failuresByDevice = new TokenBuckets({ ...(options.perDevice ?? failedLogins.perDevice), now: options.now });
    this.failuresBySource = new TokenBuckets({ ...(options.perSource ?? failedLogins.perSource), now: options.now });
  }

  sourceLimited(source: string): boolean {
    return this.failuresBySource.wait(source) > 0;
  }

  async login(id: string, password: string, source: string): Promise<LoginResult> {
    const known = this.devices.remembered(id, password);
    if (known === true) return { admitted: true };
    if (known === false) return { admitted: false, reason: 'bad_credentials' };
    const checking = this.checking.get(id) ?? 0;
    const waitMs = Math.max(this.failuresByDevice.wait(id, checking + 1), this.failuresBySource.wait(source));
    if (waitMs > 0) {
      // An attempt refused for its limit costs its source a token too: a source that keeps
      // guessing at a limited id runs out, and is then refused before its handshakes.
      this.failuresBySource.take(source);
      return { admitted: false, reason: 'rate_limited', retryAfterSeconds: Math.ceil(waitMs / 1000) };
    }
    this.checking.set(id, checking + 1);
    try {
      if (await this.devices.authenticate(id, password)) return { admitted: true };
      this.failuresByDevice.take(id);
      this.failuresBySource.take(source);
      return { admitted: false, reason: 'bad_credentials' };
    } catch (error) {
      if (error instanceof RegistryBusyError) return { admitted: false, reason: 'registry_busy', retryAfterSeconds: error.retryAfterSeconds };
      this.log.error('device check failed', { device: id, error });
      return { admitted: false, reason: 'registry_busy', retryAfterSeconds: 5 };
    } finally {
      const left = (this.checking.get(id) ?? 1) - 1;
      if (left > 0) this.checking.set(id, left);
      else this.checking.delete(id);
    }
  }
}
