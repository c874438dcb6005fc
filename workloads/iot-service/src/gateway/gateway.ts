/**
 * The gateway's device-facing side: the servers of the enabled protocols, on one login, one set
 * of limits, one certificate and one set of metrics.
 *
 * Guarantees: `startGateway` resolves once a server listens for each protocol of `protocols`
 * (mqtt and http plain; mqtts and https with the certificate of `tlsDir`, tls.ts, read before
 * it resolves) — MQTT over both on one aedes server (a device's session is one, whichever it
 * uses), HTTP over both with one handler. Every connection is counted and capped
 * (connections.ts). Every listener sends what it writes at once (Nagle's algorithm off, as Node's
 * HTTP servers do by default), so a CONNACK written right after TLS 1.3's session tickets does not
 * wait for the device to acknowledge them. `ready()` throws while a TLS protocol is enabled and no
 * certificate loaded.
 * `deviceChanged(id)` (core reset the device's password or deleted it) forgets the device's
 * cached logins (devices.ts `forget`) and closes its open MQTT connection, so it must log in
 * again; `forgetLogins` (a change may have been missed) forgets every cached login, leaving
 * connections open; `trackDeviceChanges` makes the tracker (device-changes.ts) that hands core's
 * notices to both, logging each. `drain` (its pod is stopping, still in the Service's endpoints)
 * keeps serving but ends each HTTP connection with its next answer, so keep-alive devices
 * reconnect through the Service to a pod that stays. `close` stops accepting, closes device
 * connections, and stops following the certificate; closing again waits for the same.
 */

import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo, type Server } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import type { Logger } from '../shared/log.ts';
import { closeAfterEachAnswer, closeServer, listenOn } from '../shared/net.ts';
import type { ConnectionSink } from './connection-events.ts';
import type { CommandDelivery } from './command-delivery.ts';
import { countConnections } from './connections.ts';
import { DeviceChangeTracker } from './device-changes.ts';
import { DeviceAuthenticator, type DeviceAuthenticatorOptions, type DeviceCheck } from './devices.ts';
import type { Forward } from './forwarder.ts';
import { createHttpAdapter } from './http-adapter.ts';
import { connectRate, messageRate } from './limits.ts';
import { DeviceLogin, type DeviceLoginOptions } from './login.ts';
import { GatewayMetrics } from './metrics.ts';
import { createMqttAdapter } from './mqtt-adapter.ts';
import type { ServedProtocol } from './protocols.ts';
import { GatewayCertificate } from './tls.ts';
import type { TokenBuckets } from '../shared/token-buckets.ts';

export interface GatewayOptions {
  protocols: ReadonlySet<ServedProtocol>;
  host: string;
  ports: Record<ServedProtocol, number>;
  /** core's device check (devices.ts). */
  check: DeviceCheck;
  forward: Forward;
  log: Logger;
  tlsDir: string;
  tlsPollMs?: number;
  maxConnections?: number;
  backlogWaitMs?: number;
  devices?: DeviceAuthenticatorOptions;
  login?: DeviceLoginOptions;
  messageRate?: TokenBuckets;
  connectRate?: TokenBuckets;
  /** Told of MQTT connections and HTTP polls opened and ended, and of refused logins (connection-events.ts). */
  connections?: ConnectionSink;
  /** Commands to devices over MQTT and HTTP (command-delivery.ts). */
  commands?: CommandDelivery;
  /** How long an MQTT device has to acknowledge a command (default: mqtt-commands.ts's). */
  commandAckTimeoutMs?: number;
}

export interface Gateway {
  /** The port each enabled protocol listens on. */
  ports: Partial<Record<ServedProtocol, number>>;
  metrics: GatewayMetrics;
  ready(): void;
  deviceChanged(deviceId: string): void;
  forgetLogins(): void;
  drain(): void;
  close(): Promise<void>;
}

/** A tracker of core's device changes for the gateway `current()` returns (none yet: nothing is cached, nothing to do). */
export function trackDeviceChanges(log: Logger, current: () => Gateway | undefined): DeviceChangeTracker {
  return new DeviceChangeTracker({
    changed: (deviceId) => {
      log.info('device changed: its cached logins forgotten, its connection closed', { device: deviceId });
      current()?.deviceChanged(deviceId);
    },
    missed: (why) => {
      log.info('device changes may have been missed: every cached login forgotten', { why });
      current()?.forgetLogins();
    },
  });
}

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { protocols, log } = options;
  const metrics = new GatewayMetrics();
  const devices = new DeviceAuthenticator(options.check, options.devices);
  const login = new DeviceLogin(devices, log, options.login);
  const shared = { login, forward: options.forward, log, metrics, messageRate: options.messageRate ?? messageRate() };
  const certificate =
    protocols.has('mqtts') || protocols.has('https')
      ? new GatewayCertificate({ dir: options.tlsDir, log, pollMs: options.tlsPollMs, onRefused: () => metrics.refused('certificate') })
      : undefined;
  const mqtt = protocols.has('mqtt') || protocols.has('mqtts') ? await createMqttAdapter({ ...shared, connectRate: options.connectRate ?? connectRate(), backlogWaitMs: options.backlogWaitMs, connections: options.connections, commands: options.commands, commandAckTimeoutMs: options.commandAckTimeoutMs }) : undefined;
  const http = protocols.has('http') || protocols.has('https') ? createHttpAdapter({ ...shared, commands: options.commands, connections: options.connections }) : undefined;

  const servers = new Map<ServedProtocol, Server>();
  // Nagle's algorithm would hold a CONNACK until the device's kernel acknowledged the session
  // tickets sent before it, which it delays (40 ms on Linux): every cached login over TLS took 40 ms more.
  const noDelay = { noDelay: true };
  if (mqtt && protocols.has('mqtt')) servers.set('mqtt', createNetServer(noDelay, mqtt.handle));
  if (mqtt && certificate && protocols.has('mqtts')) servers.set('mqtts', certificate.secure(createTlsServer(noDelay, mqtt.handle)));
  const httpServers = [
    ...(http && protocols.has('http') ? [['http', createHttpServer(http)] as const] : []),
    ...(http && certificate && protocols.has('https') ? [['https', certificate.secure(createHttpsServer({}, http))] as const] : []),
  ];
  for (const [protocol, server] of httpServers) servers.set(protocol, server);
  const ports: Partial<Record<ServedProtocol, number>> = {};
  for (const [protocol, server] of servers) {
    countConnections(server, metrics, log, { max: options.maxConnections, limitedSource: (address) => login.sourceLimited(address) });
    await listenOn(server, { host: options.host, port: options.ports[protocol] });
    ports[protocol] = (server.address() as AddressInfo).port;
  }
  let closing: Promise<void> | undefined;
  return {
    ports,
    metrics,
    ready: () => certificate?.ready(),
    deviceChanged: (deviceId) => {
      devices.forget(deviceId);
      mqtt?.disconnect(deviceId);
    },
    forgetLogins: () => devices.forgetAll(),
    drain: () => httpServers.forEach(([, server]) => closeAfterEachAnswer(server)),
    close: () =>
      (closing ??= (async () => {
        certificate?.close();
        const closed = Promise.all([...servers.values()].map((server) => closeServer(server)));
        await mqtt?.close(); // ends MQTT connections, which closing their servers waits for; HTTP finishes open requests
        await closed;
      })()),
  };
}
