/**
 * core's side of device-change notices (shared/device-changes.ts): after a device's password was
 * reset or the device deleted, every gateway is told on the broker, so none admits the old
 * password from its login cache any longer.
 *
 * Guarantees: once `attach`ed to a broker connection, a heartbeat `{origin, seq}` goes out at once
 * and every HEARTBEAT_INTERVAL_MS, so every gateway following the subject hears this process
 * within a second. `connected` says whether that connection is up now (the API changes no device
 * without it). `announce(device)` counts the notice (`seq`), publishes it, and resolves once the
 * broker confirmed it received it (a round trip on the same connection) or after `confirmMs`
 * (default 2 s) without that — it never rejects once attached: a notice the broker did not get is
 * still counted, so the next heartbeat a gateway hears shows the gap, and a gateway that hears
 * nothing more from this process assumes a gap after SILENCE_LIMIT_MS (gateway/device-changes.ts);
 * either way the gateway forgets every login it cached. It rejects, counting nothing, when not
 * attached. `close` stops the heartbeats and says farewell (`bye`), so the gateways forget this
 * process without assuming a gap.
 */

import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { watchLink } from '../shared/broker.ts';
import { DEVICE_CHANGES_SUBJECT, encodeDeviceChange, HEARTBEAT_INTERVAL_MS, type DeviceChange } from '../shared/device-changes.ts';
import type { Logger } from '../shared/log.ts';

/** What core's API needs of the notices. */
export interface DeviceChangeAnnouncer {
  connected(): boolean;
  announce(deviceId: string): Promise<void>;
}

export interface DeviceNoticesOptions {
  log: Logger;
  heartbeatMs?: number;
  confirmMs?: number;
}

export class DeviceNotices implements DeviceChangeAnnouncer {
  private readonly origin = randomUUID();
  private seq = 0;
  private connection: NatsConnection | undefined;
  private link: { readonly up: boolean } = { up: false };
  private heartbeats: NodeJS.Timeout | undefined;

  constructor(private readonly options: DeviceNoticesOptions) {}

  attach(connection: NatsConnection): void {
    this.connection = connection;
    this.link = watchLink(connection);
    this.publish({ origin: this.origin, seq: this.seq });
    this.heartbeats = setInterval(() => this.publish({ origin: this.origin, seq: this.seq }), this.options.heartbeatMs ?? HEARTBEAT_INTERVAL_MS);
    this.heartbeats.unref(); // no reason to keep a process alive
  }

  connected(): boolean {
    return this.connection !== undefined && this.link.up;
  }

  async announce(deviceId: string): Promise<void> {
    if (!this.connection) throw new Error('not connected to the broker');
    this.seq++;
    this.publish({ origin: this.origin, seq: this.seq, device: deviceId });
    if (!(await this.confirmed())) {
      this.options.log.warn('device change not confirmed by the broker; the gateways see the gap and forget every cached login', { device: deviceId });
    }
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeats);
    if (!this.connection || this.connection.isClosed()) return;
    this.publish({ origin: this.origin, seq: this.seq, bye: true });
    await this.confirmed();
  }

  private publish(change: DeviceChange): void {
    try {
      this.connection?.publish(DEVICE_CHANGES_SUBJECT, encodeDeviceChange(change));
    } catch (error) {
      // A closed connection: the gateways hear nothing more from this process, which they treat as a gap.
      this.options.log.warn('device change not published', { error });
    }
  }

  /** Whether the broker answered a round trip on this connection (so it has everything published before) within confirmMs. */
  private async confirmed(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.options.confirmMs ?? 2_000)));
    try {
      return await Promise.race([this.connection!.flush().then(() => true, () => false), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
