/**
 * The events stream applications follow: JetStream stream `EVENTS` on the instance's broker,
 * holding every stored telemetry message (published by processing after its batch committed) and
 * every device connection event (published by the gateway).
 *
 * Guarantees: `ensureEventsStream` makes the stream exist (core, as it makes the others) with
 * file storage, the telemetry stream's `replicas`, limits retention keeping an event
 * `events.seconds` and at most `events.maxBytes` (config.yml; beyond, the oldest go first), and a
 * duplicate window of DUPLICATE_WINDOW_MS keyed by the event's id, so an event published twice
 * within it is kept once. A device's telemetry events are on `events.telemetry.<device>`, its
 * connection events on `events.connection.<device>` (the device id one subject token, broker.ts
 * `subjectToken`); `deviceEventSubjects` names the subjects of some devices' events (all events
 * without devices). Every event is one JSON object with `type` (`telemetry` or `connection`) and
 * `deviceId`; `encodeEvent` writes it, `eventMessageId` names its JetStream message id.
 */

import type { JetStreamManager } from '@nats-io/jetstream';
import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { DUPLICATE_WINDOW_MS, ensureStream, nanos, subjectToken } from './broker.ts';
import type { EventsConfig, StreamConfig } from './config.ts';
import type { Payload } from './telemetry.ts';

export const EVENTS_STREAM = 'EVENTS';
export const EVENTS_SUBJECTS = 'events.>';

/** A stored telemetry message. */
export interface TelemetryEvent {
  type: 'telemetry';
  deviceId: string;
  messageId: string;
  receivedAt: string;
  payload: Payload;
}

/** A device's connection opened, closed or refused at a gateway. */
export interface ConnectionEvent {
  type: 'connection';
  deviceId: string;
  /** `connected`, `disconnected` (with `reason` clean or lost) or `refused` (its login). */
  state: 'connected' | 'disconnected' | 'refused';
  reason?: 'clean' | 'lost';
  /** One per connection: a disconnect ends the connection of the same id. */
  connectionId: string;
  at: string;
}

export type DeviceEvent = TelemetryEvent | ConnectionEvent;

export function telemetryEventSubject(deviceId: string): string {
  return `events.telemetry.${subjectToken(deviceId)}`;
}

export function connectionEventSubject(deviceId: string): string {
  return `events.connection.${subjectToken(deviceId)}`;
}

/** The subjects of these devices' events; every event's for none. */
export function deviceEventSubjects(deviceIds: readonly string[]): string[] {
  return deviceIds.length === 0 ? [EVENTS_SUBJECTS] : deviceIds.map((id) => `events.*.${subjectToken(id)}`);
}

/** The JetStream message id: one per telemetry message, one per connection transition. */
export function eventMessageId(event: DeviceEvent): string {
  return event.type === 'telemetry' ? `t/${event.deviceId}/${event.messageId}` : `c/${event.connectionId}/${event.state}`;
}

export function encodeEvent(event: DeviceEvent): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(event));
}

export function ensureEventsStream(jsm: JetStreamManager, stream: StreamConfig, events: EventsConfig): Promise<void> {
  return ensureStream(jsm, {
    name: EVENTS_STREAM,
    subjects: [EVENTS_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: stream.replicas,
    max_age: nanos(events.seconds * 1000),
    max_bytes: events.maxBytes,
    duplicate_window: nanos(DUPLICATE_WINDOW_MS),
  });
}
