/**
 * processing's notices of dead letters: for each message set aside in the table `dead_letters`, a
 * small message in the broker's stream `DEAD_LETTERS`, which the operator counts.
 *
 * Guarantees: the function `deadLetterNotices` returns is called for a dead letter already in the
 * table; it publishes `{ deviceId, messageId, error, failedAt }` — the error cut to
 * `NOTICE_ERROR_CHARS` characters, `failedAt` the time of the call (ISO 8601) — on the letter's
 * subject (broker.ts `deadLetterSubject`) with the JetStream message id `<device id>/<message id>`,
 * so a letter announced again within the stream's duplicate window (a batch handed out again)
 * is counted once. It returns at once and never throws: the publish runs in the background, and
 * one that fails (broker away, stream missing) is logged as a warning and not retried — the table
 * stays the record — so a notice never delays or loses telemetry.
 */

import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { brokerMessageId, deadLetterSubject } from '../shared/broker.ts';
import type { Logger } from '../shared/log.ts';
import type { DeadLetter } from '../shared/store.ts';

/** The most characters of a dead letter's error a notice carries. */
export const NOTICE_ERROR_CHARS = 500;

export interface DeadLetterNotice {
  /** Empty when the message was no envelope at all. */
  deviceId: string;
  messageId: string;
  error: string;
  failedAt: string;
}

export function deadLetterNotices(connection: NatsConnection, log: Logger): (letter: DeadLetter) => void {
  const js = jetstream(connection);
  return (letter) => {
    const notice: DeadLetterNotice = {
      deviceId: letter.deviceId,
      messageId: letter.messageId,
      error: letter.error.slice(0, NOTICE_ERROR_CHARS),
      failedAt: new Date().toISOString(),
    };
    js.publish(deadLetterSubject(letter.deviceId), JSON.stringify(notice), { msgID: brokerMessageId(letter.deviceId, letter.messageId) }).catch((error: unknown) =>
      log.warn('dead-letter notice not published; the letter is in the table', { device: letter.deviceId, messageId: letter.messageId, error }),
    );
  };
}
