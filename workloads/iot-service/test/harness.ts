/**
 * The reference service in one process on 127.0.0.1, for unit tests: a real NATS Server with
 * JetStream as the broker, configured by the broker image's own entry point (nats-server.ts), each
 * component connected as its own broker user; core's API on the in-memory store, making the
 * broker's streams and consumers, announcing device changes there and serving the event stream;
 * the gateway's MQTT and HTTP adapters forwarding to the broker, publishing connection events and
 * following core's device changes; and processing consuming the telemetry stream into the same
 * store (announcing what it stored as events) and keeping connection states there — with the components' own code, wired as
 * their entry points wire them. With `tlsDir` the gateway also serves MQTT over TLS and HTTPS
 * with the certificate there.
 *
 * Guarantees: every server listens on 127.0.0.1 on a free port and nothing dials any other
 * address; `close` ends every connection and server it started. `broker.pause()` makes the broker
 * withhold every acknowledgement until `broker.resume()`, to observe what waits for them;
 * `lastInStream` reads the newest message of a device still in the stream (not yet taken by
 * processing). `connectToBroker` connects as the tests' own broker user, allowed everything;
 * `connectAs` as a component's user.
 */

import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo, Server } from 'node:net';
import { createCoreApi } from '../src/core/api.ts';
import { keepBrokerResources } from '../src/core/broker-resources.ts';
import { Commands } from '../src/core/commands.ts';
import { DeviceNotices } from '../src/core/device-notices.ts';
import { EventStreams } from '../src/core/event-stream.ts';
import { CommandDelivery } from '../src/gateway/command-delivery.ts';
import { coreDeviceCheck } from '../src/gateway/devices.ts';
import { connectBrokerLink, type BrokerLink } from '../src/gateway/forwarder.ts';
import { startGateway, trackDeviceChanges, type Gateway, type GatewayOptions } from '../src/gateway/gateway.ts';
import type { ServedProtocol } from '../src/gateway/protocols.ts';
import { ConnectionEvents } from '../src/gateway/connection-events.ts';
import { keepConnectionState } from '../src/processing/connection-state.ts';
import { consumeTelemetry } from '../src/processing/consume.ts';
import { connectBroker, TELEMETRY_STREAM, telemetrySubject } from '../src/shared/broker.ts';
import { BROKER_USERS, DEFAULT_EVENTS_SECONDS, type StreamConfig } from '../src/shared/config.ts';
import { createLogger, type Logger } from '../src/shared/log.ts';
import { closeServer, listenOn } from '../src/shared/net.ts';
import { decodeEnvelope, type TelemetryEnvelope } from '../src/shared/telemetry.ts';
import { MemoryStore } from './memory-store.ts';
import { ADMIN_PASSWORD, ADMIN_USER, BROKER_PASSWORDS, startNatsServer, type NatsServer } from './nats-server.ts';

export const HOST = '127.0.0.1';
export const API_TOKEN = 'test-api-token';
/** The gateway's token: core's device check only. */
export const DEVICE_CHECK_TOKEN = 'test-device-check-token';

export interface LogCapture {
  log: Logger;
  lines: Array<Record<string, unknown>>;
}

export function captureLog(component: string): LogCapture {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, log: createLogger(component, (line) => lines.push(JSON.parse(line) as Record<string, unknown>)) };
}

const port = (server: Server | HttpServer) => (server.address() as AddressInfo).port;

/** The broker as components reach it. */
export const brokerEndpoint = (broker: NatsServer) => ({ host: HOST, port: broker.port });

/** A connection as the tests' own user, allowed everything. */
export function connectToBroker(broker: NatsServer, name: string): Promise<NatsConnection> {
  return connectBroker({ broker: brokerEndpoint(broker), user: ADMIN_USER, password: ADMIN_PASSWORD, name });
}

/** A connection as a component's broker user, with that user's permissions. */
export function connectAs(broker: NatsServer, user: keyof typeof BROKER_USERS, name: string): Promise<NatsConnection> {
  return connectBroker({ broker: brokerEndpoint(broker), user: BROKER_USERS[user], password: BROKER_PASSWORDS[user], name });
}

export interface Service {
  store: MemoryStore;
  broker: NatsServer;
  stream: StreamConfig;
  brokerLink: BrokerLink;
  coreUrl: string;
  /** core's device-change notices. */
  coreNotices: DeviceNotices;
  /** core's open event streams. */
  coreEvents: EventStreams;
  gatewayHttpUrl: string;
  gatewayMqttUrl: string;
  /** With `tlsDir`: */
  gatewayMqttsUrl: string;
  gatewayHttpsUrl: string;
  gateway: Gateway;
  /** The gateway's connection events (connection-events.ts). */
  connectionEvents: ConnectionEvents;
  /** How many device checks the gateway sent to core. */
  deviceChecks(): number;
  logs: { core: LogCapture; gateway: LogCapture; processing: LogCapture };
  /** The newest message of `deviceId` still in the stream, or undefined. */
  lastInStream(deviceId: string): Promise<TelemetryEnvelope | undefined>;
  /** Stops processing (without acknowledging what it has not stored) and starts it again. */
  stopProcessing(): Promise<void>;
  startProcessing(): Promise<void>;
  close(): Promise<void>;
}

export type GatewayTestOptions = Partial<Pick<GatewayOptions, 'backlogWaitMs' | 'tlsDir' | 'tlsPollMs' | 'maxConnections' | 'devices' | 'login' | 'messageRate' | 'connectRate' | 'commandAckTimeoutMs'>>;

export interface ServiceOptions {
  processing?: boolean;
  stream?: Partial<StreamConfig>;
  gateway?: GatewayTestOptions;
  coreChecks?: { concurrency: number; maxQueued: number };
  /** core's command rate (default: its own). */
  commandsPerSecond?: number;
  /** How often core checks the broker's streams and consumer (default: its own, 5 s). */
  brokerCheckMs?: number;
  /** How often an idle event stream gets a comment line (default: its own, 15 s). */
  heartbeatMs?: number;
}

export async function startService(options: ServiceOptions = {}): Promise<Service> {
  const store = new MemoryStore();
  const logs = { core: captureLog('core'), gateway: captureLog('gateway'), processing: captureLog('processing') };
  const broker = await startNatsServer();
  const stream: StreamConfig = { replicas: 1, maxBytes: 64 * 1024 * 1024, ...options.stream };

  const notices = new DeviceNotices({ log: logs.core.log });
  const commands = new Commands({ store, log: logs.core.log, perSecond: options.commandsPerSecond });
  const coreBroker = await connectAs(broker, 'core', 'core-test');
  const events = new EventStreams({ broker: () => coreBroker, log: logs.core.log, heartbeatMs: options.heartbeatMs, recheckMs: 200 });
  const core: HttpServer = createHttpServer(createCoreApi({ store, apiToken: API_TOKEN, deviceCheckToken: DEVICE_CHECK_TOKEN, notices, events, log: logs.core.log, checks: options.coreChecks, commands }));
  await listenOn(core, { host: HOST, port: 0 });
  notices.attach(coreBroker);
  commands.attach(coreBroker);
  const coreStopping = new AbortController();
  keepBrokerResources(coreBroker, { stream, events: { seconds: DEFAULT_EVENTS_SECONDS, maxBytes: stream.maxBytes }, log: logs.core.log, signal: coreStopping.signal, checkMs: options.brokerCheckMs });

  let gateway: Gateway | undefined;
  const deviceChanges = trackDeviceChanges(logs.gateway.log, () => gateway);
  const link = connectBrokerLink({ broker: brokerEndpoint(broker), password: BROKER_PASSWORDS.gateway, name: 'gateway-test', timeoutMs: 2_000, deviceChanges });
  await waitFor(() => link.connected(), 'gateway connected to the broker');
  const connections = new ConnectionEvents({ js: link.jetstream, log: logs.gateway.log });
  const commandLink = connectAs(broker, 'gateway', 'gateway-test-commands');
  let deviceChecks = 0;
  const check = coreDeviceCheck({ host: HOST, port: port(core) }, DEVICE_CHECK_TOKEN);
  const protocols = new Set<ServedProtocol>(options.gateway?.tlsDir ? ['mqtt', 'mqtts', 'http', 'https'] : ['mqtt', 'http']);
  gateway = await startGateway({
    protocols,
    host: HOST,
    ports: { mqtt: 0, mqtts: 0, http: 0, https: 0 },
    check: (id, password) => {
      deviceChecks++;
      return check(id, password);
    },
    forward: link.forward,
    log: logs.gateway.log,
    tlsDir: '/nonexistent',
    connections,
    commands: new CommandDelivery(commandLink, logs.gateway.log),
    ...options.gateway,
  });
  const inspector = await connectToBroker(broker, 'test-inspector');

  let processing: { connection: NatsConnection; stop: AbortController; running: Promise<void> } | undefined;
  const startProcessing = async () => {
    const stop = new AbortController();
    const connection = await connectAs(broker, 'processing', 'processing-test');
    let consuming = false;
    const running = Promise.all([
      consumeTelemetry(connection, { store, log: logs.processing.log, signal: stop.signal, delayMs: () => 5, onConsuming: () => (consuming = true) }),
      keepConnectionState(connection, { store, log: logs.processing.log, signal: stop.signal }),
    ]).then(() => undefined);
    running.catch(() => undefined);
    await waitFor(() => consuming, 'processing consuming');
    processing = { connection, stop, running };
  };
  const stopProcessing = async () => {
    if (!processing) return;
    processing.stop.abort(new Error('stopping'));
    await processing.running.catch(() => undefined);
    await processing.connection.close();
    processing = undefined;
  };
  if (options.processing !== false) await startProcessing();

  return {
    store,
    broker,
    stream,
    brokerLink: link,
    coreUrl: `http://${HOST}:${port(core)}`,
    coreNotices: notices,
    coreEvents: events,
    gatewayHttpUrl: `http://${HOST}:${gateway.ports.http}`,
    gatewayMqttUrl: `mqtt://${HOST}:${gateway.ports.mqtt}`,
    gatewayMqttsUrl: `mqtts://${HOST}:${gateway.ports.mqtts}`,
    gatewayHttpsUrl: `https://${HOST}:${gateway.ports.https}`,
    gateway,
    connectionEvents: connections,
    deviceChecks: () => deviceChecks,
    logs,
    lastInStream: async (deviceId) => {
      const jsm = await jetstreamManager(inspector);
      const message = await jsm.streams.getMessage(TELEMETRY_STREAM, { last_by_subj: telemetrySubject(deviceId) });
      return message ? decodeEnvelope(Buffer.from(message.data)) : undefined;
    },
    stopProcessing,
    startProcessing,
    close: async () => {
      broker.resume();
      await stopProcessing();
      await gateway.close();
      await connections.flush(5_000);
      connections.close();
      await link.close();
      await (await commandLink).close();
      coreStopping.abort();
      events.close();
      await notices.close();
      await coreBroker.close();
      await inspector.close();
      await closeServer(core);
      await broker.close();
    },
  };
}

export async function waitFor(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
