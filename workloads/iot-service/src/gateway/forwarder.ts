/**
 * The gateway's link to the broker (Mosquitto): an MQTT client that forwards each accepted
 * message as an envelope on `telemetry/<device id>` with QoS 1.
 *
 * Guarantees: `forward` resolves only once the broker has acknowledged the message (PUBACK), and
 * rejects at once when the client is not connected, or when no PUBACK came within `timeoutMs`
 * (default 10 s) — so a device is acknowledged only for a message the broker holds. The client
 * reconnects by itself; `connected` says whether it is connected now (the readiness check).
 */

import mqtt, { type MqttClient } from 'mqtt';
import type { Endpoint } from '../shared/config.ts';
import { encodeEnvelope, telemetryTopic, type TelemetryEnvelope } from '../shared/telemetry.ts';

export type Forward = (envelope: TelemetryEnvelope) => Promise<void>;

export interface BrokerLink {
  forward: Forward;
  connected(): boolean;
  close(): Promise<void>;
}

export interface BrokerLinkOptions {
  broker: Endpoint;
  username: string;
  password: string;
  clientId: string;
  timeoutMs?: number;
  onError?: (error: Error) => void;
}

export function connectBroker(options: BrokerLinkOptions): BrokerLink {
  const client: MqttClient = mqtt.connect({
    host: options.broker.host,
    port: options.broker.port,
    protocol: 'mqtt',
    username: options.username,
    password: options.password,
    clientId: options.clientId,
    clean: true,
    reconnectPeriod: 1_000,
    connectTimeout: 5_000,
  });
  client.on('error', (error) => options.onError?.(error));
  const timeoutMs = options.timeoutMs ?? 10_000;
  return {
    forward: async (envelope) => {
      if (!client.connected) throw new Error('not connected to the broker');
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the broker did not acknowledge within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        await Promise.race([client.publishAsync(telemetryTopic(envelope.deviceId), encodeEnvelope(envelope), { qos: 1 }), timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    connected: () => client.connected,
    close: async () => {
      await client.endAsync();
    },
  };
}
