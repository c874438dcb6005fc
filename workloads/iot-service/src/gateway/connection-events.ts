/**
 * The gateway's account of device connections: each MQTT connection's opening, its end (clean:
 * the device sent DISCONNECT; lost: anything else — its network, its keep-alive, the gateway
 * closing it on a password reset or on the gateway's own shutdown), each HTTP poll for commands
 * (`ttd`) likewise (clean: its answer written; lost: the device went away first) and each refused
 * login of a well-formed device id over either protocol, as connection events in the stream
 * EVENTS (shared/events.ts).
 *
 * Guarantees: `connected` returns a fresh connection id, which the matching `disconnected`
 * names; each transition is queued at once (never waiting on the broker) and published in the
 * order the gateway saw them, in chunks of up to CHUNK, each chunk published again until the
 * stream acknowledged all of it (`publishEvents`): a broker away delays events, never loses them
 * while the process lives — so 1,000 devices disconnecting at once are 1,000 events. At most
 * MAX_QUEUED wait; beyond, the oldest are dropped and counted in the log. `flush` resolves once
 * nothing waits or after `timeoutMs` (the gateway's shutdown: its devices' disconnects published
 * before it leaves the broker). A gateway killed outright publishes no disconnects: its devices'
 * next `connected` elsewhere supersedes them (processing/connection-state.ts).
 */

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JetStreamClient } from '@nats-io/jetstream';
import { publishEvents, type ConnectionEvent } from '../shared/events.ts';
import type { Logger } from '../shared/log.ts';
import { isDeviceId } from '../shared/telemetry.ts';

/** Most events published at once. */
const CHUNK = 500;
/** Most events waiting for the broker. */
export const MAX_QUEUED = 100_000;

/** What the device adapters tell of connections. */
export interface ConnectionSink {
  connected(deviceId: string): string;
  disconnected(deviceId: string, connectionId: string, clean: boolean): void;
  refused(deviceId: string): void;
}

export class ConnectionEvents implements ConnectionSink {
  private readonly queue: ConnectionEvent[] = [];
  private running: Promise<void> | undefined;
  private readonly closing = new AbortController();
  private dropped = 0;

  constructor(private readonly options: { js: () => JetStreamClient | undefined; log: Logger }) {}

  connected(deviceId: string): string {
    const connectionId = randomUUID();
    this.add({ type: 'connection', deviceId, state: 'connected', connectionId, at: new Date().toISOString() });
    return connectionId;
  }

  disconnected(deviceId: string, connectionId: string, clean: boolean): void {
    this.add({ type: 'connection', deviceId, state: 'disconnected', reason: clean ? 'clean' : 'lost', connectionId, at: new Date().toISOString() });
  }

  refused(deviceId: string): void {
    if (isDeviceId(deviceId)) this.add({ type: 'connection', deviceId, state: 'refused', connectionId: randomUUID(), at: new Date().toISOString() });
  }

  /** Nothing waits, or `timeoutMs` passed. */
  async flush(timeoutMs: number): Promise<void> {
    if (this.running) await Promise.race([this.running, sleep(timeoutMs)]);
  }

  close(): void {
    this.closing.abort(new Error('closing'));
  }

  private add(event: ConnectionEvent): void {
    this.queue.push(event);
    if (this.queue.length > MAX_QUEUED) {
      this.queue.shift();
      if (this.dropped++ % 1000 === 0) this.options.log.warn('connection events dropped: the broker has not taken them', { dropped: this.dropped });
    }
    this.running ??= this.publish().finally(() => (this.running = undefined));
  }

  private async publish(): Promise<void> {
    while (this.queue.length > 0 && !this.closing.signal.aborted) {
      const chunk = this.queue.slice(0, CHUNK);
      try {
        await publishEvents(this.options.js, chunk, {
          signal: this.closing.signal,
          onFailure: (error, failures) => {
            if (failures === 1 || failures % 10 === 0) this.options.log.warn('connection events not yet in the events stream; publishing again', { events: chunk.length, failures, error });
          },
        });
      } catch {
        return; // closing
      }
      // Events dropped meanwhile shifted the queue: remove what was published, not what came after.
      const published = new Set(chunk);
      while (this.queue.length > 0 && published.has(this.queue[0]!)) this.queue.shift();
    }
  }
}
