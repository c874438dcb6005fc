/**
 * The instance's broker: NATS with JetStream, and the one stream telemetry travels in from the
 * gateway to processing.
 *
 * Guarantees: `connectBroker` connects as the service user and keeps reconnecting for as long as
 * the process runs (never giving up); `watchLink` says whether a connection is up now;
 * `ensureTelemetryStream` makes the stream `TELEMETRY` exist with the configuration of
 * config.yml's `stream` — file storage on the broker's volume,
 * `replicas` copies (1 or 3), work-queue retention (a message leaves the stream only once
 * processing acknowledged it, after its row committed), at most `maxBytes` held, and `discard:
 * new`, so a full stream refuses a publish instead of dropping anything it acknowledged; a
 * stream made before with other limits is updated to these. It is safe from any number of
 * processes at once. `ensureProcessingConsumer` does the same for the durable pull consumer all
 * processing replicas share: explicit acknowledgement, redelivery after `ACK_WAIT_MS` without one,
 * never giving up on a message. A device's message is on subject `telemetry.<device id>` with
 * every `.` of the id written `%2E`, so one device is one subject token; its JetStream message id
 * is `<device id>/<message id>`, so the stream stores a message the gateway publishes twice
 * within its duplicate window once.
 */

import type { JetStreamManager } from '@nats-io/jetstream';
import { AckPolicy, DiscardPolicy, JetStreamApiCodes, JetStreamApiError, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Endpoint, StreamConfig } from './config.ts';

export const TELEMETRY_STREAM = 'TELEMETRY';
export const TELEMETRY_SUBJECTS = 'telemetry.>';
export const PROCESSING_CONSUMER = 'processing';
/** How long processing holds a message without acknowledging it before the broker hands it out again. */
export const ACK_WAIT_MS = 30_000;
/** Messages handed to processing and not yet acknowledged, over all replicas together. */
export const MAX_ACK_PENDING = 20_000;
/** The largest message the stream takes: an envelope around the gateway's largest payload. */
export const MAX_MESSAGE_BYTES = 128 * 1024;
/** How long the stream remembers a message id to drop a second publish of it. */
const DUPLICATE_WINDOW_MS = 2 * 60_000;
const nanos = (ms: number) => ms * 1_000_000;

export function telemetrySubject(deviceId: string): string {
  return `telemetry.${deviceId.replaceAll('.', '%2E')}`;
}

export function brokerMessageId(deviceId: string, messageId: string): string {
  return `${deviceId}/${messageId}`;
}

export interface BrokerConnectOptions {
  broker: Endpoint;
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
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
    timeout: 5_000,
  });
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

function streamSettings(stream: StreamConfig) {
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

function isApiError(error: unknown, code: number): boolean {
  return error instanceof JetStreamApiError && error.code === code;
}

export async function ensureTelemetryStream(jsm: JetStreamManager, stream: StreamConfig): Promise<void> {
  const wanted = streamSettings(stream);
  let current;
  try {
    current = (await jsm.streams.info(TELEMETRY_STREAM)).config;
  } catch (error) {
    if (!isApiError(error, JetStreamApiCodes.StreamNotFound)) throw error;
    try {
      await jsm.streams.add(wanted);
      return;
    } catch (addError) {
      // Another process made it meanwhile: compare with what it made.
      current = (await jsm.streams.info(TELEMETRY_STREAM).catch(() => Promise.reject(addError))).config;
    }
  }
  if (current.num_replicas !== wanted.num_replicas || current.max_bytes !== wanted.max_bytes || current.max_msg_size !== wanted.max_msg_size) {
    await jsm.streams.update(TELEMETRY_STREAM, { ...wanted });
  }
}

export async function ensureProcessingConsumer(jsm: JetStreamManager): Promise<void> {
  try {
    await jsm.consumers.info(TELEMETRY_STREAM, PROCESSING_CONSUMER);
    return;
  } catch (error) {
    if (!isApiError(error, JetStreamApiCodes.ConsumerNotFound)) throw error;
  }
  await jsm.consumers.add(TELEMETRY_STREAM, {
    durable_name: PROCESSING_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(ACK_WAIT_MS),
    max_ack_pending: MAX_ACK_PENDING,
    max_deliver: -1,
  });
}
