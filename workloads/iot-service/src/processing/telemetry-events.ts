/**
 * processing's announcement of stored telemetry: each envelope of a committed batch becomes a
 * telemetry event in the stream EVENTS (shared/events.ts), which applications follow.
 *
 * Guarantees: `publishTelemetryEvents` publishes the envelopes in their order (the order they
 * were stored in) with shared/events.ts `publishEvents`: it resolves once the stream acknowledged
 * every one, publishing them all again until it has, or rejects once `signal` aborted. The caller
 * acknowledges a batch to the telemetry stream only afterwards, so a stored message whose event
 * was not published is handed out again, stored no second time, and its event published then:
 * every stored message is an event at least once. A message published again within the events
 * stream's duplicate window (its id `t/<device>/<message id>`) is kept once.
 */

import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { publishEvents, type TelemetryEvent } from '../shared/events.ts';
import type { Logger } from '../shared/log.ts';
import type { TelemetryEnvelope } from '../shared/telemetry.ts';

export interface TelemetryEventOptions {
  log: Logger;
  signal: AbortSignal;
  /** Called before each retry: the batch's deliveries are still being worked on. */
  onRetry?: () => void;
}

export async function publishTelemetryEvents(connection: NatsConnection, envelopes: readonly TelemetryEnvelope[], options: TelemetryEventOptions): Promise<void> {
  const js = jetstream(connection);
  const events = envelopes.map(({ deviceId, messageId, receivedAt, payload }): TelemetryEvent => ({ type: 'telemetry', deviceId, messageId, receivedAt, payload }));
  await publishEvents(() => js, events, {
    signal: options.signal,
    onFailure: (error, failures) => {
      options.onRetry?.();
      options.log.warn('stored telemetry not yet in the events stream; publishing again before acknowledging', { messages: envelopes.length, failures, error });
    },
  });
}
