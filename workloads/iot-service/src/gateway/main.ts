/**
 * The gateway's entry point: `node --import tsx src/gateway/main.ts` (in the image:
 * `node dist/gateway.mjs`).
 *
 * Guarantees: reads config.yml, IOT_BROKER_PASSWORD, IOT_API_TOKEN (for core's device check) and
 * IOT_GATEWAY_PROTOCOLS; serves /healthz and /readyz on 8081 (ready = connected to the broker, its
 * telemetry stream in place, and core reachable) and the enabled device protocols (MQTT 1883,
 * HTTP 8080) at once; a device is acknowledged only for what the broker's stream stored, so
 * serving before the broker is connected loses nothing. On SIGTERM it turns unready, stops accepting devices, finishes open requests and
 * disconnects from the broker.
 */

import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { credential, loadConfig, SERVICE_USER } from '../shared/config.ts';
import { startHealthServer } from '../shared/health.ts';
import { startComponent } from '../shared/lifecycle.ts';
import { createLogger } from '../shared/log.ts';
import { closeServer, listenOn, tcpReachable } from '../shared/net.ts';
import { GATEWAY_HTTP_PORT, GATEWAY_MQTT_PORT, HEALTH_PORT, LISTEN_HOST } from '../shared/ports.ts';
import { serviceVersion } from '../shared/version.ts';
import { coreDeviceCheck, DeviceAuthenticator } from './devices.ts';
import { connectBrokerLink } from './forwarder.ts';
import { createHttpAdapter } from './http-adapter.ts';
import { startMqttAdapter } from './mqtt-adapter.ts';
import { gatewayProtocols } from './protocols.ts';

const log = createLogger('gateway');
const version = serviceVersion();

await startComponent(log, version, async () => {
  const config = loadConfig();
  const protocols = gatewayProtocols();
  const devices = new DeviceAuthenticator(coreDeviceCheck(config.endpoints.core, credential('IOT_API_TOKEN')));
  const broker = connectBrokerLink({
    broker: config.endpoints.broker,
    stream: config.stream,
    username: SERVICE_USER,
    password: credential('IOT_BROKER_PASSWORD'),
    name: `gateway-${hostname()}`,
    onError: (error) => log.warn('broker not ready', { error }),
  });
  const health = await startHealthServer(
    {
      component: 'gateway',
      version,
      checks: {
        broker: async () => {
          if (!broker.connected()) throw new Error('not connected to the broker');
        },
        core: () => tcpReachable(config.endpoints.core, 500),
      },
    },
    { host: LISTEN_HOST, port: HEALTH_PORT },
  );
  const mqttAdapter = protocols.has('mqtt')
    ? await startMqttAdapter({ devices, forward: broker.forward, log }, { host: LISTEN_HOST, port: GATEWAY_MQTT_PORT })
    : undefined;
  const httpAdapter = protocols.has('http') ? createServer(createHttpAdapter({ devices, forward: broker.forward, log })) : undefined;
  if (httpAdapter) await listenOn(httpAdapter, { host: LISTEN_HOST, port: GATEWAY_HTTP_PORT });
  log.info('serving devices', { protocols: [...protocols], instance: config.instance, configVersion: config.version });

  return {
    stop: async () => {
      health.stopping();
      await Promise.all([mqttAdapter?.close(), httpAdapter ? closeServer(httpAdapter) : undefined]);
      await broker.close();
      await health.close();
    },
  };
});
