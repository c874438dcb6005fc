/**
 * The events stream applications follow: JetStream stream `EVENTS` on the instance's broker,
 * holding every stored telemetry message (published by processing after its batch committed) and
 * every device connection event (published by the gateway).
 *
 * Guarantees: `ensureEventsStream` makes the stream exist (core, as it makes the others) with
 * file storage, the telemetry stream's `replicas`, limits retention keeping an event
 * `events.seconds` and at most `events.maxBytes` (config.yml; beyond, the oldest go first), a
 * duplicate window of DUPLICATE_WINDOW_MS keyed by the event's id, so an event published twice
 * within it is kept once, and at most MAX_STREAM_CONSUMERS consumers (broker.ts: every open
 * application stream is one, core/event-stream.ts); a stream made before with other limits is
 * updated to these. A device's telemetry events are on `events.telemetry.<device>`, its
 * connection events on `events.connection.<device>` (the device id one subject token, broker.ts
 * `subjectToken`); `deviceEventSubjects` names the subjects of some devices' events (all events
 * without devices). Every event is one JSON object with `type` (`telemetry` or `connection`) and
 * `deviceId`; `encodeEvent` writes it, `eventMessageId` names its JetStream message id.
 * `publishEvents` publishes a list in order and resolves only once every one is in the stream
 * (below). `ensureConnectionsConsumer` makes processing's durable consumer `connections` of the
 * connection events (all of them from the stream's start, explicit acknowledgement, redelivered
 * after ACK_WAIT_MS, never given up), as core does for the others (broker.ts).
 */

import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { AckPolicy, DeliverPolicy, DiscardPolicy, JetStreamApiCodes, JetStreamApiError, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { ACK_WAIT_MS, DUPLICATE_WINDOW_MS, ensureStream, MAX_STREAM_CONSUMERS, nanos, publishAcknowledged, subjectToken } from './broker.ts';
import type { EventsConfig, StreamConfig } from './config.ts';
import { retry } from './retry.ts';
import type { Payload } from './telemetry.ts';

export const EVENTS_STREAM = 'EVENTS';
export const EVENTS_SUBJECTS = 'events.>';
export const CONNECTION_EVENT_SUBJECTS = 'events.connection.>';
/** The durable consumer of connection events with which processing keeps each device's connection state. */
export const CONNECTIONS_CONSUMER = 'connections';
/** The longest wait between two attempts to publish events. */
const PUBLISH_RETRY_MAX_MS = 1_000;
/** How long one event's publish waits for the stream (re-published within it: broker.ts `publishAcknowledged`). */
const PUBLISH_TIMEOUT_MS = 5_000;

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

function subjectOf(event: DeviceEvent): string {
  return event.type === 'telemetry' ? telemetryEventSubject(event.deviceId) : connectionEventSubject(event.deviceId);
}

/**
 * Publishes the events in their order, all at once, and resolves once the stream acknowledged
 * every one (each published again after 1 and 3 s without an acknowledgement, broker.ts
 * `publishAcknowledged`, for at most 5 s); while any is not (no client yet, the broker away, the stream missing) it calls
 * `onFailure` and publishes the whole list again, at most a second apart, until every one is, or
 * rejects once `signal` aborted. What was published twice is kept once (the duplicate window).
 */
export async function publishEvents(
  js: () => JetStreamClient | undefined,
  events: readonly DeviceEvent[],
  options: { signal: AbortSignal; onFailure: (error: unknown, failures: number) => void },
): Promise<void> {
  if (events.length === 0) return;
  await retry(
    async () => {
      const client = js();
      if (!client) throw new Error('not connected to the broker');
      const published = events.map((event) => publishAcknowledged(client, subjectOf(event), encodeEvent(event), { msgID: eventMessageId(event), timeoutMs: PUBLISH_TIMEOUT_MS }));
      const failed = (await Promise.allSettled(published)).find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
    },
    { signal: options.signal, delayMs: (failures) => Math.min(100 * 2 ** (failures - 1), PUBLISH_RETRY_MAX_MS), onFailure: options.onFailure },
  );
}

/** processing's durable consumer of connection events (core makes it, as it makes processing's other one). */
export async function ensureConnectionsConsumer(jsm: JetStreamManager): Promise<void> {
  try {
    await jsm.consumers.info(EVENTS_STREAM, CONNECTIONS_CONSUMER);
    return;
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
  }
  await jsm.consumers.add(EVENTS_STREAM, {
    durable_name: CONNECTIONS_CONSUMER,
    filter_subject: CONNECTION_EVENT_SUBJECTS,
    deliver_policy: DeliverPolicy.All,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(ACK_WAIT_MS),
    max_deliver: -1,
  });
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
    max_consumers: MAX_STREAM_CONSUMERS,
  });
}
