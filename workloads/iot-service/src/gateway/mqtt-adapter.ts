/**
 * The gateway's device-facing MQTT adapter (port 1883), an aedes server (MQTT 3.1 and 3.1.1).
 *
 * Guarantees: a device connects with username = its device id and the password core gave it;
 * anything else is refused with CONNACK 4 (bad user name or password) or, when core cannot be
 * asked, 3 (server unavailable). A device may publish only to `telemetry/<its own id>`, or to
 * `telemetry/<its own id>/?message-id=<id>` to name the message itself (telemetry.ts
 * `parseDeviceTopic`), with QoS 0 or 1 and a JSON object or array as payload; any other publish
 * closes its connection without an acknowledgement. An accepted message keeps the id the device
 * gave — so a device that sends it again after a lost PUBACK has it stored once — or gets a fresh
 * one; it is wrapped in an envelope and forwarded to the broker, and the device's PUBACK is sent
 * only after the broker acknowledged it. A payload that could never be stored (telemetry.ts
 * `unstorable`) closes the connection without PUBACK, logged with the reason. While the broker's
 * stream is full the message is held and offered again, and nothing more is read from that
 * device's connection (aedes reads a client's next packet only once this one is handled), for up
 * to `backlogWaitMs` (default 30 s); when forwarding still fails the connection is closed without
 * PUBACK, so the device sends it again. A packet announcing more than MAX_MQTT_PACKET_BYTES closes
 * the connection before its body is read (mqtt-packet-limit.ts), authenticated or not.
 * Subscriptions are refused (SUBACK 128): devices only send telemetry here.
 */

import { Aedes, type AuthenticateError, type Client } from 'aedes';
import { createServer, type Server } from 'node:net';
import type { Logger } from '../shared/log.ts';
import { closeServer, listenOn } from '../shared/net.ts';
import { isPayload, newMessageId, parseDeviceTopic, unstorable, type TelemetryEnvelope } from '../shared/telemetry.ts';
import type { DeviceAuthenticator } from './devices.ts';
import { BacklogFullError, type Forward } from './forwarder.ts';
import { limitPacketSize, MAX_MQTT_PACKET_BYTES } from './mqtt-packet-limit.ts';

export interface MqttAdapterOptions {
  devices: DeviceAuthenticator;
  forward: Forward;
  log: Logger;
  backlogWaitMs?: number;
}

/** Forwards `envelope`, offering it again while the stream is full, for at most `waitMs`. */
async function forwardWhenRoom(forward: Forward, envelope: TelemetryEnvelope, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await forward(envelope);
    } catch (error) {
      if (!(error instanceof BacklogFullError) || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * attempt, 2_000)));
    }
  }
}

export interface MqttAdapter {
  port: number;
  close(): Promise<void>;
}

const BAD_USERNAME_OR_PASSWORD = 4;
const SERVER_UNAVAILABLE = 3;

function refusal(message: string, returnCode: number): AuthenticateError {
  return Object.assign(new Error(message), { returnCode }) as AuthenticateError;
}

function parsePayload(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

export async function startMqttAdapter(options: MqttAdapterOptions, listen: { host: string; port: number }): Promise<MqttAdapter> {
  const { devices, forward, log } = options;
  const backlogWaitMs = options.backlogWaitMs ?? 30_000;
  const deviceOf = new WeakMap<Client, string>();

  const broker = await Aedes.createBroker({
    authenticate: (client, username, password, done) => {
      const id = username ?? '';
      devices.authenticate(id, password?.toString('utf8') ?? '').then(
        (valid) => {
          if (!valid) {
            log.warn('mqtt device refused', { device: id, reason: 'bad user name or password' });
            return done(refusal('bad user name or password', BAD_USERNAME_OR_PASSWORD), false);
          }
          deviceOf.set(client, id);
          done(null, true);
        },
        (error: unknown) => {
          log.error('device check failed', { device: id, error });
          done(refusal('device registry unavailable', SERVER_UNAVAILABLE), false);
        },
      );
    },
    authorizePublish: (client, packet, done) => {
      const deviceId = client ? deviceOf.get(client) : undefined;
      const topic = parseDeviceTopic(packet.topic);
      if (!deviceId || topic?.deviceId !== deviceId) {
        log.warn('mqtt publish refused', { device: deviceId, topic: packet.topic, reason: 'not the device\'s telemetry topic' });
        return done(new Error(`publish to ${packet.topic} not allowed`));
      }
      if (packet.qos === 2) return done(new Error('QoS 2 is not supported; use QoS 1'));
      const payload = parsePayload(Buffer.from(packet.payload));
      if (!isPayload(payload)) return done(new Error('payload must be a JSON object or array'));
      const problem = unstorable(payload);
      if (problem) {
        log.warn('mqtt publish refused', { device: deviceId, topic: packet.topic, reason: problem });
        return done(new Error(problem));
      }
      packet.retain = false; // nothing is kept for subscribers: there are none
      const envelope = { messageId: topic.messageId ?? newMessageId(), deviceId, receivedAt: new Date().toISOString(), payload };
      forwardWhenRoom(forward, envelope, backlogWaitMs).then(
        () => done(null),
        (error: unknown) => {
          log.warn('mqtt message not forwarded; device not acknowledged', { device: deviceId, messageId: envelope.messageId, error });
          done(error instanceof Error ? error : new Error(String(error)));
        },
      );
    },
    authorizeSubscribe: (_client, _subscription, done) => done(null, null),
  });

  const server: Server = createServer((socket) => {
    broker.handle(socket);
    limitPacketSize(socket, MAX_MQTT_PACKET_BYTES, (announced) =>
      log.warn('mqtt connection closed', { remote: socket.remoteAddress, reason: `a packet of ${announced} bytes exceeds ${MAX_MQTT_PACKET_BYTES}` }),
    );
  });
  await listenOn(server, listen);
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : listen.port,
    close: async () => {
      const closed = closeServer(server);
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      await closed;
    },
  };
}
