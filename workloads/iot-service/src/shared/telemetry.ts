/**
 * Device ids, message ids, topics and the envelope a message travels in from gateway to processing.
 *
 * Guarantees: a valid device id (1–128 of `A-Z a-z 0-9 . _ : -`) is one MQTT topic level, so
 * `telemetry/<device id>` names exactly one device; a valid message id is 1–128 printable ASCII
 * characters without spaces. `parseDeviceTopic` reads what a device publishes to:
 * `telemetry/<device id>`, or `telemetry/<device id>/?message-id=<id>` (a property bag as Eclipse
 * Hono's MQTT adapter has, the value percent-encoded) by which the device names its message
 * itself; anything else — another key, a repeated or malformed message id, more levels — is
 * undefined. `decodeEnvelope` returns an envelope only for a JSON object with a
 * valid `messageId` and `deviceId`, an ISO 8601 `receivedAt` and a JSON object or array `payload`,
 * and throws naming the first defect otherwise, so processing stores nothing malformed.
 * `encodeEnvelope`/`decodeEnvelope` round-trip. `unstorable` names why a payload could never be
 * stored (a NUL character or an unpaired UTF-16 surrogate in a key or string, which PostgreSQL's
 * jsonb refuses, or nesting deeper than MAX_PAYLOAD_DEPTH), so the gateway refuses it before
 * acknowledging; it walks the payload without recursion.
 */

import { randomUUID } from 'node:crypto';

export const TELEMETRY_TOPIC_PREFIX = 'telemetry/';

const DEVICE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const MESSAGE_ID = /^[\x21-\x7e]{1,128}$/;

export function isDeviceId(value: unknown): value is string {
  return typeof value === 'string' && DEVICE_ID.test(value);
}

export function isMessageId(value: unknown): value is string {
  return typeof value === 'string' && MESSAGE_ID.test(value);
}

/** A message id assigned at the gateway when the device gives none. */
export function newMessageId(): string {
  return randomUUID();
}

export function telemetryTopic(deviceId: string): string {
  return `${TELEMETRY_TOPIC_PREFIX}${deviceId}`;
}

/** The property-bag key by which a device gives its message's id on MQTT (HTTP: the Message-Id header). */
export const MESSAGE_ID_PROPERTY = 'message-id';

/** The topic a device publishes a message to when it names the message itself (`parseDeviceTopic`). */
export function deviceTelemetryTopic(deviceId: string, messageId?: string): string {
  const topic = telemetryTopic(deviceId);
  return messageId === undefined ? topic : `${topic}/?${MESSAGE_ID_PROPERTY}=${encodeURIComponent(messageId)}`;
}

/** The device and, when the device gave one, the message id of a device's publish topic; undefined for any other topic. */
export function parseDeviceTopic(topic: string): { deviceId: string; messageId?: string } | undefined {
  if (!topic.startsWith(TELEMETRY_TOPIC_PREFIX)) return undefined;
  const rest = topic.slice(TELEMETRY_TOPIC_PREFIX.length);
  const bagAt = rest.indexOf('/?');
  const deviceId = bagAt < 0 ? rest : rest.slice(0, bagAt);
  if (!isDeviceId(deviceId)) return undefined;
  if (bagAt < 0) return { deviceId };
  const properties = rest.slice(bagAt + 2).split('&');
  if (properties.length !== 1) return undefined;
  const [key, value, ...more] = properties[0]!.split('=');
  if (key !== MESSAGE_ID_PROPERTY || value === undefined || more.length > 0) return undefined;
  let messageId: string;
  try {
    messageId = decodeURIComponent(value);
  } catch {
    return undefined;
  }
  return isMessageId(messageId) ? { deviceId, messageId } : undefined;
}

/** A device's telemetry: a JSON object or array (what a device publishes or posts). */
export type Payload = Record<string, unknown> | unknown[];

export function isPayload(value: unknown): value is Payload {
  return typeof value === 'object' && value !== null;
}

/** Deepest nesting of objects and arrays a payload may have. */
export const MAX_PAYLOAD_DEPTH = 64;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function unstorableString(text: string): string | undefined {
  if (text.includes('\u0000')) return 'contains a NUL character (\\u0000)';
  if (LONE_SURROGATE.test(text)) return 'contains an unpaired UTF-16 surrogate';
  return undefined;
}

/** Why `payload` could never be stored, or undefined when it can. */
export function unstorable(payload: Payload): string | undefined {
  const pending: Array<{ value: unknown; depth: number }> = [{ value: payload, depth: 1 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, depth } = next;
    if (typeof value === 'string') {
      const problem = unstorableString(value);
      if (problem) return `payload ${problem}`;
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (depth > MAX_PAYLOAD_DEPTH) return `payload is nested deeper than ${MAX_PAYLOAD_DEPTH} levels`;
    for (const [key, item] of Object.entries(value)) {
      const problem = Array.isArray(value) ? undefined : unstorableString(key);
      if (problem) return `payload key ${problem}`;
      pending.push({ value: item, depth: depth + 1 });
    }
  }
  return undefined;
}

export interface TelemetryEnvelope {
  messageId: string;
  deviceId: string;
  /** When the gateway received the message (ISO 8601). */
  receivedAt: string;
  payload: Payload;
}

export function encodeEnvelope(envelope: TelemetryEnvelope): Buffer {
  return Buffer.from(JSON.stringify(envelope));
}

export function decodeEnvelope(bytes: Buffer | string): TelemetryEnvelope {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString());
  } catch {
    throw new Error('envelope is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('envelope is not a JSON object');
  const { messageId, deviceId, receivedAt, payload } = value as Record<string, unknown>;
  if (!isMessageId(messageId)) throw new Error('envelope: messageId missing or malformed');
  if (!isDeviceId(deviceId)) throw new Error('envelope: deviceId missing or malformed');
  if (typeof receivedAt !== 'string' || Number.isNaN(Date.parse(receivedAt))) throw new Error('envelope: receivedAt is not a time');
  if (!isPayload(payload)) throw new Error('envelope: payload is not a JSON object or array');
  return { messageId, deviceId, receivedAt, payload };
}
