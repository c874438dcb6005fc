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
import { DeliverPolicy, jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { COMMAND_STATE_STREAM, CommandStates, decodeRecord, isFinal, standing, stateSubject, type CommandRecord } from '../shared/command-states.ts';
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

/** Commands a second each core replica accepts by default (and as many at once). */
export const DEFAULT_COMMAND_RATE = 500;

/** The command rate of IOT_COMMANDS_PER_SECOND (a whole number ≥ 1), or undefined when unset. */
export function commandRate(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const value = env.IOT_COMMANDS_PER_SECOND;
  if (!value) return undefined;
  if (!/^\d{1,9}$/.test(value) || Number(value) < 1) throw new Error(`IOT_COMMANDS_PER_SECOND must be a whole number of commands a second, got ${JSON.stringify(value)}`);
  return Number(value);
}

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
  private readonly rate: TokenBuckets;

  constructor(private readonly options: CommandsOptions) {
    const perSecond = options.perSecond ?? DEFAULT_COMMAND_RATE;
    this.rate = new TokenBuckets({ capacity: perSecond, perSecond });
  }

  /** Commands go out over this connection from now on. */
  attach(connection: NatsConnection): void {
    this.connection = connection;
    this.js = jetstream(connection);
    this.states = new CommandStates(connection);
  }

  async send(req: IncomingMessage, res: ServerResponse, deviceId: string): Promise<void> {
    const body = await readJson(req);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'body must be a JSON object');
    const fields = body as Record<string, unknown>;
    if (!isCommandName(fields.name)) throw new HttpError(400, 'name must be 1-64 characters of A-Z a-z 0-9 . _ : -');
    const ttlSeconds = wholeIn(fields, 'ttlSeconds', 1, MAX_TTL_SECONDS) ?? DEFAULT_TTL_SECONDS;
    const retries = wholeIn(fields, 'retries', 0, MAX_RETRIES) ?? DEFAULT_RETRIES;
    const responseTimeoutSeconds = wholeIn(fields, 'responseTimeoutSeconds', 1, MAX_RESPONSE_TIMEOUT_SECONDS);
    if (!isDeviceId(deviceId) || (await this.options.store.passwordHash(deviceId)) === undefined) throw new HttpError(404, `no device ${deviceId}`);
    const waitMs = this.rate.take('replica');
    if (waitMs > 0) throw new HttpError(429, 'too many commands; send it again later', { 'Retry-After': String(Math.ceil(waitMs / 1000)) });
    const { connection, js, states } = this;
    if (!connection || !js || !states || connection.isClosed()) throw new HttpError(503, 'core is not connected to the broker; send it again later', { 'Retry-After': '1' });

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
    await states.create(command);
    await js.publish(commandSubject(deviceId), encodeCommand(command), { msgID: command.id });
    this.options.log.info('command queued', { device: deviceId, command: command.id, name: command.name });
    if (responseTimeoutSeconds === undefined) return sendJson(res, 202, { commandId: command.id, state: 'queued' });
    const final = await this.finalState(js, command.id, deadline - Date.now());
    if (final) return sendJson(res, 200, shown(final));
    const current = await states.get(command.id);
    sendJson(res, 504, { error: `no answer from the device within ${responseTimeoutSeconds} s`, ...(current ? shown(current) : { commandId: command.id }) });
  }

  async read(res: ServerResponse, deviceId: string, commandId: string): Promise<void> {
    if (!this.states) throw new HttpError(503, 'core is not connected to the broker; ask again later', { 'Retry-After': '1' });
    const record = isCommandId(commandId) ? await this.states.get(commandId) : undefined;
    if (!record || record.deviceId !== deviceId) throw new HttpError(404, `no command ${commandId} of device ${deviceId}`);
    sendJson(res, 200, shown(record));
  }

  /**
   * The command's first final record stored within `timeoutMs`, else undefined: read from the
   * stream (its newest record, then each one stored after it), so a write the stream refused (a
   * writer that lost the race of compare-and-set) is never taken for the command's state. The
   * consumer it reads with is deleted once it is done.
   */
  private async finalState(js: JetStreamClient, commandId: string, timeoutMs: number): Promise<CommandRecord | undefined> {
    const consumer = await js.consumers.get(COMMAND_STATE_STREAM, { filter_subjects: [stateSubject(commandId)], deliver_policy: DeliverPolicy.LastPerSubject });
    const messages = await consumer.consume();
    const timer = setTimeout(() => void messages.stop(), Math.max(timeoutMs, 0));
    try {
      for await (const message of messages) {
        const current = standing(decodeRecord(message.data));
        if (isFinal(current.state)) return current;
      }
      return undefined;
    } finally {
      clearTimeout(timer);
      await messages.close();
      // Closed, an ordered consumer stays on the broker for 5 minutes, and a stream holds at most
      // 1,000 consumers (the broker's default): left there, they would refuse every wait beyond
      // 1,000 request/response commands within 5 minutes.
      await consumer.delete().catch(() => undefined);
    }
  }
}
