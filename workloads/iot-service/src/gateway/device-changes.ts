/**
 * The gateway's side of device-change notices (shared/device-changes.ts): what core announces
 * reaches the gateway's login cache (devices.ts) and its MQTT connections, and what it may have
 * missed empties the cache.
 *
 * Guarantees: `DeviceChangeTracker.receive` calls `changed(device)` for a notice that follows on
 * the last one heard from its core process (its `seq` one more; the first heard of a process: 1),
 * and `missed` — never `changed` — for any message whose `seq` shows notices that were not
 * received (the first heard of a process counts from 0), so a lost notice is caught at that
 * process's next heartbeat. `checkSilence` calls `missed` once for the processes not heard from
 * for SILENCE_LIMIT_MS (they may have announced what never arrived: a lost route, a crash) and
 * forgets them; a farewell (`bye`) forgets its process without that; `reconnected` calls
 * `missed`. `followDeviceChanges` subscribes the tracker to DEVICE_CHANGES_SUBJECT on a broker
 * connection (the subscription is sent before any later request on that connection), checks
 * silence every `checkMs` (default 500 ms), calls `reconnected` whenever the connection is
 * re-established (what was announced while it was down never arrives), and stops all of it when
 * the function it returns is called. So a
 * change core announced reaches a gateway that stays connected within SILENCE_LIMIT_MS +
 * `checkMs` at the latest, as the change itself or as a `missed`.
 */

import type { NatsConnection } from '@nats-io/transport-node';
import { decodeDeviceChange, DEVICE_CHANGES_SUBJECT, SILENCE_LIMIT_MS, type DeviceChange } from '../shared/device-changes.ts';

export interface DeviceChangeHandlers {
  /** The device's password was reset, or the device deleted. */
  changed(deviceId: string): void;
  /** Some change may not have arrived: `why` says what showed it. */
  missed(why: string): void;
}

export class DeviceChangeTracker {
  private readonly origins = new Map<string, { seq: number; heardAt: number }>();

  constructor(
    private readonly handlers: DeviceChangeHandlers,
    private readonly now: () => number = Date.now,
  ) {}

  receive(change: DeviceChange): void {
    const expected = (this.origins.get(change.origin)?.seq ?? 0) + (change.device !== undefined ? 1 : 0);
    if (change.seq !== expected) this.handlers.missed(`core ${change.origin} counts ${change.seq} notices, ${expected} expected`);
    else if (change.device !== undefined) this.handlers.changed(change.device);
    if (change.bye) this.origins.delete(change.origin);
    else this.origins.set(change.origin, { seq: change.seq, heardAt: this.now() });
  }

  /** The broker connection is back: whatever was announced while it was down never arrives. */
  reconnected(): void {
    this.handlers.missed('reconnected to the broker');
  }

  checkSilence(): void {
    const now = this.now();
    const silent = [...this.origins].filter(([, { heardAt }]) => now - heardAt >= SILENCE_LIMIT_MS).map(([origin]) => origin);
    if (silent.length === 0) return;
    for (const origin of silent) this.origins.delete(origin);
    this.handlers.missed(`not heard from core ${silent.join(', ')} for ${SILENCE_LIMIT_MS / 1000} s`);
  }
}

/** Follows the device changes on `connection` into `tracker`; returns how to stop. */
export function followDeviceChanges(connection: NatsConnection, tracker: DeviceChangeTracker, checkMs = 500): () => void {
  const subscription = connection.subscribe(DEVICE_CHANGES_SUBJECT, {
    callback: (error, message) => {
      const change = error ? undefined : decodeDeviceChange(message.string());
      if (change) tracker.receive(change);
    },
  });
  const silence = setInterval(() => tracker.checkSilence(), checkMs);
  silence.unref();
  let stopped = false;
  void (async () => {
    for await (const status of connection.status()) {
      if (stopped) return;
      if (status.type === 'reconnect') tracker.reconnected();
    }
  })();
  return () => {
    stopped = true;
    clearInterval(silence);
    subscription.unsubscribe();
  };
}
