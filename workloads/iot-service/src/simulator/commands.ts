/**
 * Commands in the simulator: an application sending them through core, and a device over MQTT
 * receiving and answering them.
 *
 * Guarantees: `sendCommand` posts a command and returns core's status and answer as they are;
 * `readCommand` returns a command's record (throws unless 200). `answerCommands` subscribes the
 * connected device to its own commands (rejects when the gateway refuses the subscription) and
 * records each command it receives in `received`, answering it on
 * `command/<id>/res/<command id>/<status>` with what `answer` returns (no answer when it returns
 * undefined).
 */

import type { MqttClient } from 'mqtt';
import type { ServiceAddresses } from './index.ts';

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
    if (reply) void client.publishAsync(`command/${deviceId}/res/${commandId}/${reply.status}`, JSON.stringify(reply.payload), { qos: 1 });
  });
  await client.subscribeAsync(`${prefix}#`, { qos: 1 }); // a refused subscription rejects
  return { received };
}
