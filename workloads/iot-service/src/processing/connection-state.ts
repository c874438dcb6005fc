/**
 * processing keeps each device's connection state (what core's device resource shows) from the
 * connection events the gateways publish to the stream EVENTS.
 *
 * Guarantees: `keepConnectionState` waits until the durable consumer `connections` exists (core
 * makes it: shared/events.ts `ensureConnectionsConsumer`), looking again every second, then hands
 * each connection event to the store's `recordConnection` in the stream's order and acknowledges it
 * only once recorded, retrying a failed write until it succeeds (at most a second apart); every
 * processing replica shares the consumer. A message that is no connection event is logged and
 * acknowledged (it would never record). It resolves once `signal` aborted and rejects when the
 * broker ended the consumer otherwise.
 */

import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { CONNECTIONS_CONSUMER, EVENTS_STREAM, type ConnectionEvent } from '../shared/events.ts';
import type { Logger } from '../shared/log.ts';
import { retry } from '../shared/retry.ts';
import type { ConnectionStateStore } from '../shared/store.ts';
import { isDeviceId } from '../shared/telemetry.ts';
import { writeRetryDelay } from './writer.ts';

function decodeConnectionEvent(text: string): ConnectionEvent | undefined {
  try {
    const event = JSON.parse(text) as Partial<ConnectionEvent>;
    const valid =
      event.type === 'connection' &&
      isDeviceId(event.deviceId) &&
      typeof event.connectionId === 'string' &&
      (event.state === 'connected' || event.state === 'disconnected' || event.state === 'refused') &&
      typeof event.at === 'string' &&
      !Number.isNaN(Date.parse(event.at));
    return valid ? (event as ConnectionEvent) : undefined;
  } catch {
    return undefined;
  }
}

export async function keepConnectionState(connection: NatsConnection, options: { store: ConnectionStateStore; log: Logger; signal: AbortSignal }): Promise<void> {
  const { store, log, signal } = options;
  const consumer = await retry(() => jetstream(connection).consumers.get(EVENTS_STREAM, CONNECTIONS_CONSUMER), {
    signal,
    delayMs: () => 1_000,
    onFailure: (error, failures) => log.warn('the connection events\' consumer is not there (core makes it); looking again', { error, failures }),
  });
  const messages = await consumer.consume();
  const stop = () => void messages.close().catch(() => undefined);
  signal.addEventListener('abort', stop, { once: true });
  try {
    for await (const message of messages) {
      const event = decodeConnectionEvent(message.string());
      if (!event) {
        log.error('not a connection event; acknowledged without recording', { subject: message.subject, seq: message.seq });
      } else {
        await retry(() => store.recordConnection(event), {
          signal,
          delayMs: writeRetryDelay,
          onFailure: (error, failures) => {
            message.working();
            log.warn('connection state not recorded; retrying before acknowledging', { device: event.deviceId, failures, error });
          },
        });
      }
      message.ack();
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  } finally {
    signal.removeEventListener('abort', stop);
  }
  if (!signal.aborted) throw new Error('the broker ended the connection events\' consumer');
}
