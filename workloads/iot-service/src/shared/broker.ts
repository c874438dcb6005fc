/**
 * The instance's broker: NATS with JetStream, the stream telemetry travels in from the gateway to
 * processing, and the stream of notices of the messages processing set aside as dead letters.
 *
 * core makes the streams and processing's consumer (core/broker-resources.ts); the gateway and
 * processing only use them, as their broker users may (image/broker.sh).
 *
 * Guarantees: `connectBroker` connects as the given user, the replies to its requests coming to
 * inboxes under `_INBOX_<user>` (the prefix broker.sh lets that user alone receive), and keeps
 * reconnecting for as long as the process runs (never giving up); `watchLink` says whether a
 * connection is up now; `ensureTelemetryStream` makes the stream `TELEMETRY` exist with the
 * configuration of config.yml's `stream` — file storage on the broker's volume, `replicas`
 * copies (1 or 3), work-queue retention (a message leaves the stream only once
 * processing acknowledged it, after its row committed), at most `maxBytes` held, and `discard:
 * new`, so a full stream refuses a publish instead of dropping anything it acknowledged; a
 * stream made before with other limits is updated to these. It is safe from any number of
 * processes at once. `ensureDeadLetterStream` does the same for the stream `DEAD_LETTERS`
 * (subjects `deadletters.>`): file storage, the telemetry stream's `replicas`, limits retention
 * keeping a notice at most `DEAD_LETTER_MAX_AGE_MS` (30 days) and the newest
 * `DEAD_LETTER_MAX_MESSAGES`, dropping the oldest beyond (`discard: old`), so its last sequence
 * number counts every notice it ever took and only grows while the stream exists.
 * `ensureProcessingConsumer` does the same for the durable pull consumer all
 * processing replicas share: explicit acknowledgement, redelivery after `PROCESSING_ACK_WAIT_MS`
 * without one, never giving up on a message; an existing one with another ack wait (an instance
 * made before) gets this one. A device's message is on subject `telemetry.<device id>` with
 * every `.` of the id written `%2E`, so one device is one subject token; its JetStream message id
 * is `<device id>/<message id>`, so the stream stores a message the gateway publishes twice
 * within its duplicate window once. The notice of a dead letter is on
 * `deadletters.refused.<device id>` (written the same way) or, for a message that was no envelope,
 * `deadletters.malformed`, with the same message id, so either stream keeps one message published
 * twice within `DUPLICATE_WINDOW_MS` once.
 */

import type { JetStreamClient, JetStreamManager, StreamConfig as JetStreamStreamConfig } from '@nats-io/jetstream';
import { AckPolicy, DiscardPolicy, JetStreamApiCodes, JetStreamApiError, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect, errors, type NatsConnection } from '@nats-io/transport-node';
import type { Endpoint, StreamConfig } from './config.ts';

export const TELEMETRY_STREAM = 'TELEMETRY';
export const TELEMETRY_SUBJECTS = 'telemetry.>';
export const DEAD_LETTER_STREAM = 'DEAD_LETTERS';
export const DEAD_LETTER_SUBJECTS = 'deadletters.>';
/** The notices of dead letters the stream keeps: those of the last 30 days, and the newest 100,000 of them. */
export const DEAD_LETTER_MAX_AGE_MS = 30 * 24 * 60 * 60_000;
export const DEAD_LETTER_MAX_MESSAGES = 100_000;
export const PROCESSING_CONSUMER = 'processing';
/**
 * How long processing's consumer waits for a delivery's acknowledgement before handing it out
 * again: a delivery lost on its way (a broker leaving or rejoining a roll) is stored only after it,
 * and with 30 s an upgrade stored one message 30 s after its acknowledgement (bench/analysis.md,
 * issue 54). processing writes a batch in milliseconds and marks a batch whose write it retries as
 * in progress; a delivery held longer behind it may be handed out twice, and is stored once.
 */
export const PROCESSING_ACK_WAIT_MS = 5_000;
/** How long a consumer of the events stream (processing's `connections`, events.ts) holds a message without acknowledging it before the broker hands it out again. */
export const ACK_WAIT_MS = 30_000;
/** Messages handed to processing and not yet acknowledged, over all replicas together. */
export const MAX_ACK_PENDING = 20_000;
/** The largest message the stream takes: an envelope around the gateway's largest payload. */
export const MAX_MESSAGE_BYTES = 128 * 1024;
/**
 * How many consumers COMMANDS (one per device, kept an hour after it last followed) and EVENTS
 * (one per open application stream) may hold. Set on those two streams because NATS Server
 * otherwise allows a stream 1,000 (its `default_max_consumers`): the 1,001st follower was refused.
 */
export const MAX_STREAM_CONSUMERS = 100_000;
/** How long a stream remembers a message id to drop a second publish of it. */
export const DUPLICATE_WINDOW_MS = 2 * 60_000;
export const nanos = (ms: number) => ms * 1_000_000;

/** A device id as one subject token: every `.` written `%2E`. */
export function subjectToken(deviceId: string): string {
  return deviceId.replaceAll('.', '%2E');
}

export function telemetrySubject(deviceId: string): string {
  return `telemetry.${subjectToken(deviceId)}`;
}

/** Where the notice of a dead letter goes: by device, or for a message that was no envelope (no device id) on its own subject. */
export function deadLetterSubject(deviceId: string): string {
  return deviceId === '' ? 'deadletters.malformed' : `deadletters.refused.${subjectToken(deviceId)}`;
}

export function brokerMessageId(deviceId: string, messageId: string): string {
  return `${deviceId}/${messageId}`;
}

export interface BrokerConnectOptions {
  broker: Endpoint;
  /** One of BROKER_USERS (config.ts). */
  user: string;
  password: string;
  /** How the broker lists this connection, e.g. `gateway-<pod>`. */
  name: string;
}

export async function connectBroker(options: BrokerConnectOptions): Promise<NatsConnection> {
  return connect({
    servers: `${options.broker.host}:${options.broker.port}`,
    user: options.user,
    pass: options.password,
    inboxPrefix: `_INBOX_${options.user}`,
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
    timeout: 5_000,
  });
}

/**
 * How long a JetStream publish waits for the stream's acknowledgement before the same message is
 * published again (`publishAcknowledged`), doubling each time.
 */
export const PUBLISH_RETRY_MS = 1_000;

/**
 * Publishes `data` under `msgID` until the stream acknowledged it: again (same id, so the stream
 * keeps it once) after PUBLISH_RETRY_MS without an acknowledgement, then after 2, 4, … s, until
 * `timeoutMs` passed; rejects with the last timeout then, and at once with any other error.
 * JetStream drops, without an answer, a message that reaches a replica no longer or not yet the
 * stream's leader — as when a broker leaves in a roll of three — and a single publish then waited
 * its whole timeout (database-failover.e2e: the device's 5 s, processing's events 5 s).
 */
export async function publishAcknowledged(js: JetStreamClient, subject: string, data: Uint8Array, options: { msgID: string; timeoutMs: number }): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  for (let wait = PUBLISH_RETRY_MS; ; wait *= 2) {
    const left = deadline - Date.now();
    try {
      await js.publish(subject, data, { msgID: options.msgID, timeout: Math.max(1, Math.min(wait, left)) });
      return;
    } catch (error) {
      if (!(error instanceof errors.TimeoutError) || wait >= left) throw error;
    }
  }
}

/** Whether the connection is up now: down from a disconnect until the next reconnect, and for good once closed. */
export function watchLink(connection: NatsConnection): { readonly up: boolean } {
  const link = { up: true };
  void (async () => {
    for await (const status of connection.status()) {
      if (status.type === 'disconnect') link.up = false;
      else if (status.type === 'reconnect') link.up = true;
    }
  })();
  void connection.closed().then(() => {
    link.up = false;
  });
  return link;
}

function telemetryStreamSettings(stream: StreamConfig): StreamSettings {
  return {
    name: TELEMETRY_STREAM,
    subjects: [TELEMETRY_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Workqueue,
    discard: DiscardPolicy.New,
    num_replicas: stream.replicas,
    max_bytes: stream.maxBytes,
    max_msg_size: MAX_MESSAGE_BYTES,
    duplicate_window: nanos(DUPLICATE_WINDOW_MS),
  };
}

function deadLetterStreamSettings(stream: StreamConfig): StreamSettings {
  return {
    name: DEAD_LETTER_STREAM,
    subjects: [DEAD_LETTER_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: stream.replicas,
    max_age: nanos(DEAD_LETTER_MAX_AGE_MS),
    max_msgs: DEAD_LETTER_MAX_MESSAGES,
    duplicate_window: nanos(DUPLICATE_WINDOW_MS),
  };
}

export type StreamSettings = Partial<JetStreamStreamConfig> & { name: string; subjects: string[] };
/** The settings an existing stream is updated to when they differ. */
const COMPARED = ['num_replicas', 'max_bytes', 'max_msg_size', 'max_age', 'max_msgs', 'max_msgs_per_subject', 'max_consumers'] as const;

export function isApiError(error: unknown, code: number): boolean {
  return error instanceof JetStreamApiError && error.code === code;
}

/** Makes the stream exist with these settings, updating one made with other limits; safe from any number of processes at once. */
export async function ensureStream(jsm: JetStreamManager, wanted: StreamSettings): Promise<void> {
  let current;
  try {
    current = (await jsm.streams.info(wanted.name)).config;
  } catch (error) {
    if (!isApiError(error, JetStreamApiCodes.StreamNotFound)) throw error;
    try {
      await jsm.streams.add(wanted);
      return;
    } catch (addError) {
      // Another process made it meanwhile: compare with what it made.
      current = (await jsm.streams.info(wanted.name).catch(() => Promise.reject(addError))).config;
    }
  }
  if (COMPARED.some((key) => wanted[key] !== undefined && current[key] !== wanted[key])) {
    await jsm.streams.update(wanted.name, { ...wanted });
  }
}

export function ensureTelemetryStream(jsm: JetStreamManager, stream: StreamConfig): Promise<void> {
  return ensureStream(jsm, telemetryStreamSettings(stream));
}

export function ensureDeadLetterStream(jsm: JetStreamManager, stream: StreamConfig): Promise<void> {
  return ensureStream(jsm, deadLetterStreamSettings(stream));
}

export async function ensureProcessingConsumer(jsm: JetStreamManager): Promise<void> {
  const ackWait = nanos(PROCESSING_ACK_WAIT_MS);
  try {
    const info = await jsm.consumers.info(TELEMETRY_STREAM, PROCESSING_CONSUMER);
    if (info.config.ack_wait !== ackWait) await jsm.consumers.update(TELEMETRY_STREAM, PROCESSING_CONSUMER, { ack_wait: ackWait });
    return;
  } catch (error) {
    if (!isApiError(error, JetStreamApiCodes.ConsumerNotFound)) throw error;
  }
  await jsm.consumers.add(TELEMETRY_STREAM, {
    durable_name: PROCESSING_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    ack_wait: ackWait,
    max_ack_pending: MAX_ACK_PENDING,
    max_deliver: -1,
  });
}
