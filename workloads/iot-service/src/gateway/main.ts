/**
 * The gateway's entry point: `node --import tsx src/gateway/main.ts` (in the image:
 * `node dist/gateway.mjs`).
 *
 * Guarantees: reads config.yml, IOT_BROKER_GATEWAY_PASSWORD (broker user `gateway`: publish
 * telemetry, follow device changes, nothing more), IOT_DEVICE_CHECK_TOKEN (core's device check,
 * the only thing that token is good for), IOT_GATEWAY_PROTOCOLS, IOT_GATEWAY_TLS_DIR (default
 * /etc/iot/tls: `tls.crt`, `tls.key`, optional `client-ca.crt`; read only when mqtts or https is
 * enabled) and
 * IOT_GATEWAY_MAX_CONNECTIONS (optional); serves /healthz, /readyz and /metrics on 8081 (ready =
 * connected to the broker, its telemetry stream in place, and — with mqtts or https — a
 * certificate loaded; not core, whose outage, a database failover's, refuses only the logins the
 * gateway cannot answer from its cache, for a retry) and the enabled device protocols (MQTT 1883, MQTT over TLS 8883,
 * HTTP 8080, HTTPS 8443) at once; a device is acknowledged only for what the broker's stream
 * stored, so serving before the broker is connected loses nothing. It follows core's
 * device-change notices on the broker (device-changes.ts): a device whose password was reset or
 * which was deleted has its cached logins forgotten and its MQTT connection closed, and every
 * cached login is forgotten when a notice may have been missed. It publishes each device's MQTT
 * connection events (connection-events.ts). Commands reach devices over a second broker
 * connection of its own (command-delivery.ts). On SIGTERM it turns unready and, in a pod, keeps
 * serving for 5 s while its Service lets go of it (lifecycle.ts `leaveEndpoints`), each HTTP
 * answer then closing its connection; then it stops accepting devices, closes their MQTT
 * connections, finishes open requests, publishes its devices' disconnects (for at most 5 s) and
 * disconnects from the broker.
 */

import { hostname } from 'node:os';
import { credential, loadConfig } from '../shared/config.ts';
import { startHealthServer } from '../shared/health.ts';
import { leaveEndpoints, startComponent } from '../shared/lifecycle.ts';
import { createLogger } from '../shared/log.ts';
import { GATEWAY_HTTP_PORT, GATEWAY_HTTPS_PORT, GATEWAY_MQTT_PORT, GATEWAY_MQTTS_PORT, HEALTH_PORT, LISTEN_HOST } from '../shared/ports.ts';
import { serviceVersion } from '../shared/version.ts';
import { ConnectionEvents } from './connection-events.ts';
import { connectBroker } from '../shared/broker.ts';
import { BROKER_USERS } from '../shared/config.ts';
import { CommandDelivery } from './command-delivery.ts';
import { coreDeviceCheck } from './devices.ts';
import { connectBrokerLink } from './forwarder.ts';
import { startGateway, trackDeviceChanges, type Gateway } from './gateway.ts';
import { maxConnections } from './limits.ts';
import { gatewayProtocols } from './protocols.ts';
import { DEFAULT_TLS_DIR } from './tls.ts';

const log = createLogger('gateway');
const version = serviceVersion();

await startComponent(log, version, async () => {
  const config = loadConfig();
  const protocols = gatewayProtocols();
  let gateway: Gateway | undefined;
  const deviceChanges = trackDeviceChanges(log, () => gateway);
  const broker = connectBrokerLink({
    broker: config.endpoints.broker,
    password: credential('IOT_BROKER_GATEWAY_PASSWORD'),
    name: `gateway-${hostname()}`,
    onError: (error) => log.warn('broker not ready', { error }),
    deviceChanges,
  });
  const connections = new ConnectionEvents({ js: broker.jetstream, log });
  const commandLink = connectBroker({ broker: config.endpoints.broker, user: BROKER_USERS.gateway, password: credential('IOT_BROKER_GATEWAY_PASSWORD'), name: `gateway-${hostname()}-commands` });
  commandLink.catch((error: unknown) => log.error('cannot connect to the broker for commands', { error }));
  gateway = await startGateway({
    protocols,
    host: LISTEN_HOST,
    ports: { mqtt: GATEWAY_MQTT_PORT, mqtts: GATEWAY_MQTTS_PORT, http: GATEWAY_HTTP_PORT, https: GATEWAY_HTTPS_PORT },
    check: coreDeviceCheck(config.endpoints.core, credential('IOT_DEVICE_CHECK_TOKEN')),
    forward: broker.forward,
    log,
    tlsDir: process.env.IOT_GATEWAY_TLS_DIR || DEFAULT_TLS_DIR,
    maxConnections: maxConnections(),
    connections,
    commands: new CommandDelivery(commandLink, log),
  });
  const health = await startHealthServer(
    {
      component: 'gateway',
      version,
      checks: {
        broker: async () => {
          if (!broker.connected()) throw new Error('not connected to the broker');
        },
        tls: async () => gateway.ready(),
      },
      metrics: () => gateway.metrics.render(),
    },
    { host: LISTEN_HOST, port: HEALTH_PORT },
  );
  log.info('serving devices', { protocols: [...protocols], ports: gateway.ports, instance: config.instance, configVersion: config.version });

  return {
    stop: async () => {
      health.stopping();
      gateway.drain();
      await leaveEndpoints();
      await gateway.close();
      await connections.flush(5_000);
      connections.close();
      await broker.close();
      await (await commandLink).drain();
      await health.close();
    },
  };
});
