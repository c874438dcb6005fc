/**
 * processing's link to the broker: the durable consumer of the telemetry stream, written batch by
 * batch.
 *
 * Guarantees: `consumeTelemetry` waits until the durable consumer `processing` exists (core makes
 * it, core/broker-resources.ts: processing's broker user may only use it, image/broker.sh),
 * looking again every second; every processing replica shares that consumer, each message going
 * to one of them. It then writes what it is handed with writer.ts's `consumeInBatches` and
 * `writeBatch`, publishing the batch's stored telemetry to the stream EVENTS
 * (telemetry-events.ts) and acknowledging each message only after both, and calls `onConsuming`
 * once it consumes. A dead letter, once in the table, is announced in the stream `DEAD_LETTERS`
 * (dead-letter-notices.ts; a notice the broker refuses — the stream missing — is logged while
 * consuming goes on). A consumer the broker lost meanwhile is pulled from again once core made it
 * again and the client's heartbeat check notices (tens of seconds: nats.js's consume). It
 * resolves once `signal` aborted (what it had not acknowledged is handed out again) and rejects
 * when the broker ended the consumer otherwise.
 */

import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { PROCESSING_CONSUMER, TELEMETRY_STREAM } from '../shared/broker.ts';
import type { Logger } from '../shared/log.ts';
import { retry } from '../shared/retry.ts';
import type { TelemetryStore } from '../shared/store.ts';
import { deadLetterNotices } from './dead-letter-notices.ts';
import { publishTelemetryEvents } from './telemetry-events.ts';
import { consumeInBatches, writeBatch, type Delivery, type WriteProgress } from './writer.ts';

/** Most messages written in one statement. */
export const MAX_BATCH = 500;
/** How long to wait before looking for the consumer again. */
const CONSUMER_WAIT_MS = 1_000;

export interface ConsumeOptions {
  store: TelemetryStore;
  log: Logger;
  signal: AbortSignal;
  onConsuming?: () => void;
  /** Kept up to date with how writing keeps up (writer.ts). */
  progress?: WriteProgress;
  /** Wait before retrying a failed write (default: writer.ts's, at most WRITE_RETRY_MAX_MS). */
  delayMs?: (failures: number) => number;
}

export async function consumeTelemetry(connection: NatsConnection, options: ConsumeOptions): Promise<void> {
  const { store, log, signal } = options;
  const consumer = await retry(() => jetstream(connection).consumers.get(TELEMETRY_STREAM, PROCESSING_CONSUMER), {
    signal,
    delayMs: () => CONSUMER_WAIT_MS,
    onFailure: (error, failures) => log.warn('the telemetry stream\'s consumer is not there (core makes it); looking again', { error, failures }),
  });
  const onDeadLetter = deadLetterNotices(connection, log);
  const messages = await consumer.consume({ max_messages: 2 * MAX_BATCH });
  const stop = () => void messages.close().catch(() => undefined);
  signal.addEventListener('abort', stop, { once: true });
  options.onConsuming?.();
  log.info('consuming', { stream: TELEMETRY_STREAM, consumer: PROCESSING_CONSUMER });
  const write = async (batch: Delivery[]) => {
    const { kept } = await writeBatch(batch, { store, log, signal, delayMs: options.delayMs, onDeadLetter });
    await publishTelemetryEvents(connection, kept, { log, signal, onRetry: () => batch.forEach((delivery) => delivery.working()) });
  };
  await consumeInBatches(messages, write, { maxBatch: MAX_BATCH, signal, progress: options.progress });
  signal.removeEventListener('abort', stop);
  if (!signal.aborted) throw new Error('the broker ended the consumer');
}
