/**
 * The state of each command, kept on the broker's stream COMMAND_STATES: one subject per command
 * (`commandstates.<command id>`) holding only its newest record, for a day beyond the longest TTL.
 *
 * States: `queued` (waiting for its device), `delivered` (the device acknowledged it: the MQTT
 * PUBACK, or the HTTP response carrying it written), `succeeded` / `failed` (the device's answer,
 * status 2xx / other; `failed` also when the device acknowledged none of 1 + `retries`
 * deliveries), `expired` (not delivered before its TTL). `succeeded`, `failed` and `expired` are
 * final.
 *
 * Guarantees: `create` stores a command's first record and fails if the command has one;
 * `advance` moves a record on only from a state that is not final (and `delivered` only from
 * `queued`), with compare-and-set on the subject's last sequence, so of two writers racing (the
 * device's PUBACK and its answer) neither overwrites a later state; it returns the record now
 * stored, or undefined for an unknown command (or, given `deviceId`, one of another device). `get` returns the record as it stands: a `queued`
 * one past its expiry reads `expired`, whether or not a gateway has seen it yet.
 * `ensureCommandStateStream` makes the stream exist (limits retention, the newest message per
 * subject, file storage, the telemetry stream's replicas).
 */

import { DiscardPolicy, JetStreamApiCodes, RetentionPolicy, StorageType, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureStream, isApiError, nanos } from './broker.ts';
import { MAX_TTL_SECONDS, type Command } from './commands.ts';
import type { StreamConfig } from './config.ts';

export const COMMAND_STATE_STREAM = 'COMMAND_STATES';
export const COMMAND_STATE_SUBJECTS = 'commandstates.>';
const KEPT_AFTER_TTL_SECONDS = 24 * 60 * 60;

export type CommandState = 'queued' | 'delivered' | 'succeeded' | 'failed' | 'expired';
const FINAL: ReadonlySet<CommandState> = new Set(['succeeded', 'failed', 'expired']);

export interface CommandRecord extends Command {
  state: CommandState;
  /** Deliveries to the device so far. */
  attempts: number;
  updatedAt: string;
  /** The device's answer. */
  status?: number;
  response?: unknown;
  /** Why it failed or expired. */
  reason?: string;
}

export type CommandChange = Pick<CommandRecord, 'state'> & Partial<Pick<CommandRecord, 'attempts' | 'status' | 'response' | 'reason'>>;

export function stateSubject(commandId: string): string {
  return `commandstates.${commandId}`;
}

export function decodeRecord(bytes: Uint8Array): CommandRecord {
  return JSON.parse(Buffer.from(bytes).toString('utf8')) as CommandRecord;
}

export function isFinal(state: CommandState): boolean {
  return FINAL.has(state);
}

/** The record as it stands at `now`. */
export function standing(record: CommandRecord, now = Date.now()): CommandRecord {
  return record.state === 'queued' && now >= Date.parse(record.expiresAt) ? { ...record, state: 'expired', reason: 'not delivered within its TTL' } : record;
}

export class CommandStates {
  private readonly js: JetStreamClient;
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(private readonly connection: NatsConnection) {
    this.js = jetstream(connection);
  }

  async create(command: Command): Promise<CommandRecord> {
    const record: CommandRecord = { ...command, state: 'queued', attempts: 0, updatedAt: new Date().toISOString() };
    await this.js.publish(stateSubject(command.id), JSON.stringify(record), { expect: { lastSubjectSequence: 0 } });
    return record;
  }

  async get(commandId: string): Promise<CommandRecord | undefined> {
    const found = await this.read(commandId);
    return found && standing(found.record);
  }

  async advance(commandId: string, change: CommandChange, deviceId?: string): Promise<CommandRecord | undefined> {
    for (;;) {
      const found = await this.read(commandId);
      if (!found || (deviceId !== undefined && found.record.deviceId !== deviceId)) return undefined;
      const { record, seq } = found;
      if (isFinal(record.state) || (change.state === 'delivered' && record.state !== 'queued')) return record;
      const next: CommandRecord = { ...record, ...change, updatedAt: new Date().toISOString() };
      try {
        await this.js.publish(stateSubject(commandId), JSON.stringify(next), { expect: { lastSubjectSequence: seq } });
        return next;
      } catch (error) {
        if (!isApiError(error, JetStreamApiCodes.StreamWrongLastSequence)) throw error;
      }
    }
  }

  private async read(commandId: string): Promise<{ record: CommandRecord; seq: number } | undefined> {
    this.jsm ??= jetstreamManager(this.connection, { checkAPI: false });
    const message = await (await this.jsm).streams.getMessage(COMMAND_STATE_STREAM, { last_by_subj: stateSubject(commandId) });
    return message ? { record: decodeRecord(message.data), seq: message.seq } : undefined;
  }
}

export function ensureCommandStateStream(jsm: JetStreamManager, stream: StreamConfig): Promise<void> {
  return ensureStream(jsm, {
    name: COMMAND_STATE_STREAM,
    subjects: [COMMAND_STATE_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: stream.replicas,
    max_msgs_per_subject: 1,
    max_age: nanos((MAX_TTL_SECONDS + KEPT_AFTER_TTL_SECONDS) * 1000),
  });
}
