/**
 * The device simulator, as a library for end-to-end tests and the CLI (main.ts): one device's
 * life against a running IoT service, through the addresses it is given — plaintext (mqtt://,
 * http://) or TLS (mqtts://, https://, checking the gateway's certificate against
 * `addresses.gatewayTls`: the CA to trust, the name to check when dialling an IP).
 *
 * Guarantees: `simulateDevice` registers the device through core, publishes `messages` JSON
 * messages over MQTT (QoS 1, each awaited until the gateway's PUBACK) and `messages` over HTTP
 * (each with its own Message-Id, awaited until 202), then reads the device's telemetry back from
 * core until all of them are there or `timeoutMs` passed, and reports what was sent and stored
 * (`stored` counts distinct message ids read back). An MQTT connection refused outright is tried
 * again every second until `timeoutMs` (nothing was sent on it); any other refusal of a step rejects
 * with the status or the error it got. The step functions are exported on their own, so a test can also send with a
 * wrong password or token and see the refusal (`HttpStatusError`, or an MQTT connection error).
 */

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import mqtt from 'mqtt';
import { retry } from '../shared/retry.ts';

import { HttpStatusError, mqttTlsOptions, sendRequest } from './transport.ts';
import type { DeviceCredentials, GatewayTls, ServiceAddresses, TelemetryRecord } from './types.ts';

export type { DeviceCredentials, GatewayTls, ServiceAddresses, TelemetryRecord } from './types.ts';
export { HttpStatusError } from './transport.ts';

export interface SimulationReport {
  deviceId: string;
  sent: { mqtt: number; http: number; total: number };
  stored: number;
  /** Milliseconds from the first message sent to all of them read back (or to the timeout). */
  elapsedMs: number;
}

async function expectStatus(response: Response | { status: number; text: string }, expected: number, what: string): Promise<unknown> {
  const text = response instanceof Response ? await response.text() : response.text;
  if (response.status !== expected) throw new HttpStatusError(response.status, text, what);
  return text === '' ? undefined : JSON.parse(text);
}

export async function registerDevice(addresses: Pick<ServiceAddresses, 'coreUrl' | 'apiToken'>, id: string): Promise<DeviceCredentials> {
  const response = await fetch(new URL('/v1/devices', addresses.coreUrl), {
    method: 'POST',
    headers: { Authorization: `Bearer ${addresses.apiToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ id }),
  });
  return (await expectStatus(response, 201, `register device ${id}`)) as DeviceCredentials;
}

export async function readTelemetry(addresses: Pick<ServiceAddresses, 'coreUrl' | 'apiToken'>, id: string, limit: number): Promise<TelemetryRecord[]> {
  const url = new URL(`/v1/devices/${encodeURIComponent(id)}/telemetry`, addresses.coreUrl);
  url.searchParams.set('limit', String(limit));
  const response = await fetch(url, { headers: { Authorization: `Bearer ${addresses.apiToken}` } });
  return (await expectStatus(response, 200, `read telemetry of ${id}`)) as TelemetryRecord[];
}

/**
 * Connects as the device (client id = device id, as the gateway requires) — over TLS for an
 * mqtts:// URL, trusting what `tls` names —, publishes each payload with QoS 1 (awaiting its PUBACK) to `topic`
 * (default: the device's own) and disconnects. The gateway closing the connection before a
 * PUBACK (MQTT 3.1.1's only answer to a publish it refuses, e.g. to another device's topic)
 * rejects at once, where the MQTT client would keep the message for a reconnect that never comes.
 */
export async function publishMqtt(
  gatewayMqttUrl: string,
  device: DeviceCredentials,
  payloads: readonly unknown[],
  topic = `telemetry/${device.id}`,
  tls?: GatewayTls,
): Promise<number> {
  const client = await mqtt.connectAsync(gatewayMqttUrl, {
    username: device.id,
    password: device.password,
    clientId: device.id,
    reconnectPeriod: 0,
    connectTimeout: 5_000,
    ...mqttTlsOptions(gatewayMqttUrl, tls),
  });
  const closed = new Promise<never>((_, reject) => client.once('close', () => reject(new Error(`the gateway closed the connection of ${device.id} before acknowledging its publish to ${topic}`))));
  closed.catch(() => undefined); // observed by the race below; a close after the last PUBACK is the normal end
  try {
    for (const payload of payloads) await Promise.race([client.publishAsync(topic, JSON.stringify(payload), { qos: 1 }), closed]);
    return payloads.length;
  } finally {
    await client.endAsync(true);
  }
}

/** POSTs one message to the gateway (over TLS for an https:// URL, trusting what `tls` names); resolves with its message id once the gateway answered 202. */
export async function postHttp(gatewayHttpUrl: string, device: DeviceCredentials, payload: unknown, messageId?: string, tls?: GatewayTls): Promise<string> {
  const response = await sendRequest(new URL('/v1/telemetry', gatewayHttpUrl), {
    method: 'POST',
    tls,
    headers: {
      Authorization: `Basic ${Buffer.from(`${device.id}:${device.password}`).toString('base64')}`,
      'Content-Type': 'application/json',
      ...(messageId ? { 'Message-Id': messageId } : {}),
    },
    body: JSON.stringify(payload),
  });
  const body = (await expectStatus(response, 202, `post telemetry of ${device.id}`)) as { messageId: string };
  return body.messageId;
}

/**
 * `attempt` again, once a second, while its connection is refused (nothing was sent: a Service
 * whose ready gateways the node has not routed to yet), until `deadline`; any other error at once.
 */
function whileRefused<T>(deadline: number, attempt: () => Promise<T>): Promise<T> {
  return retry(attempt, {
    signal: new AbortController().signal,
    onFailure: (error) => {
      if ((error as NodeJS.ErrnoException).code !== 'ECONNREFUSED' || Date.now() >= deadline) throw error;
    },
    delayMs: () => 1_000,
  });
}

export async function simulateDevice(
  addresses: ServiceAddresses,
  options: { deviceId?: string; messages: number; timeoutMs?: number; pollMs?: number },
): Promise<SimulationReport> {
  const deviceId = options.deviceId ?? `sim-${randomUUID().slice(0, 12)}`;
  const device = await registerDevice(addresses, deviceId);
  const started = Date.now();
  const payload = (via: string, seq: number) => ({ via, seq, at: new Date().toISOString() });

  const deadline = started + (options.timeoutMs ?? 60_000);
  const mqttSent = await whileRefused(deadline, () =>
    publishMqtt(
      addresses.gatewayMqttUrl,
      device,
      Array.from({ length: options.messages }, (_, seq) => payload('mqtt', seq)),
      undefined,
      addresses.gatewayTls,
    ),
  );
  let httpSent = 0;
  for (let seq = 0; seq < options.messages; seq++) {
    await postHttp(addresses.gatewayHttpUrl, device, payload('http', seq), randomUUID(), addresses.gatewayTls);
    httpSent++;
  }

  const total = mqttSent + httpSent;
  let stored = 0;
  for (;;) {
    const records = await readTelemetry(addresses, deviceId, Math.min(Math.max(total, 1), 1000));
    stored = new Set(records.map((r) => r.messageId)).size;
    if (stored >= total || Date.now() >= deadline) break;
    await sleep(options.pollMs ?? 250);
  }
  return { deviceId, sent: { mqtt: mqttSent, http: httpSent, total }, stored, elapsedMs: Date.now() - started };
}

/** The device that publishes without pause (day-two tests): continuous.ts. */
export * from './application.ts';
export * from './commands.ts';
export * from './continuous.ts';
export * from './fleet.ts';
export * from './hostile.ts';
