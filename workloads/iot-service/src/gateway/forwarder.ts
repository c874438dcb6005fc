/**
 * The gateway's link to the broker: each accepted message is published to the telemetry stream
 * (shared/broker.ts) and the device is acknowledged only after the stream acknowledged it.
 *
 * Guarantees: `forward` resolves only once JetStream acknowledged the message — stored in the
 * stream's file store on as many brokers as the stream has replicas — and rejects otherwise: at
 * once when the link is not connected, with `BacklogFullError` when the stream is full (processing
 * lags by `stream.maxBytes`), or after `timeoutMs` (default 10 s) without an acknowledgement.
 * Within that time a publish not acknowledged after a second is published again, and so on
 * (broker.ts `publishAcknowledged`): a broker leaving in a roll drops what it was handed. A
 * rejected message is never acknowledged to the device, which sends it again; a message published
 * twice (these publishes, the device's retry, or a lost acknowledgement) is stored once in the
 * stream, by its JetStream message id. The link connects as the broker user `gateway`, which may publish
 * telemetry and read the stream's info, nothing more (image/broker.sh): core makes the stream
 * (core/broker-resources.ts). `connected` (the readiness check) says true once the stream was
 * found and while the link is up; after a publish found no stream (a broker that lost its volume,
 * until core makes it again) it says false and nothing is forwarded until the stream is found
 * again, looked for every second. The link reconnects by itself. With `deviceChanges` the link
 * follows core's device-change notices into it (device-changes.ts `followDeviceChanges`) from
 * before it says `connected` until it is closed.
 */

import { jetstream, jetstreamManager, JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { brokerMessageId, connectBroker, publishAcknowledged, TELEMETRY_STREAM, telemetrySubject, watchLink } from '../shared/broker.ts';
import { BROKER_USERS, type Endpoint } from '../shared/config.ts';
import { retry } from '../shared/retry.ts';
import { encodeEnvelope, type TelemetryEnvelope } from '../shared/telemetry.ts';
import { followDeviceChanges, type DeviceChangeTracker } from './device-changes.ts';

export type Forward = (envelope: TelemetryEnvelope) => Promise<void>;

/** The stream holds all it may: the device should slow down and send again later. */
export class BacklogFullError extends Error {}

export interface BrokerLink {
  forward: Forward;
  /** The JetStream client once connected (connection-events.ts publishes with it). */
  jetstream(): JetStreamClient | undefined;
  connected(): boolean;
  close(): Promise<void>;
}

export interface BrokerLinkOptions {
  broker: Endpoint;
  /** The password of broker user `gateway`. */
  password: string;
  /** How the broker lists this connection. */
  name: string;
  timeoutMs?: number;
  onError?: (error: unknown) => void;
  /** Told core's device-change notices. */
  deviceChanges?: DeviceChangeTracker;
}

/** How the client reports a publish nothing answered: no stream takes the subject (the client takes it for JetStream being off). */
const NO_STREAM = /jetstream is not enabled|no responders/i;

/** JetStream's answers when a `discard: new` stream is at a limit (stream store and account/server resources). */
const FULL = /maximum (bytes|messages) exceeded|insufficient resources|resource limits exceeded/i;

export function connectBrokerLink(options: BrokerLinkOptions): BrokerLink {
  let connection: NatsConnection | undefined;
  let js: JetStreamClient | undefined;
  let link: { readonly up: boolean } = { up: false };
  let streamReady = false;
  /** Looks for the stream until found: at start, and after a publish found none. */
  let findStream: ((delayMs?: () => number) => Promise<void>) | undefined;
  let unfollow: (() => void) | undefined;
  const closing = new AbortController();
  const preparing = (async () => {
    const made = await connectBroker({ broker: options.broker, user: BROKER_USERS.gateway, password: options.password, name: options.name });
    connection = made;
    if (closing.signal.aborted) return made.close();
    link = watchLink(made);
    if (options.deviceChanges) unfollow = followDeviceChanges(made, options.deviceChanges);
    js = jetstream(made);
    const jsm = await jetstreamManager(made, { checkAPI: false });
    findStream = async (delayMs) => {
      await retry(() => jsm.streams.info(TELEMETRY_STREAM), { signal: closing.signal, delayMs, onFailure: (error) => options.onError?.(error) });
      streamReady = true;
    };
    await findStream();
  })();
  preparing.catch((error: unknown) => {
    if (!closing.signal.aborted) options.onError?.(error);
  });
  return {
    forward: async (envelope) => {
      if (!js || !streamReady || !link.up) throw new Error('not connected to the broker');
      try {
        await publishAcknowledged(js, telemetrySubject(envelope.deviceId), encodeEnvelope(envelope), {
          msgID: brokerMessageId(envelope.deviceId, envelope.messageId),
          timeoutMs: options.timeoutMs ?? 10_000,
        });
      } catch (error) {
        if (error instanceof JetStreamApiError && FULL.test(error.message)) throw new BacklogFullError(error.message, { cause: error });
        if (NO_STREAM.test(String(error)) && findStream && streamReady) {
          streamReady = false;
          findStream(() => 1_000).catch((findError: unknown) => {
            if (!closing.signal.aborted) options.onError?.(findError);
          });
        }
        throw error;
      }
    },
    jetstream: () => js,
    connected: () => streamReady && link.up,
    close: async () => {
      closing.abort(new Error('closing'));
      if (!connection) return; // still dialling: it closes the connection once made
      await preparing.catch(() => undefined);
      unfollow?.();
      if (!connection.isClosed()) await connection.drain().catch(() => connection?.close());
    },
  };
}

