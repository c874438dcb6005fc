/**
 * processing's link to the broker: the durable consumer of the telemetry stream, written batch by
 * batch.
 *
 * Guarantees: `consumeTelemetry` makes sure the telemetry stream and the durable consumer
 * `processing` exist (retrying until the broker accepts; every processing replica shares that
 * consumer, each message going to one of them), then writes what it is handed with
 * writer.ts's `consumeInBatches` and `writeBatch`, acknowledging each message after its batch
 * committed, and calls `onConsuming` once it consumes. A dead letter, once in the table, is
 * announced in the stream `DEAD_LETTERS` (dead-letter-notices.ts); that stream is made once
 * before consuming starts and again at every check, and a broker that refuses it gets a warning
 * logged while consuming goes on without it. Every CHECK_INTERVAL_MS it checks that the streams
 * and the consumer are still there and makes them again if the broker lost them. It resolves
 * once `signal` aborted (what it had not acknowledged is handed out again) and rejects when the
 * broker ended the consumer otherwise.
 */

import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureDeadLetterStream, ensureProcessingConsumer, ensureTelemetryStream, PROCESSING_CONSUMER, TELEMETRY_STREAM } from '../shared/broker.ts';
import type { StreamConfig } from '../shared/config.ts';
import type { Logger } from '../shared/log.ts';
import { retry } from '../shared/retry.ts';
import type { TelemetryStore } from '../shared/store.ts';
import { deadLetterNotices } from './dead-letter-notices.ts';
import { consumeInBatches, writeBatch, type WriteProgress } from './writer.ts';

/** Most messages written in one statement. */
export const MAX_BATCH = 500;
const CHECK_INTERVAL_MS = 10_000;

export interface ConsumeOptions {
  stream: StreamConfig;
  store: TelemetryStore;
  log: Logger;
  signal: AbortSignal;
  onConsuming?: () => void;
  /** Kept up to date with how writing keeps up (writer.ts). */
  progress?: WriteProgress;
  /** Wait before retrying a failed write (default: retry.ts's backoff). */
  delayMs?: (failures: number) => number;
}

export async function consumeTelemetry(connection: NatsConnection, options: ConsumeOptions): Promise<void> {
  const { store, log, signal } = options;
  const ensureResources = async () => {
    const jsm = await jetstreamManager(connection);
    await ensureTelemetryStream(jsm, options.stream);
    await ensureProcessingConsumer(jsm);
    // Never a reason to wait: without it, dead letters only go unannounced.
    await ensureDeadLetterStream(jsm, options.stream).catch((error: unknown) =>
      log.warn('dead-letter stream not ready; dead letters go unannounced until it is', { error }),
    );
  };
  await retry(ensureResources, { signal, onFailure: (error, failures) => log.warn('telemetry stream not ready; retrying', { error, failures }) });
  const checks = setInterval(() => {
    ensureResources().catch((error: unknown) => log.warn('telemetry stream check failed', { error }));
  }, CHECK_INTERVAL_MS);
  try {
    const onDeadLetter = deadLetterNotices(connection, log);
    const consumer = await jetstream(connection).consumers.get(TELEMETRY_STREAM, PROCESSING_CONSUMER);
    const messages = await consumer.consume({ max_messages: 2 * MAX_BATCH });
    const stop = () => void messages.close().catch(() => undefined);
    signal.addEventListener('abort', stop, { once: true });
    options.onConsuming?.();
    log.info('consuming', { stream: TELEMETRY_STREAM, consumer: PROCESSING_CONSUMER });
    await consumeInBatches(messages, (batch) => writeBatch(batch, { store, log, signal, delayMs: options.delayMs, onDeadLetter }), { maxBatch: MAX_BATCH, signal, progress: options.progress });
    signal.removeEventListener('abort', stop);
    if (!signal.aborted) throw new Error('the broker ended the consumer');
  } finally {
    clearInterval(checks);
  }
}
