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
 * consuming goes on). Its pull requests live PULL_EXPIRES_MS: a request lost with the broker that
 * held the consumer's leader (a broker restarted, a roll of three brokers) is noticed after two
 * missed heartbeats (half of that each), and nats.js's consume then asks whether the consumer
 * exists and pulls again, asking again after about PULL_EXPIRES_MS (jittered, 0.5–1.5 times) while
 * the broker cannot answer (its leaders being elected): pulling resumes seconds after the brokers
 * do. A consumer the broker lost meanwhile is pulled from again the same way once core made it
 * again. What the client reports of it (heartbeats missed, the consumer or stream not found, no
 * responders) is logged. It resolves once `signal` aborted and what it had received but not
 * acknowledged — written or not, the last pull's messages too — was handed back (handed out again
 * at once, not after the consumer's ack wait) and rejects when the broker ended the consumer otherwise.
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
/**
 * How long a pull request lives (nats.js's `expires`, its heartbeat half of it). nats.js's default,
 * 30 s, also set its wait between checks of the consumer after a reconnect or missed heartbeats:
 * 15–45 s each, and processing stored nothing for 57 s while three brokers rolled
 * (database-failover.e2e's upgrade). With 5 s, a pull lost when a broker left was noticed 6.5 s
 * later (nats.js answers the broker's `409 Leadership Change` by waiting for two missed
 * heartbeats) and a failed check waited 2.5–7.5 s. 2 s: noticed after about 2 s, checked again
 * after 1–3 s.
 */
export const PULL_EXPIRES_MS = 2_000;
/** The consumer's reports worth a log line: what stops or delays pulling. */
const REPORTED: ReadonlySet<string> = new Set(['heartbeats_missed', 'consumer_not_found', 'stream_not_found', 'consumer_deleted', 'no_responders']);

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
  const messages = await consumer.consume({ max_messages: 2 * MAX_BATCH, expires: PULL_EXPIRES_MS });
  void (async () => {
    for await (const status of messages.status()) if (REPORTED.has(status.type)) log.warn('telemetry consumer', { ...status });
  })().catch(() => undefined);
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
  if (signal.aborted) {
    // What the last pull brought, yielded until the iterator closed, is handed back (writer.ts), and the broker has those answers before the connection closes.
    stop(); // closed already unless the abort came before its listener
    await messages.closed().catch(() => undefined);
    await connection.flush().catch(() => undefined);
  }
  if (!signal.aborted) throw new Error('the broker ended the consumer');
}
