/**
 * processing's announcement of stored telemetry: each envelope of a committed batch becomes a
 * telemetry event in the stream EVENTS (shared/events.ts), which applications follow.
 *
 * Guarantees: `publishTelemetryEvents` publishes the envelopes in their order (the order they
 * were stored in), all at once, and resolves once the stream acknowledged every one; if any is
 * not acknowledged (the broker away, the stream missing) it publishes the whole list again, at
 * most a second apart, until every one is, or rejects once `signal` aborted. The caller
 * acknowledges a batch to the telemetry stream only afterwards, so a stored message whose event
 * was not published is handed out again, stored no second time, and its event published then:
 * every stored message is an event at least once. A message published again within the events
 * stream's duplicate window (its id `t/<device>/<message id>`) is kept once.
 */

import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { encodeEvent, eventMessageId, telemetryEventSubject, type TelemetryEvent } from '../shared/events.ts';
import type { Logger } from '../shared/log.ts';
import { retry } from '../shared/retry.ts';
import type { TelemetryEnvelope } from '../shared/telemetry.ts';
import { writeRetryDelay } from './writer.ts';

export interface TelemetryEventOptions {
  log: Logger;
  signal: AbortSignal;
  /** Called before each retry: the batch's deliveries are still being worked on. */
  onRetry?: () => void;
}

export async function publishTelemetryEvents(connection: NatsConnection, envelopes: readonly TelemetryEnvelope[], options: TelemetryEventOptions): Promise<void> {
  if (envelopes.length === 0) return;
  const js = jetstream(connection);
  await retry(
    async () => {
      const published = envelopes.map((envelope) => {
        const event: TelemetryEvent = { type: 'telemetry', deviceId: envelope.deviceId, messageId: envelope.messageId, receivedAt: envelope.receivedAt, payload: envelope.payload };
        return js.publish(telemetryEventSubject(envelope.deviceId), encodeEvent(event), { msgID: eventMessageId(event) });
      });
      const failed = (await Promise.allSettled(published)).find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
    },
    {
      signal: options.signal,
      delayMs: writeRetryDelay,
      onFailure: (error, failures) => {
        options.onRetry?.();
        options.log.warn('stored telemetry not yet in the events stream; publishing again before acknowledging', { messages: envelopes.length, failures, error });
      },
    },
  );
}
