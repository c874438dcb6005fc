/**
 * How core holds request/response commands (commands.ts) until their final state: one ordered
 * consumer per core process on the stream COMMAND_STATES reads every record stored from its start
 * on and hands each to the request waiting for that command, so a waiting request costs the
 * broker nothing of its own (a consumer per request cost four API requests each, and a stream
 * holds at most 1,000 consumers).
 *
 * Guarantees: `wait(commandId, timeoutMs)` registered before the command's first record is stored
 * (after `ready` resolved) resolves with the first final record stored for the command (as
 * `standing` reads it), or undefined after `timeoutMs`; only records the stream stored are seen
 * (a write it refused, a writer that lost the race of compare-and-set, never is). The consumer
 * starts after the stream's last record of the moment, and is made again from the last record
 * read whenever reading fails (every second until it works), so none is skipped while the
 * stream exists. `close` stops reading and ends every wait (undefined).
 */

import { jetstream, jetstreamManager, type ConsumerMessages } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { COMMAND_STATE_STREAM, COMMAND_STATE_SUBJECTS, decodeRecord, isFinal, standing, type CommandRecord } from '../shared/command-states.ts';
import type { Logger } from '../shared/log.ts';

const SUBJECT_PREFIX = COMMAND_STATE_SUBJECTS.slice(0, -1);

export class CommandWaits {
  /** Resolves once records are read (at once again after a failure: the next consumer starts where the last stopped). */
  readonly ready: Promise<void>;
  private readonly waiters = new Map<string, (record: CommandRecord | undefined) => void>();
  private readonly stopped = new AbortController();
  private messages: ConsumerMessages | undefined;

  constructor(connection: NatsConnection, log: Logger) {
    let started!: () => void;
    this.ready = new Promise((resolve) => (started = resolve));
    void (async () => {
      let nextSeq: number | undefined;
      while (!this.stopped.signal.aborted && !connection.isClosed()) {
        try {
          nextSeq ??= (await (await jetstreamManager(connection, { checkAPI: false })).streams.info(COMMAND_STATE_STREAM)).state.last_seq + 1;
          const consumer = await jetstream(connection).consumers.get(COMMAND_STATE_STREAM, { filter_subjects: [COMMAND_STATE_SUBJECTS], opt_start_seq: nextSeq });
          this.messages = await consumer.consume();
          started();
          if (this.stopped.signal.aborted) break;
          for await (const message of this.messages) {
            nextSeq = message.seq + 1;
            const resolve = this.waiters.get(message.subject.slice(SUBJECT_PREFIX.length));
            if (!resolve) continue;
            const record = standing(decodeRecord(message.data));
            if (isFinal(record.state)) resolve(record);
          }
        } catch (error) {
          if (this.stopped.signal.aborted) break;
          log.warn('command states not readable; trying again', { error });
          await sleep(1_000);
        } finally {
          await this.messages?.close().catch(() => undefined);
        }
      }
    })();
  }

  wait(commandId: string, timeoutMs: number): Promise<CommandRecord | undefined> {
    return new Promise((resolve) => {
      const done = (record: CommandRecord | undefined) => {
        clearTimeout(timer);
        this.waiters.delete(commandId);
        resolve(record);
      };
      const timer = setTimeout(() => done(undefined), Math.max(timeoutMs, 0));
      this.waiters.set(commandId, done);
    });
  }

  close(): void {
    this.stopped.abort();
    void this.messages?.close();
    for (const done of [...this.waiters.values()]) done(undefined);
  }
}
