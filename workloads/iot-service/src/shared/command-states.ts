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
 * Guarantees: `create` stores a command's first record and fails if the command has one; it
 * returns the record with its sequence. `advance` moves a record on only from a state that is not
 * final (and `delivered` only from `queued`), with compare-and-set on the subject's last sequence,
 * so of two writers racing (the device's PUBACK and its answer) neither overwrites a later state;
 * it returns the record now stored, or undefined for an unknown command (or, given `deviceId`, one
 * of another device). `advanceFrom(stored, change)` does the same from a record its caller knows
 * with its sequence (the `queued` one `create` returned, or one it wrote itself) in a single write
 * conditioned on that sequence: when the command's record moved on since, it reads the record as
 * `advance` does, so a late `delivered` never overwrites `succeeded`. `get` returns the record as
 * it stands: a `queued` one past its expiry reads `expired`, whether or not a gateway has seen it
 * yet.
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

/** A record with its sequence on the stream. */
export interface StoredRecord {
  record: CommandRecord;
  seq: number;
}

/** A command's first record. */
export function queuedRecord(command: Command): CommandRecord {
  return { ...command, state: 'queued', attempts: 0, updatedAt: new Date().toISOString() };
}

/** Whether `change` may follow `record`: not after a final state, and `delivered` only after `queued`. */
function movesOn(record: CommandRecord, change: CommandChange): boolean {
  return !isFinal(record.state) && (change.state !== 'delivered' || record.state === 'queued');
}

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

  async create(command: Command): Promise<StoredRecord> {
    const record = queuedRecord(command);
    const ack = await this.js.publish(stateSubject(command.id), JSON.stringify(record), { expect: { lastSubjectSequence: 0 } });
    return { record, seq: ack.seq };
  }

  async get(commandId: string): Promise<CommandRecord | undefined> {
    const found = await this.read(commandId);
    return found && standing(found.record);
  }

  async advance(commandId: string, change: CommandChange, deviceId?: string): Promise<CommandRecord | undefined> {
    return (await this.advanceRead(commandId, change, deviceId))?.record;
  }

  async advanceFrom(stored: StoredRecord, change: CommandChange): Promise<StoredRecord | undefined> {
    if (isFinal(stored.record.state)) return stored; // nothing follows a final record
    const written = movesOn(stored.record, change) ? await this.write(stored, change) : undefined;
    return written ?? this.advanceRead(stored.record.id, change, stored.record.deviceId);
  }

  private async advanceRead(commandId: string, change: CommandChange, deviceId?: string): Promise<StoredRecord | undefined> {
    for (;;) {
      const found = await this.read(commandId);
      if (!found || (deviceId !== undefined && found.record.deviceId !== deviceId)) return undefined;
      if (!movesOn(found.record, change)) return found;
      const written = await this.write(found, change);
      if (written) return written;
    }
  }

  /** The record moved on by `change`, written only if `stored` is still the command's last; else undefined. */
  private async write({ record, seq }: StoredRecord, change: CommandChange): Promise<StoredRecord | undefined> {
    const next: CommandRecord = { ...record, ...change, updatedAt: new Date().toISOString() };
    try {
      const ack = await this.js.publish(stateSubject(record.id), JSON.stringify(next), { expect: { lastSubjectSequence: seq } });
      return { record: next, seq: ack.seq };
    } catch (error) {
      if (!isApiError(error, JetStreamApiCodes.StreamWrongLastSequence)) throw error;
      return undefined;
    }
  }

  private async read(commandId: string): Promise<StoredRecord | undefined> {
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
