/**
 * How core tells every gateway that a device's password was reset or the device deleted: plain
 * NATS messages on DEVICE_CHANGES_SUBJECT, each from one core process (its `origin`, drawn at
 * start) carrying that process's count of notices so far (`seq`).
 *
 * A core process publishes, in this order on one connection (so each subscriber receives them in
 * this order or misses some): one notice per change (`device` set, `seq` one more than before),
 * a heartbeat every HEARTBEAT_INTERVAL_MS (`seq` unchanged), and a farewell when it stops (`bye`).
 * So a subscriber that has heard an origin knows within one heartbeat when it missed a notice of
 * it (the count went up by more than the notices it received), and knows an origin that went
 * silent for SILENCE_LIMIT_MS without a farewell may have sent notices it never received.
 *
 * Guarantees: `encodeDeviceChange`/`decodeDeviceChange` round-trip; `decodeDeviceChange` returns
 * undefined for anything that is not such a message (a non-empty origin, a whole `seq` ≥ 0, a
 * valid device id or none, `bye` true or absent).
 */

import { isDeviceId } from './telemetry.ts';

export const DEVICE_CHANGES_SUBJECT = 'devices.changed';
/** How often a core process says it is there and how many notices it sent. */
export const HEARTBEAT_INTERVAL_MS = 1_000;
/** After how long without a word from a core process a gateway assumes it missed what it said. */
export const SILENCE_LIMIT_MS = 3_000;

export interface DeviceChange {
  /** The core process: random, drawn at its start. */
  origin: string;
  /** How many notices that process has published, this one included. */
  seq: number;
  /** The device whose password was reset or which was deleted; absent in a heartbeat or farewell. */
  device?: string;
  /** The process stops: nothing more comes from it. */
  bye?: true;
}

export function encodeDeviceChange(change: DeviceChange): string {
  return JSON.stringify(change);
}

export function decodeDeviceChange(text: string): DeviceChange | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { origin, seq, device, bye } = value as Record<string, unknown>;
  if (typeof origin !== 'string' || origin === '' || typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) return undefined;
  if (device !== undefined && !isDeviceId(device)) return undefined;
  if (bye !== undefined && bye !== true) return undefined;
  return { origin, seq, ...(device !== undefined ? { device } : {}), ...(bye ? { bye } : {}) };
}
