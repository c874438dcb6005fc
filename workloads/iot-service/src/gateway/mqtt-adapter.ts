/**
 * The gateway's device-facing MQTT adapter, an aedes server (MQTT 3.1 and 3.1.1) for every
 * connection `handle` is given: plain (port 1883) or TLS (8883, tls.ts).
 *
 * Guarantees: a device connects with client id = username = its device id and the password core
 * gave it (login.ts), or, over TLS with a verified client certificate, with client id = the
 * certificate's CN and no password (a username, if given, must be that CN too). A client id or
 * username naming another device is refused with CONNACK 5 (not authorized), a wrong password
 * with 4 (bad user name or password); too many failed logins for the id or from the address, a
 * device id banned for connecting too often (limits.ts `connectRate`; a reconnect after the
 * gateway closed the connection because the broker did not take a message is not counted), or
 * core busy or unreachable, with 3 (server unavailable: try again later). As the client id is the
 * device id, only the device itself can take over its session. Each refusal is counted by reason
 * (metrics.ts). Each device's messages are paced (limits.ts `messageRate`) by reading nothing
 * more from its connection until the next is due: none is dropped. A device may publish only
 * to `telemetry/<its own id>`, or to `telemetry/<its own id>/?message-id=<id>` to name the
 * message itself (telemetry.ts
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
 * A device may subscribe to its own commands and publish its answers to them (mqtt-commands.ts);
 * every other subscription is refused (SUBACK 128). Each connection's opening and end (clean only
 * after the device's DISCONNECT) and each refused login are told to `connections`
 * (connection-events.ts). `disconnect(id)`
 * closes the device's open connection, if any (its password was reset or it was deleted).
 */

import { Aedes, type AuthenticateError, type Client } from 'aedes';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../shared/log.ts';
import { isPayload, newMessageId, parseDeviceTopic, unstorable, type TelemetryEnvelope } from '../shared/telemetry.ts';
import type { ConnectionSink } from './connection-events.ts';
import type { CommandDelivery } from './command-delivery.ts';
import { BacklogFullError, type Forward } from './forwarder.ts';
import type { DeviceLogin } from './login.ts';
import type { GatewayMetrics, RefusalReason } from './metrics.ts';
import { serveMqttCommands, type MqttCommands } from './mqtt-commands.ts';
import { limitPacketSize, MAX_MQTT_PACKET_BYTES } from './mqtt-packet-limit.ts';
import { certificateDevice } from './tls.ts';
import type { TokenBuckets } from '../shared/token-buckets.ts';

export interface MqttAdapterOptions {
  login: DeviceLogin;
  forward: Forward;
  log: Logger;
  metrics: GatewayMetrics;
  /** Paces each device's messages (shared with the HTTP adapter). */
  messageRate: TokenBuckets;
  /** Bans device ids that connect too often. */
  connectRate: TokenBuckets;
  backlogWaitMs?: number;
  /** Told each connection's opening and end and each refused login (connection-events.ts). */
  connections?: ConnectionSink;
  /** Commands to devices (mqtt-commands.ts); without it every subscription is refused. */
  commands?: CommandDelivery;
  commandAckTimeoutMs?: number;
}

/** Forwards `envelope`, offering it again while the stream is full, for at most `waitMs`. */
async function forwardWhenRoom(forward: Forward, envelope: TelemetryEnvelope, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await forward(envelope);
    } catch (error) {
      if (!(error instanceof BacklogFullError) || Date.now() >= deadline) throw error;
      await sleep(Math.min(100 * attempt, 2_000));
    }
  }
}

export interface MqttAdapter {
  /** Serves one device connection (plain or TLS). */
  handle(socket: Socket): void;
  /** Closes the device's connection, if it has one. */
  disconnect(deviceId: string): void;
  close(): Promise<void>;
}

const SERVER_UNAVAILABLE = 3;
const BAD_USERNAME_OR_PASSWORD = 4;
const NOT_AUTHORIZED = 5;

const RETURN_CODES: Record<RefusalReason, number> = {
  bad_credentials: BAD_USERNAME_OR_PASSWORD,
  certificate: NOT_AUTHORIZED,
  client_id: NOT_AUTHORIZED,
  rate_limited: SERVER_UNAVAILABLE,
  flapping: SERVER_UNAVAILABLE,
  registry_busy: SERVER_UNAVAILABLE,
  message_rate: SERVER_UNAVAILABLE,
  connection_cap: SERVER_UNAVAILABLE,
  packet_too_large: SERVER_UNAVAILABLE,
};

function parsePayload(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

export async function createMqttAdapter(options: MqttAdapterOptions): Promise<MqttAdapter> {
  const { login, forward, log, metrics, messageRate, connectRate, connections } = options;
  const backlogWaitMs = options.backlogWaitMs ?? 30_000;
  const deviceOf = new WeakMap<Client, string>();
  /** Devices whose connection the gateway closed for the broker's sake: their next login is no flap. */
  const closedByGateway = new Set<string>();
  let commands: MqttCommands | undefined;

  /** Who the client is, or why it is refused before any password is checked. */
  function claimedDevice(client: Client, username: string | undefined): { id: string; certified: boolean } | { refused: RefusalReason; reason: string } {
    const certified = certificateDevice(client.conn);
    const id = certified ?? username ?? '';
    if (certified && username && username !== certified) return { refused: 'certificate', reason: `the client certificate names ${certified}, the username ${username}` };
    if (client.id !== id) return { refused: 'client_id', reason: 'the client id must be the device id' };
    return { id, certified: certified !== undefined };
  }

  async function admit(client: Client, username: string | undefined, password: string): Promise<{ id: string } | { refused: RefusalReason; reason: string }> {
    const claimed = claimedDevice(client, username);
    if ('refused' in claimed) return claimed;
    if (!claimed.certified) {
      const result = await login.login(claimed.id, password, (client.conn as Socket).remoteAddress ?? 'unknown');
      if (!result.admitted) return { refused: result.reason, reason: result.reason === 'bad_credentials' ? 'bad user name or password' : `${result.reason}; retry after ${result.retryAfterSeconds ?? 1} s` };
    }
    if (!closedByGateway.delete(claimed.id)) {
      const bannedMs = connectRate.take(claimed.id);
      if (bannedMs > 0) return { refused: 'flapping', reason: `connecting too often; banned for ${Math.ceil(bannedMs / 1000)} s` };
    }
    return { id: claimed.id };
  }

  const broker = await Aedes.createBroker({
    authenticate: (client, username, password, done) => {
      admit(client, username, password?.toString('utf8') ?? '').then(
        (outcome) => {
          if ('refused' in outcome) {
            metrics.refused(outcome.refused);
            log.warn('mqtt device refused', { device: username ?? client.id, clientId: client.id, reason: outcome.reason });
            connections?.refused(username ?? client.id);
            return done(Object.assign(new Error(outcome.reason), { returnCode: RETURN_CODES[outcome.refused] }) as AuthenticateError, false);
          }
          deviceOf.set(client, outcome.id);
          done(null, true);
        },
        (error: unknown) => {
          log.error('mqtt login failed', { device: username, error });
          done(Object.assign(new Error('login failed'), { returnCode: SERVER_UNAVAILABLE }) as AuthenticateError, false);
        },
      );
    },
    authorizePublish: (client, packet, done) => {
      const deviceId = client ? deviceOf.get(client) : undefined;
      if (deviceId && commands?.isAnswer(packet.topic)) {
        packet.retain = false;
        commands.answer(deviceId, packet.topic, Buffer.from(packet.payload)).then(
          () => done(null),
          (error: unknown) => done(error instanceof Error ? error : new Error(String(error))),
        );
        return;
      }
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
      // aedes reads this connection's next packet only once this one is handled: waiting is back-pressure
      sleep(messageRate.reserve(deviceId, Number.POSITIVE_INFINITY))
        .then(() => forwardWhenRoom(forward, envelope, backlogWaitMs))
        .then(
          () => done(null),
          (error: unknown) => {
            log.warn('mqtt message not forwarded; device not acknowledged', { device: deviceId, messageId: envelope.messageId, error });
            closedByGateway.add(deviceId);
            done(error instanceof Error ? error : new Error(String(error)));
          },
        );
    },
    authorizeSubscribe: (client, subscription, done) => {
      const deviceId = client ? deviceOf.get(client) : undefined;
      const granted = deviceId && commands ? commands.maySubscribe(deviceId, subscription) : null;
      if (!granted) log.warn('mqtt subscription refused', { device: deviceId, topic: subscription.topic, reason: 'a device subscribes only to its own command/<id>/req/ topics' });
      done(null, granted);
    },
  });
  if (options.commands) commands = serveMqttCommands(broker, { delivery: options.commands, log, deviceOf: (client) => deviceOf.get(client), ackTimeoutMs: options.commandAckTimeoutMs });

  /** The open connection of each device (its client id is its id, so it has at most one). */
  const connected = new Map<string, Client>();
  const connectionOf = new WeakMap<Client, string>();
  broker.on('client', (client) => {
    const deviceId = deviceOf.get(client);
    if (deviceId === undefined) return;
    connected.set(deviceId, client);
    if (connections) connectionOf.set(client, connections.connected(deviceId));
  });
  broker.on('clientDisconnect', (client) => {
    const deviceId = deviceOf.get(client);
    if (deviceId === undefined) return;
    if (connected.get(deviceId) === client) connected.delete(deviceId);
    const connectionId = connectionOf.get(client);
    // aedes sets _disconnected only when the client sent DISCONNECT.
    if (connectionId !== undefined) connections?.disconnected(deviceId, connectionId, (client as unknown as { _disconnected?: boolean })._disconnected === true);
  });

  return {
    disconnect: (deviceId) => {
      const client = connected.get(deviceId);
      if (!client) return;
      connected.delete(deviceId);
      log.info('mqtt connection closed', { device: deviceId, reason: 'the device\'s password was reset or the device deleted' });
      client.close();
    },
    handle: (socket) => {
      broker.handle(socket);
      limitPacketSize(socket, MAX_MQTT_PACKET_BYTES, (announced) => {
        metrics.refused('packet_too_large');
        log.warn('mqtt connection closed', { remote: socket.remoteAddress, reason: `a packet of ${announced} bytes exceeds ${MAX_MQTT_PACKET_BYTES}` });
      });
    },
    close: () => new Promise<void>((resolve) => broker.close(() => resolve())),
  };
}
