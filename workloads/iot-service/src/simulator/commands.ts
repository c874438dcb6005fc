/**
 * Commands in the simulator: an application sending them through core, a device over MQTT
 * receiving and answering them, and a device over HTTP polling for them.
 *
 * Guarantees: `sendCommand` posts a command and returns core's status and answer as they are;
 * `readCommand` returns a command's record (throws unless 200). `answerCommands` subscribes the
 * connected device to its own commands (rejects when the gateway refuses the subscription) and
 * records each command it receives in `received`, answering it on
 * `command/<id>/res/<command id>/<status>` with what `answer` returns (no answer when it returns
 * undefined; an answer still unacknowledged when the connection ends is dropped, not thrown). `pollCommand` posts the device's telemetry `payload` with `?ttd=`: the command the
 * gateway answered with (200), or undefined for its usual 202 (rejects with `HttpStatusError` on
 * any other status); `answerPolledCommand` posts the device's answer and resolves at the gateway's
 * 204 (else rejects with `HttpStatusError`).
 */

import type { MqttClient } from 'mqtt';
import { HttpStatusError, sendRequest } from './transport.ts';
import type { DeviceCredentials, GatewayTls, ServiceAddresses } from './types.ts';

export interface CommandRequest {
  name: string;
  payload?: unknown;
  ttlSeconds?: number;
  retries?: number;
  responseTimeoutSeconds?: number;
}

export interface ReceivedCommand {
  commandId: string;
  name: string;
  payload: unknown;
}

type Core = Pick<ServiceAddresses, 'coreUrl' | 'apiToken'>;

export async function sendCommand(core: Core, deviceId: string, request: CommandRequest): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(new URL(`/v1/devices/${encodeURIComponent(deviceId)}/commands`, core.coreUrl), {
    method: 'POST',
    headers: { Authorization: `Bearer ${core.apiToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(request),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export async function readCommand(core: Core, deviceId: string, commandId: string): Promise<Record<string, unknown>> {
  const response = await fetch(new URL(`/v1/devices/${encodeURIComponent(deviceId)}/commands/${commandId}`, core.coreUrl), { headers: { Authorization: `Bearer ${core.apiToken}` } });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`read command ${commandId}: HTTP ${response.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

export async function answerCommands(
  client: MqttClient,
  deviceId: string,
  answer: (command: ReceivedCommand) => { status: number; payload: unknown } | undefined = () => undefined,
): Promise<{ received: ReceivedCommand[] }> {
  const received: ReceivedCommand[] = [];
  const prefix = `command/${deviceId}/req/`;
  client.on('message', (topic, bytes) => {
    if (!topic.startsWith(prefix)) return;
    const [commandId = '', name = ''] = topic.slice(prefix.length).split('/');
    const command = { commandId, name, payload: JSON.parse(bytes.toString('utf8')) as unknown };
    received.push(command);
    const reply = answer(command);
    // An answer the connection closes under is lost, as a device's would be: the command fails or expires at core.
    if (reply) client.publishAsync(`command/${deviceId}/res/${commandId}/${reply.status}`, JSON.stringify(reply.payload), { qos: 1 }).catch(() => undefined);
  });
  await client.subscribeAsync(`${prefix}#`, { qos: 1 }); // a refused subscription rejects
  return { received };
}

const basic = (device: DeviceCredentials) => `Basic ${Buffer.from(`${device.id}:${device.password}`).toString('base64')}`;

export async function pollCommand(gatewayHttpUrl: string, device: DeviceCredentials, ttdSeconds: number, payload: unknown = {}, tls?: GatewayTls): Promise<ReceivedCommand | undefined> {
  const url = new URL('/v1/telemetry', gatewayHttpUrl);
  url.searchParams.set('ttd', String(ttdSeconds));
  const response = await sendRequest(url, { method: 'POST', tls, headers: { Authorization: basic(device), 'Content-Type': 'application/json' }, body: JSON.stringify(payload) });
  if (response.status === 202) return undefined;
  if (response.status !== 200) throw new HttpStatusError(response.status, response.text, `poll commands of ${device.id}`);
  return { commandId: response.headers['command-id'] ?? '', name: response.headers['command-name'] ?? '', payload: JSON.parse(response.text) as unknown };
}

export async function answerPolledCommand(gatewayHttpUrl: string, device: DeviceCredentials, commandId: string, answer: { status: number; payload: unknown }, tls?: GatewayTls): Promise<void> {
  const url = new URL(`/v1/command/res/${commandId}`, gatewayHttpUrl);
  url.searchParams.set('status', String(answer.status));
  const response = await sendRequest(url, { method: 'POST', tls, headers: { Authorization: basic(device), 'Content-Type': 'application/json' }, body: JSON.stringify(answer.payload) });
  if (response.status !== 204) throw new HttpStatusError(response.status, response.text, `answer command ${commandId} of ${device.id}`);
}
