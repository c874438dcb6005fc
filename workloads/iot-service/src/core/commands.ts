/**
 * core's side of commands to devices (shared/commands.ts): `POST /v1/devices/<id>/commands` and
 * `GET /v1/devices/<id>/commands/<command id>`, reached through api.ts once the caller is
 * admitted there.
 *
 * Guarantees: a POST `{"name", "payload"?, "ttlSeconds"?, "retries"?, "responseTimeoutSeconds"?}`
 * (name: 1–64 of A-Z a-z 0-9 . _ : -; payload any JSON value, default null; ttlSeconds 1..86400,
 * default 300; retries 0..10, default 3; responseTimeoutSeconds 1..60) is checked first (400 with
 * the reason), then the device (404 unknown), this core replica's command rate (429 with
 * `Retry-After` beyond it: `perSecond` a second after a burst of as many; the api counts every
 * command of this core process) and the broker (503 with `Retry-After: 1` while core is not
 * connected to it); then its record `queued` is stored and the command put on the stream, and only
 * then answered: 202 `{"commandId", "state": "queued"}` — or, with responseTimeoutSeconds, the
 * request is held until the device answered, the command failed or expired, or the timeout: 200
 * with the record (its `status` and `response` the device's), else 504 with the record as it
 * stands (the command keeps going: read it later with GET). A GET answers 200 with the record
 * (`commandId`, `deviceId`, `name`, `state`, `attempts`, `createdAt`, `expiresAt`, `updatedAt`,
 * and `status`, `response`, `reason` once known); an id that is no command of that device → 404.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { CommandStates, isFinal, type CommandRecord } from '../shared/command-states.ts';
import {
  commandSubject,
  DEFAULT_RETRIES,
  DEFAULT_TTL_SECONDS,
  encodeCommand,
  isCommandId,
  isCommandName,
  MAX_RESPONSE_TIMEOUT_SECONDS,
  MAX_RETRIES,
  MAX_TTL_SECONDS,
  newCommandId,
  type Command,
} from '../shared/commands.ts';
import { HttpError, readJson, sendJson } from '../shared/http.ts';
import type { Logger } from '../shared/log.ts';
import type { DeviceStore } from '../shared/store.ts';
import { isDeviceId } from '../shared/telemetry.ts';
import { TokenBuckets } from '../shared/token-buckets.ts';
import { CommandWaits } from './command-waits.ts';
import { RecentAnswers } from './recent-answers.ts';

/** Commands a second each core replica accepts by default (and as many at once). */
export const DEFAULT_COMMAND_RATE = 500;

/** The command rate of IOT_COMMANDS_PER_SECOND (a whole number ≥ 1), or undefined when unset. */
export function commandRate(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const value = env.IOT_COMMANDS_PER_SECOND;
  if (!value) return undefined;
  if (!/^\d{1,9}$/.test(value) || Number(value) < 1) throw new Error(`IOT_COMMANDS_PER_SECOND must be a whole number of commands a second, got ${JSON.stringify(value)}`);
  return Number(value);
}

/**
 * How long a device found in the store counts as registered without asking again: another core
 * replica's deletion of it is seen within this (this replica's own at once).
 */
export const DEVICE_KNOWN_MS = 2_000;

export interface CommandsOptions {
  store: DeviceStore;
  log: Logger;
  /** Commands a second (default DEFAULT_COMMAND_RATE). */
  perSecond?: number;
}

function wholeIn(body: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const value = body[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new HttpError(400, `${key} must be a whole number from ${min} to ${max}`);
  return value;
}

/** The API's view of a record. */
function shown({ id, payload: _payload, ...rest }: CommandRecord): Record<string, unknown> {
  return { commandId: id, ...rest };
}

export class Commands {
  private connection: NatsConnection | undefined;
  private js: JetStreamClient | undefined;
  private states: CommandStates | undefined;
  private waits: CommandWaits | undefined;
  private readonly rate: TokenBuckets;
  /** Devices found registered (only those: a device registered is found at once). */
  private readonly known = new RecentAnswers<string, boolean>({ maxAgeMs: DEVICE_KNOWN_MS, maxEntries: 100_000 });

  constructor(private readonly options: CommandsOptions) {
    const perSecond = options.perSecond ?? DEFAULT_COMMAND_RATE;
    this.rate = new TokenBuckets({ capacity: perSecond, perSecond });
  }

  /** Commands go out over this connection from now on. */
  attach(connection: NatsConnection): void {
    this.waits?.close();
    this.connection = connection;
    this.js = jetstream(connection);
    this.states = new CommandStates(connection);
    this.waits = new CommandWaits(connection, this.options.log);
  }

  /** The device was deleted here: no command is taken for it from now on. */
  forget(deviceId: string): void {
    this.known.forget(deviceId);
  }

  close(): void {
    this.waits?.close();
  }

  private registered(deviceId: string): Promise<boolean> {
    return this.known.get(deviceId, async () => (await this.options.store.passwordHash(deviceId)) !== undefined, (found) => found);
  }

  async send(req: IncomingMessage, res: ServerResponse, deviceId: string): Promise<void> {
    const body = await readJson(req);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'body must be a JSON object');
    const fields = body as Record<string, unknown>;
    if (!isCommandName(fields.name)) throw new HttpError(400, 'name must be 1-64 characters of A-Z a-z 0-9 . _ : -');
    const ttlSeconds = wholeIn(fields, 'ttlSeconds', 1, MAX_TTL_SECONDS) ?? DEFAULT_TTL_SECONDS;
    const retries = wholeIn(fields, 'retries', 0, MAX_RETRIES) ?? DEFAULT_RETRIES;
    const responseTimeoutSeconds = wholeIn(fields, 'responseTimeoutSeconds', 1, MAX_RESPONSE_TIMEOUT_SECONDS);
    if (!isDeviceId(deviceId) || !(await this.registered(deviceId))) throw new HttpError(404, `no device ${deviceId}`);
    const waitMs = this.rate.take('replica');
    if (waitMs > 0) throw new HttpError(429, 'too many commands; send it again later', { 'Retry-After': String(Math.ceil(waitMs / 1000)) });
    const { connection, js, states, waits } = this;
    if (!connection || !js || !states || !waits || connection.isClosed()) throw new HttpError(503, 'core is not connected to the broker; send it again later', { 'Retry-After': '1' });

    const now = Date.now();
    const command: Command = {
      id: newCommandId(),
      deviceId,
      name: fields.name,
      payload: fields.payload ?? null,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + ttlSeconds * 1000).toISOString(),
      retries,
      responseRequired: responseTimeoutSeconds !== undefined,
    };
    const deadline = now + (responseTimeoutSeconds ?? 0) * 1000;
    // The wait starts before the first record is stored, so no record of the command is missed.
    let final: Promise<CommandRecord | undefined> | undefined;
    if (responseTimeoutSeconds !== undefined) {
      await this.waitReady(waits, deadline);
      final = waits.wait(command.id, deadline - Date.now());
    }
    await states.create(command);
    await js.publish(commandSubject(deviceId), encodeCommand(command), { msgID: command.id });
    this.options.log.info('command queued', { device: deviceId, command: command.id, name: command.name });
    if (final === undefined) return sendJson(res, 202, { commandId: command.id, state: 'queued' });
    const answered = await final;
    if (answered) return sendJson(res, 200, shown(answered));
    // Read once more: the final record may have been stored while the waits were not read (the broker away).
    const current = await states.get(command.id);
    if (current && isFinal(current.state)) return sendJson(res, 200, shown(current));
    sendJson(res, 504, { error: `no answer from the device within ${responseTimeoutSeconds} s`, ...(current ? shown(current) : { commandId: command.id }) });
  }

  async read(res: ServerResponse, deviceId: string, commandId: string): Promise<void> {
    if (!this.states) throw new HttpError(503, 'core is not connected to the broker; ask again later', { 'Retry-After': '1' });
    const record = isCommandId(commandId) ? await this.states.get(commandId) : undefined;
    if (!record || record.deviceId !== deviceId) throw new HttpError(404, `no command ${commandId} of device ${deviceId}`);
    sendJson(res, 200, shown(record));
  }

  /** Resolves once the waits read records, or at the deadline (then the final read answers). */
  private async waitReady(waits: CommandWaits, deadline: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([waits.ready, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(deadline - Date.now(), 0))))]);
    clearTimeout(timer);
  }
}
