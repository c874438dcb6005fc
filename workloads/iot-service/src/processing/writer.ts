/**
 * processing's core: messages from the telemetry stream are written to the database in batches,
 * and each is acknowledged to the stream only after its batch committed.
 *
 * Guarantees: `writeBatch` stores a batch of deliveries and resolves once every one of them may be
 * acknowledged (the caller then acknowledges them); it rejects only once `signal` aborted, and
 * then acknowledges nothing, so the stream hands those messages out again. Envelopes are stored
 * in one statement keyed by (device id, message id), so a redelivered message is stored once.
 * When the database refuses the batch for its data (store.ts `isDataError`), the messages are
 * written one by one and each one refused for its data goes to the dead-letter table with the
 * error (as does a message that is no telemetry envelope): it is counted, logged, handed to
 * `onDeadLetter` once its batch's writes are done (once per letter per `writeBatch`, however often
 * the write was retried) and acknowledged, and never holds up the next. Every other failure (connection, server, disk) is retried, the
 * whole batch, until it succeeds, at most a second apart by default (WRITE_RETRY_MAX_MS), so writes
 * resume within a second of the database taking them again (after a failover, a switchover). `consumeInBatches` takes deliveries from the stream as they
 * come and hands them to `write` in batches of at most `maxBatch`: whatever arrived while the
 * previous batch was written, so a batch is one message at a low rate and `maxBatch` under load;
 * it holds at most `2 × maxBatch` unwritten deliveries, reading no further until there is room.
 * While a batch's write is retried its deliveries are kept from being handed out again; on a stop
 * every unwritten delivery it holds is handed back at once. `WriteProgress` tells how long
 * messages have waited with no batch written (processing's readiness fails past a minute).
 */

import { createHash } from 'node:crypto';
import type { Logger } from '../shared/log.ts';
import { backoff, retry } from '../shared/retry.ts';
import { isDataError, type DeadLetter, type TelemetryStore } from '../shared/store.ts';
import { decodeEnvelope, type TelemetryEnvelope } from '../shared/telemetry.ts';

/** A message handed out by the stream: its bytes and how to answer for it. */
export interface Delivery {
  data: Uint8Array;
  /** Done: the stream drops it. */
  ack(): void;
  /** Not done: the stream hands it out again at once. */
  nak(): void;
  /** Still at it: the stream waits its whole acknowledgement time again before handing it out again. */
  working(): void;
}

/** The longest wait between two attempts of a batch's write. */
export const WRITE_RETRY_MAX_MS = 1_000;

/** How long a batch's write waits after its `failures`-th failure: retry.ts's backoff, at most WRITE_RETRY_MAX_MS. */
export function writeRetryDelay(failures: number): number {
  return Math.min(backoff(failures), WRITE_RETRY_MAX_MS);
}

export interface WriterOptions {
  store: TelemetryStore;
  log: Logger;
  signal: AbortSignal;
  /** Wait before retrying a failed write; default `writeRetryDelay`. */
  delayMs?: (failures: number) => number;
  /** Told of each dead letter once it is in the table; returns at once (dead-letter-notices.ts). */
  onDeadLetter?: (letter: DeadLetter) => void;
}

export interface BatchOutcome {
  /** Rows added. */
  stored: number;
  /** Messages stored before (redeliveries). */
  duplicates: number;
  /** Messages kept in the dead-letter table. */
  deadLetters: number;
  /** The envelopes in the telemetry table now (stored by this batch or before), in the batch's order. */
  kept: TelemetryEnvelope[];
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Inserts the envelopes; those the database refuses for their data come back as dead letters, the rest are stored. */
async function insertOrSetAside(store: TelemetryStore, items: Array<{ envelope: TelemetryEnvelope; bytes: Uint8Array }>): Promise<{ stored: number; refused: DeadLetter[] }> {
  try {
    return { stored: await store.insertTelemetry(items.map((i) => i.envelope)), refused: [] };
  } catch (error) {
    if (!isDataError(error)) throw error;
    if (items.length === 1) {
      const { envelope, bytes } = items[0]!;
      return { stored: 0, refused: [{ deviceId: envelope.deviceId, messageId: envelope.messageId, bytes, error: errorText(error) }] };
    }
  }
  let stored = 0;
  const refused: DeadLetter[] = [];
  for (const item of items) {
    const one = await insertOrSetAside(store, [item]);
    stored += one.stored;
    refused.push(...one.refused);
  }
  return { stored, refused };
}

export async function writeBatch(deliveries: readonly Delivery[], options: WriterOptions): Promise<BatchOutcome> {
  options.signal.throwIfAborted();
  const items: Array<{ envelope: TelemetryEnvelope; bytes: Uint8Array }> = [];
  const malformed: DeadLetter[] = [];
  for (const { data } of deliveries) {
    try {
      items.push({ envelope: decodeEnvelope(Buffer.from(data)), bytes: data });
    } catch (error) {
      malformed.push({ deviceId: '', messageId: createHash('sha256').update(data).digest('hex'), bytes: data, error: errorText(error) });
    }
  }
  const outcome = await retry(
    async () => {
      const { stored, refused } = items.length > 0 ? await insertOrSetAside(options.store, items) : { stored: 0, refused: [] };
      const deadLetters = [...malformed, ...refused];
      for (const letter of deadLetters) await options.store.deadLetter(letter);
      const refusedKeys = new Set(refused.map((letter) => `${letter.deviceId}/${letter.messageId}`));
      const kept = items.map((i) => i.envelope).filter((e) => !refusedKeys.has(`${e.deviceId}/${e.messageId}`));
      return { stored, duplicates: items.length - stored - refused.length, deadLetters, kept };
    },
    {
      signal: options.signal,
      delayMs: options.delayMs ?? writeRetryDelay,
      onFailure: (error, failures) => {
        for (const delivery of deliveries) delivery.working();
        options.log.warn('write failed; retrying before acknowledging', { messages: deliveries.length, failures, error });
      },
    },
  );
  for (const letter of outcome.deadLetters) {
    options.log.error('message set aside: the database cannot store it', { device: letter.deviceId, messageId: letter.messageId, error: letter.error });
    options.onDeadLetter?.(letter);
  }
  return { stored: outcome.stored, duplicates: outcome.duplicates, deadLetters: outcome.deadLetters.length, kept: outcome.kept };
}

/** Whether writing keeps up: how long messages have waited with no batch written meanwhile. */
export class WriteProgress {
  private waitingSince: number | undefined;

  /** A message arrived to be written. */
  arrived(now = Date.now()): void {
    this.waitingSince ??= now;
  }

  /** A batch was written; `more` says whether messages still wait. */
  written(more: boolean, now = Date.now()): void {
    this.waitingSince = more ? now : undefined;
  }

  /** How long messages have waited with no batch written: 0 while none wait. */
  stalledForMs(now = Date.now()): number {
    return this.waitingSince === undefined ? 0 : now - this.waitingSince;
  }
}

/**
 * Writes what `source` delivers, batch after batch, until the source ends (rejecting with the
 * source's error if it failed) or `signal` aborts; each delivery is acknowledged after its batch
 * was written, and what is unwritten at a stop is handed back, as is what the source yields after
 * the stop. The caller stops the source when it aborts.
 */
export async function consumeInBatches(
  source: AsyncIterable<Delivery>,
  write: (batch: Delivery[]) => Promise<unknown>,
  options: { maxBatch: number; signal: AbortSignal; progress?: WriteProgress },
): Promise<void> {
  const waiting: Delivery[] = [];
  let ended = false;
  let failure: unknown;
  let arrived: (() => void) | undefined;
  let room: (() => void) | undefined;
  const wake = () => {
    arrived?.();
    room?.();
  };
  options.signal.addEventListener('abort', wake, { once: true });
  void (async () => {
    try {
      for await (const delivery of source) {
        // Stopped, the source still yields what it had received until the caller's stop ends it
        // (nats.js: what the last pull brought): handed back at once, not left to the broker's ack wait.
        if (options.signal.aborted) {
          delivery.nak();
          continue;
        }
        waiting.push(delivery);
        options.progress?.arrived();
        arrived?.();
        while (waiting.length >= 2 * options.maxBatch && !options.signal.aborted) await new Promise<void>((resolve) => (room = resolve));
      }
    } catch (error) {
      failure = error;
    } finally {
      ended = true;
      arrived?.();
    }
  })();
  while (!options.signal.aborted) {
    if (waiting.length === 0) {
      if (ended) break;
      await new Promise<void>((resolve) => (arrived = resolve));
      continue;
    }
    const batch = waiting.splice(0, options.maxBatch);
    room?.();
    try {
      await write(batch);
    } catch (error) {
      if (!options.signal.aborted) throw error;
      waiting.unshift(...batch);
      break;
    }
    for (const delivery of batch) delivery.ack();
    options.progress?.written(waiting.length > 0);
  }
  for (const delivery of waiting.splice(0)) delivery.nak();
  options.signal.removeEventListener('abort', wake);
  if (failure !== undefined && !options.signal.aborted) throw failure;
}
