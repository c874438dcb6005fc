/**
 * Commands from applications to devices as they travel: core puts each on the stream COMMANDS
 * (subject `commands.<device id>`, every `.` of the id written `%2E`), the gateway serving the
 * device takes it from that device's own durable consumer and hands it to the device over MQTT
 * (topic `command/<device id>/req/<command id>/<name>`) or HTTP, and the device answers on
 * `command/<device id>/res/<command id>[/<status>]` (MQTT) or `POST /v1/command/res/<command
 * id>?status=<status>` (HTTP).
 *
 * Guarantees: `ensureCommandStream` makes the work-queue stream COMMANDS exist (file storage, the
 * telemetry stream's replicas, a command leaves it once the gateway acknowledged it — after the
 * device did — or after MAX_TTL_SECONDS, the longest a command may wait; `discard: new` beyond
 * COMMAND_STREAM_MAX_BYTES, so a full stream refuses a command instead of dropping one; at most
 * MAX_STREAM_CONSUMERS consumers, broker.ts: a device's consumer stays an hour after its device
 * last followed it).
 * `deviceConsumer` names the one durable consumer of a device (filtered on its subject, so
 * consumers of different devices never overlap, as a work-queue stream requires). `encodeCommand`
 * and `decodeCommand` round-trip; `decodeCommand` throws for anything else. `isCommandName`
 * admits names that are one MQTT topic level without wildcards. `isOwnCommandFilter` is true
 * only for subscription filters that match the device's own request topics and nothing else;
 * `parseResponseTopic` reads a response topic (status 200 when none is given, else 100–599).
 */

import { createHash, randomUUID } from 'node:crypto';
import { DiscardPolicy, RetentionPolicy, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import { ensureStream, MAX_MESSAGE_BYTES, MAX_STREAM_CONSUMERS, nanos, subjectToken } from './broker.ts';
import type { StreamConfig } from './config.ts';
import { isDeviceId } from './telemetry.ts';

export const COMMAND_STREAM = 'COMMANDS';
export const COMMAND_SUBJECTS = 'commands.>';
/** The longest a command waits for its device. */
export const MAX_TTL_SECONDS = 24 * 60 * 60;
export const DEFAULT_TTL_SECONDS = 300;
export const MAX_RETRIES = 10;
export const DEFAULT_RETRIES = 3;
/** The longest core holds a request/response command's HTTP request open. */
export const MAX_RESPONSE_TIMEOUT_SECONDS = 60;
export const COMMAND_STREAM_MAX_BYTES = 256 * 1024 * 1024;

/** What an application asked a device to do. */
export interface Command {
  id: string;
  deviceId: string;
  name: string;
  /** Any JSON value; the device receives its JSON text. */
  payload: unknown;
  createdAt: string;
  /** Not delivered by then: expired. */
  expiresAt: string;
  /** Deliveries the device did not acknowledge that are tried again; then failed. */
  retries: number;
  /** The application waits for the device's answer. */
  responseRequired: boolean;
}

export function newCommandId(): string {
  return randomUUID();
}

export function isCommandId(value: unknown): value is string {
  return typeof value === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(value);
}

export function commandSubject(deviceId: string): string {
  return `commands.${subjectToken(deviceId)}`;
}

/** The durable consumer of the device's commands (a hash: consumer names take no `.`). */
export function deviceConsumer(deviceId: string): string {
  return `device-${createHash('sha256').update(deviceId).digest('hex').slice(0, 40)}`;
}

export function isCommandName(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z0-9._:-]{1,64}$/.test(value);
}

export function encodeCommand(command: Command): Buffer {
  return Buffer.from(JSON.stringify(command));
}

export function decodeCommand(bytes: Uint8Array): Command {
  const value = JSON.parse(Buffer.from(bytes).toString('utf8')) as Partial<Command>;
  if (!isCommandId(value.id) || !isDeviceId(value.deviceId) || !isCommandName(value.name) || typeof value.expiresAt !== 'string' || typeof value.retries !== 'number') {
    throw new Error('not a command');
  }
  return value as Command;
}

export function requestTopic(command: Pick<Command, 'deviceId' | 'id' | 'name'>): string {
  return `command/${command.deviceId}/req/${command.id}/${command.name}`;
}

/** Whether a subscription filter of the device matches its own command requests and nothing else. */
export function isOwnCommandFilter(deviceId: string, filter: string): boolean {
  const prefix = `command/${deviceId}/req/`;
  return filter.startsWith(prefix) && filter.length > prefix.length;
}

export function parseResponseTopic(topic: string): { deviceId: string; commandId: string; status: number } | undefined {
  const match = /^command\/([^/]+)\/res\/([^/]+)(?:\/(\d{3}))?$/.exec(topic);
  if (!match?.[1] || !isCommandId(match[2])) return undefined;
  const status = match[3] === undefined ? 200 : Number(match[3]);
  if (status < 100 || status > 599) return undefined;
  return { deviceId: match[1], commandId: match[2], status };
}

export function ensureCommandStream(jsm: JetStreamManager, stream: StreamConfig): Promise<void> {
  return ensureStream(jsm, {
    name: COMMAND_STREAM,
    subjects: [COMMAND_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Workqueue,
    discard: DiscardPolicy.New,
    num_replicas: stream.replicas,
    max_age: nanos(MAX_TTL_SECONDS * 1000),
    max_bytes: COMMAND_STREAM_MAX_BYTES,
    max_msg_size: MAX_MESSAGE_BYTES,
    max_consumers: MAX_STREAM_CONSUMERS,
  });
}
