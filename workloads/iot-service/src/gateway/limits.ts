/**
 * The gateway's limits per device and per source address, with their defaults, and the cap on
 * connections from IOT_GATEWAY_MAX_CONNECTIONS.
 *
 * Guarantees: `messageRate` paces each device's messages over both protocols together (default
 * 200 a second after a burst of 400); `connectRate` bans a device id that logs in over MQTT more
 * than 20 times in a row at more than one every 5 s, for 60 s; `failedLogins` are those of
 * login.ts. `maxConnections` is IOT_GATEWAY_MAX_CONNECTIONS, a positive integer, or undefined
 * (no cap) when unset or empty; anything else throws naming it.
 */

import { TokenBuckets } from '../shared/token-buckets.ts';

export const messageRate = () => new TokenBuckets({ capacity: 400, perSecond: 200 });

export const connectRate = () => new TokenBuckets({ capacity: 20, perSecond: 0.2, banMs: 60_000 });

export const failedLogins = {
  perDevice: { capacity: 5, perSecond: 0.5 },
  perSource: { capacity: 20, perSecond: 2 },
};

export function maxConnections(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const value = env.IOT_GATEWAY_MAX_CONNECTIONS?.trim();
  if (!value) return undefined;
  if (!/^[1-9]\d*$/.test(value)) throw new Error(`IOT_GATEWAY_MAX_CONNECTIONS must be a positive integer, not ${JSON.stringify(value)}`);
  return Number(value);
}
