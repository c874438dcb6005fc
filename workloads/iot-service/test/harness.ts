/**
 * The reference service in one process on 127.0.0.1, for unit tests: core's API on the in-memory
 * store, an in-process aedes standing in for Mosquitto (user `iot` with the broker password), the
 * gateway's MQTT and HTTP adapters forwarding to it, and processing's persistent session writing
 * to the same store.
 *
 * Guarantees: every server listens on 127.0.0.1 on a free port and nothing dials any other
 * address; `close` ends every connection and server it started. `holdUpstream` makes the stand-in
 * broker withhold its PUBACKs until released, to observe what waits for them.
 */

import { Aedes } from 'aedes';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import mqtt from 'mqtt';
import { createCoreApi } from '../src/core/api.ts';
import { coreDeviceCheck, DeviceAuthenticator } from '../src/gateway/devices.ts';
import { connectBroker, type BrokerLink } from '../src/gateway/forwarder.ts';
import { createHttpAdapter } from '../src/gateway/http-adapter.ts';
import { startMqttAdapter, type MqttAdapter } from '../src/gateway/mqtt-adapter.ts';
import { createMessageHandler } from '../src/processing/writer.ts';
import { SERVICE_USER } from '../src/shared/config.ts';
import { createLogger, type Logger } from '../src/shared/log.ts';
import { closeServer, listenOn } from '../src/shared/net.ts';
import type { PublishPacket } from 'aedes';
import { MemoryStore } from './memory-store.ts';

export const HOST = '127.0.0.1';
export const API_TOKEN = 'test-api-token';
export const BROKER_PASSWORD = 'test-broker-password';

export interface LogCapture {
  log: Logger;
  lines: Array<Record<string, unknown>>;
}

export function captureLog(component: string): LogCapture {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, log: createLogger(component, (line) => lines.push(JSON.parse(line) as Record<string, unknown>)) };
}

const port = (server: Server | HttpServer) => (server.address() as AddressInfo).port;

/** An aedes on 127.0.0.1 standing in for Mosquitto: password auth, persistent sessions in memory. */
export interface UpstreamBroker {
  url: string;
  port: number;
  published: PublishPacket[];
  /** From now on PUBACKs wait until `release` is called. */
  hold(): { release(): void };
  close(): Promise<void>;
}

export async function startUpstreamBroker(): Promise<UpstreamBroker> {
  const published: PublishPacket[] = [];
  let held: Array<() => void> | undefined;
  const broker = await Aedes.createBroker({
    authenticate: (_client, username, password, done) => done(null, username === SERVICE_USER && password?.toString() === BROKER_PASSWORD),
    authorizePublish: (_client, packet, done) => {
      const accept = () => {
        published.push(packet);
        done(null);
      };
      if (held) held.push(accept);
      else accept();
    },
  });
  const server = createServer((socket) => broker.handle(socket));
  await listenOn(server, { host: HOST, port: 0 });
  return {
    url: `mqtt://${HOST}:${port(server)}`,
    port: port(server),
    published,
    hold: () => {
      const waiting: Array<() => void> = [];
      held = waiting;
      return {
        release: () => {
          held = undefined;
          for (const accept of waiting) accept();
        },
      };
    },
    close: async () => {
      const closed = closeServer(server);
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      await closed;
    },
  };
}

export interface Service {
  store: MemoryStore;
  upstream: UpstreamBroker;
  brokerLink: BrokerLink;
  coreUrl: string;
  gatewayHttpUrl: string;
  gatewayMqttUrl: string;
  logs: { core: LogCapture; gateway: LogCapture; processing: LogCapture };
  /** Stops processing's session (without acknowledging what it has not stored) and starts it again. */
  stopProcessing(): Promise<void>;
  startProcessing(): Promise<void>;
  close(): Promise<void>;
}

export async function startService(options: { processing?: boolean } = {}): Promise<Service> {
  const store = new MemoryStore();
  const logs = { core: captureLog('core'), gateway: captureLog('gateway'), processing: captureLog('processing') };
  const upstream = await startUpstreamBroker();

  const core: HttpServer = createHttpServer(createCoreApi({ store, apiToken: API_TOKEN, log: logs.core.log }));
  await listenOn(core, { host: HOST, port: 0 });

  const devices = new DeviceAuthenticator(coreDeviceCheck({ host: HOST, port: port(core) }, API_TOKEN));
  const link: BrokerLink = connectBroker({
    broker: { host: HOST, port: upstream.port },
    username: SERVICE_USER,
    password: BROKER_PASSWORD,
    clientId: 'gateway-test',
  });
  await waitFor(() => link.connected(), 'gateway connected to the broker');
  const gatewayMqtt: MqttAdapter = await startMqttAdapter({ devices, forward: link.forward, log: logs.gateway.log }, { host: HOST, port: 0 });
  const gatewayHttp: HttpServer = createHttpServer(createHttpAdapter({ devices, forward: link.forward, log: logs.gateway.log }));
  await listenOn(gatewayHttp, { host: HOST, port: 0 });

  let processing: { client: mqtt.MqttClient; stop: AbortController } | undefined;
  const startProcessing = async () => {
    const stop = new AbortController();
    const client = mqtt.connect(upstream.url, {
      username: SERVICE_USER,
      password: BROKER_PASSWORD,
      clientId: 'iot-processing',
      clean: false,
      reconnectPeriod: 0,
      manualConnect: true,
    });
    // Set before connecting: messages waiting in the session arrive right after CONNACK.
    client.handleMessage = createMessageHandler({ store, log: logs.processing.log, signal: stop.signal, delayMs: () => 5 });
    client.connect();
    await new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    });
    await client.subscribeAsync('telemetry/+', { qos: 1 });
    processing = { client, stop };
  };
  const stopProcessing = async () => {
    processing?.stop.abort(new Error('stopping'));
    await processing?.client.endAsync(true);
    processing = undefined;
  };
  if (options.processing !== false) await startProcessing();

  return {
    store,
    upstream,
    brokerLink: link,
    coreUrl: `http://${HOST}:${port(core)}`,
    gatewayHttpUrl: `http://${HOST}:${port(gatewayHttp)}`,
    gatewayMqttUrl: `mqtt://${HOST}:${gatewayMqtt.port}`,
    logs,
    stopProcessing,
    startProcessing,
    close: async () => {
      await stopProcessing();
      await gatewayMqtt.close();
      await closeServer(gatewayHttp);
      await link.close();
      await closeServer(core);
      await upstream.close();
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
