/**
 * A device that publishes without pause, as day-two tests need one: through pod deletions and
 * upgrades it keeps sending, and sends every message again until the gateway acknowledged it.
 *
 * Guarantees:
 * - `startContinuousDevice` runs one send loop per protocol (MQTT QoS 1 on one connection whose
 *   client id is the device id, as the gateway requires; HTTP
 *   POSTs; over TLS for mqtts:// and https:// URLs, trusting `addresses.gatewayTls`), each sending its messages one after the other
 *   (after each acknowledgement pausing `intervalMs`, and beginning message n no sooner than n × `periodMs` after the first). Every message has its own id, chosen
 *   by the device (`<device>-<protocol>-<seq>`) and carried with every attempt — over MQTT in the
 *   topic's property bag (`telemetry/<id>/?message-id=<message id>`), over HTTP in `Message-Id` —
 *   so a message sent twice is the same message to the service. An attempt fails on any error, on
 *   a closed connection, or when no acknowledgement (PUBACK, 202) came within `attemptTimeoutMs`;
 *   the device then waits `retryDelayMs`, reconnects (MQTT) and sends the same message again,
 *   until it is acknowledged. Only refusals retrying cannot fix (MQTT CONNACK 4 or 5, or an HTTP
 *   status other than 202, 408, 429 or 5xx) stop a loop, and `done` rejects with that refusal.
 * - `messages` holds every message begun, live (readable while the device runs): id, protocol,
 *   sequence number, when it was first sent, how many attempts it took, and when it was
 *   acknowledged; `failures` every failed attempt with its time and error.
 * - `stop()` starts no further message and resolves with `messages` once every begun message is
 *   acknowledged; it rejects naming the unacknowledged ones when that takes longer than its
 *   timeout (and sends them no more), or with the refusal that stopped a loop.
 * - `readAllTelemetry` reads a device's whole telemetry from core, page by page (newest first),
 *   each record with the time it was stored.
 * - `longestAckGapMs`, `longestWaitMs` and `inFlightAt` describe a window of the device's life from
 *   `messages`: the longest time without any acknowledgement, the longest a message waited for
 *   its acknowledgement, and the messages sent but not yet acknowledged at an instant.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import mqtt, { type MqttClient } from 'mqtt';
import { deviceTelemetryTopic } from '../shared/telemetry.ts';
import { mqttTlsOptions, sendRequest } from './transport.ts';
import type { DeviceCredentials, GatewayTls, ServiceAddresses, TelemetryRecord } from './types.ts';

export type DeviceProtocol = 'mqtt' | 'http';

export interface DeviceMessage {
  messageId: string;
  via: DeviceProtocol;
  /** The message's number among those of its protocol, from 0. */
  seq: number;
  /** When the first attempt began (ms since the epoch). */
  firstSentAt: number;
  attempts: number;
  /** When the gateway acknowledged it (ms since the epoch); absent while it is in flight. */
  ackedAt?: number;
}

export interface FailedAttempt {
  via: DeviceProtocol;
  messageId: string;
  at: number;
  error: string;
}

export interface ContinuousDeviceOptions {
  /** The protocols sent over, each in its own loop (default both). */
  protocols?: readonly DeviceProtocol[];
  /** Pause after each acknowledged message of a loop (default 0: the next one at once). */
  intervalMs?: number;
  /** Begin a loop's message n (from 0) no sooner than n × periodMs after its first, so the loop keeps that average rate while acknowledgements allow (default 0: no such bound); with intervalMs, the longer pause. */
  periodMs?: number;
  /** Wait after a failed attempt before the next (default 250 ms). */
  retryDelayMs?: number;
  /** An attempt with no acknowledgement within this fails (default 10 s). */
  attemptTimeoutMs?: number;
}

export interface ContinuousDevice {
  readonly deviceId: string;
  readonly messages: readonly DeviceMessage[];
  readonly failures: readonly FailedAttempt[];
  /** Rejects as soon as a loop meets a refusal retrying cannot fix; resolves when every loop ended after `stop`. */
  readonly done: Promise<void>;
  stop(timeoutMs?: number): Promise<DeviceMessage[]>;
}

/** A refusal that no retry can fix: wrong credentials, a request the gateway rejects as such. */
export class PermanentRefusal extends Error {}

const RETRIED_HTTP_STATUSES = new Set([408, 429]);
/** CONNACK codes of MQTT 3.1.1 that say the credentials are wrong (bad user name or password, not authorized). */
const REFUSED_CONNACK_CODES = new Set([4, 5]);

export function startContinuousDevice(
  addresses: Pick<ServiceAddresses, 'gatewayHttpUrl' | 'gatewayMqttUrl' | 'gatewayTls'>,
  device: DeviceCredentials,
  options: ContinuousDeviceOptions = {},
): ContinuousDevice {
  const retryDelayMs = options.retryDelayMs ?? 250;
  const attemptTimeoutMs = options.attemptTimeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 0;
  const periodMs = options.periodMs ?? 0;
  const messages: DeviceMessage[] = [];
  const failures: FailedAttempt[] = [];
  const stopping = new AbortController();
  /** Aborted when `stop` gave up waiting: messages still unacknowledged are not sent again. */
  const abandoned = new AbortController();

  const begin = (via: DeviceProtocol, seq: number): DeviceMessage => {
    const message: DeviceMessage = { messageId: `${device.id}-${via}-${seq}`, via, seq, firstSentAt: Date.now(), attempts: 0 };
    messages.push(message);
    return message;
  };
  /** After `message` of a loop that began at `began` was acknowledged: `intervalMs`, or until the next message is due by `periodMs`, whichever is longer. */
  const pauseAfter = async (message: DeviceMessage, began: number) => {
    const pause = Math.max(intervalMs, began + (message.seq + 1) * periodMs - Date.now());
    if (pause > 0 && !stopping.signal.aborted) await sleep(pause);
  };
  const payloadOf = (message: DeviceMessage) => JSON.stringify({ via: message.via, seq: message.seq, messageId: message.messageId, at: new Date().toISOString() });

  /** Sends `message` until `attempt` succeeds; a PermanentRefusal ends the loop. */
  async function untilAcknowledged(message: DeviceMessage, attempt: () => Promise<void>, afterFailure: () => void): Promise<void> {
    for (;;) {
      message.attempts++;
      try {
        await attempt();
        message.ackedAt = Date.now();
        return;
      } catch (error) {
        if (error instanceof PermanentRefusal) throw error;
        failures.push({ via: message.via, messageId: message.messageId, at: Date.now(), error: error instanceof Error ? error.message : String(error) });
        afterFailure();
        abandoned.signal.throwIfAborted();
        await sleep(retryDelayMs, undefined, { signal: abandoned.signal });
      }
    }
  }

  async function mqttLoop(): Promise<void> {
    let client: MqttClient | undefined;
    const drop = () => {
      client?.end(true);
      client = undefined;
    };
    const began = Date.now();
    try {
      for (let seq = 0; !stopping.signal.aborted; seq++) {
        const message = begin('mqtt', seq);
        await untilAcknowledged(
          message,
          async () => {
            client ??= await connectDevice(addresses.gatewayMqttUrl, device, attemptTimeoutMs, addresses.gatewayTls);
            await publishOnce(client, deviceTelemetryTopic(device.id, message.messageId), payloadOf(message), attemptTimeoutMs);
          },
          drop,
        );
        await pauseAfter(message, began);
      }
    } finally {
      if (client) await client.endAsync().catch(() => undefined);
    }
  }

  async function httpLoop(): Promise<void> {
    const began = Date.now();
    for (let seq = 0; !stopping.signal.aborted; seq++) {
      const message = begin('http', seq);
      await untilAcknowledged(message, () => postOnce(addresses.gatewayHttpUrl, device, message.messageId, payloadOf(message), attemptTimeoutMs, addresses.gatewayTls), () => undefined);
      await pauseAfter(message, began);
    }
  }

  const loops = (options.protocols ?? ['mqtt', 'http']).map((via) => (via === 'mqtt' ? mqttLoop() : httpLoop()));
  const done = Promise.all(loops).then(() => undefined);
  // A refusal stops its loop at once: end the others too, so nothing runs unobserved.
  done.catch(() => stopping.abort());

  return {
    deviceId: device.id,
    messages,
    failures,
    done,
    stop: async (timeoutMs = 120_000) => {
      stopping.abort();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const open = messages.filter((m) => m.ackedAt === undefined).map((m) => `${m.messageId} (${m.attempts} attempts)`);
          reject(new Error(`device ${device.id}: not acknowledged within ${timeoutMs} ms of stopping: ${open.join(', ')}`));
        }, timeoutMs);
      });
      try {
        await Promise.race([done, late]);
      } catch (error) {
        abandoned.abort(error);
        throw error;
      } finally {
        clearTimeout(timer);
      }
      return messages;
    },
  };
}

async function connectDevice(url: string, device: DeviceCredentials, timeoutMs: number, tls: GatewayTls | undefined): Promise<MqttClient> {
  try {
    const client = await mqtt.connectAsync(
      url,
      { username: device.id, password: device.password, clientId: device.id, reconnectPeriod: 0, connectTimeout: timeoutMs, clean: true, ...mqttTlsOptions(url, tls) },
      false,
    );
    client.on('error', () => undefined); // a later error also closes the connection, which the attempt sees
    return client;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'number' && REFUSED_CONNACK_CODES.has(code)) throw new PermanentRefusal(`MQTT connection of ${device.id} refused: ${(error as Error).message}`);
    throw error;
  }
}

/** One QoS 1 publish: resolves on its PUBACK; rejects when the connection closes first or no PUBACK comes in time. */
async function publishOnce(client: MqttClient, topic: string, payload: string, timeoutMs: number): Promise<void> {
  if (!client.connected) throw new Error('not connected');
  let onClose: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const failed = new Promise<never>((_, reject) => {
    onClose = () => reject(new Error('the gateway closed the connection before its PUBACK'));
    client.once('close', onClose);
    timer = setTimeout(() => reject(new Error(`no PUBACK within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([client.publishAsync(topic, payload, { qos: 1 }), failed]);
  } finally {
    clearTimeout(timer);
    if (onClose) client.off('close', onClose);
  }
}

/** One POST: resolves on 202; a status worth retrying (408, 429, 5xx) or any network error rejects, any other status is a PermanentRefusal. */
async function postOnce(gatewayHttpUrl: string, device: DeviceCredentials, messageId: string, body: string, timeoutMs: number, tls: GatewayTls | undefined): Promise<void> {
  const response = await sendRequest(new URL('/v1/telemetry', gatewayHttpUrl), {
    method: 'POST',
    tls,
    headers: {
      Authorization: `Basic ${Buffer.from(`${device.id}:${device.password}`).toString('base64')}`,
      'Content-Type': 'application/json',
      'Message-Id': messageId,
    },
    body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const { text } = response;
  if (response.status === 202) return;
  const what = `HTTP ${response.status} for ${messageId}: ${text.slice(0, 200)}`;
  if (response.status >= 500 || RETRIED_HTTP_STATUSES.has(response.status)) throw new Error(what);
  throw new PermanentRefusal(what);
}

/** A telemetry record as core lists it, with the time processing stored it. */
export interface StoredTelemetryRecord extends TelemetryRecord {
  /** ISO 8601, the database's clock. */
  storedAt: string;
}

/** Every telemetry record of the device, newest first, read from core in pages of `pageSize` (at most 1000). */
export async function readAllTelemetry(addresses: Pick<ServiceAddresses, 'coreUrl' | 'apiToken'>, deviceId: string, pageSize = 1000): Promise<StoredTelemetryRecord[]> {
  const all: StoredTelemetryRecord[] = [];
  for (let last: StoredTelemetryRecord | undefined; ; ) {
    const url = new URL(`/v1/devices/${encodeURIComponent(deviceId)}/telemetry`, addresses.coreUrl);
    url.searchParams.set('limit', String(pageSize));
    if (last) {
      url.searchParams.set('before', last.receivedAt);
      url.searchParams.set('beforeMessageId', last.messageId);
    }
    const response = await fetch(url, { headers: { Authorization: `Bearer ${addresses.apiToken}` } });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`read telemetry of ${deviceId}: HTTP ${response.status} ${text}`);
    const page = JSON.parse(text) as StoredTelemetryRecord[];
    all.push(...page);
    if (page.length < pageSize) return all;
    last = page.at(-1);
  }
}

/** The messages sent but not acknowledged at instant `at` (ms since the epoch). */
export function inFlightAt(messages: readonly DeviceMessage[], at: number): DeviceMessage[] {
  return messages.filter((m) => m.firstSentAt <= at && (m.ackedAt === undefined || m.ackedAt > at));
}

/** The longest stretch of [from, to] in which no message (of `via`, when given) was acknowledged, in ms. */
export function longestAckGapMs(messages: readonly DeviceMessage[], from: number, to: number, via?: DeviceProtocol): number {
  const acks = messages
    .filter((m) => m.ackedAt !== undefined && m.ackedAt >= from && m.ackedAt <= to && (via === undefined || m.via === via))
    .map((m) => m.ackedAt!)
    .sort((a, b) => a - b);
  let longest = 0;
  let previous = from;
  for (const at of [...acks, to]) {
    longest = Math.max(longest, at - previous);
    previous = at;
  }
  return longest;
}

/** The longest any message in flight during [from, to] waited from its first attempt to its acknowledgement (or to `to`), in ms. */
export function longestWaitMs(messages: readonly DeviceMessage[], from: number, to: number): number {
  let longest = 0;
  for (const m of messages) {
    const end = m.ackedAt ?? to;
    if (end < from || m.firstSentAt > to) continue;
    longest = Math.max(longest, end - m.firstSentAt);
  }
  return longest;
}
