/**
 * core's entry point: `node --import tsx src/core/main.ts` (in the image: `node dist/core.mjs`).
 *
 * Guarantees: reads config.yml, IOT_API_TOKEN, IOT_DEVICE_CHECK_TOKEN, IOT_BROKER_CORE_PASSWORD
 * (broker user `core`) and IOT_DATABASE_CORE_PASSWORD (database role `iot_core`: the registry and
 * reading telemetry, no DDL); serves /healthz and /readyz on 8081 at once (ready = its tables
 * were reached and the database answers); waits until it reaches its tables (devices, telemetry:
 * the database image makes them), retrying, and only then serves the API on 8080. It connects to the broker in the
 * background, retrying until it is in, keeps the streams and processing's consumer in place
 * there (broker-resources.ts) and announces device changes there (device-notices.ts); the broker
 * is no part of readiness (registration, the telemetry query and the gateway's device check need
 * none), only a password reset, device deletion or command waits for it (503 without). On SIGTERM it turns
 * unready and, in a pod, keeps serving for 5 s while its Service lets go of it (lifecycle.ts
 * `leaveEndpoints`), each answer then closing its connection; then it ends the open event streams (event-stream.ts: their applications reconnect to another
 * replica and resume), stops accepting, finishes open requests, says farewell on the broker and disconnects,
 * and closes the database pool. Commands to devices (commands.ts) go out over the same broker
 * connection, at most IOT_COMMANDS_PER_SECOND a second (optional, default 500).
 */

import { createServer } from 'node:http';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectBroker } from '../shared/broker.ts';
import { BROKER_USERS, credential, DATABASE_ROLES, loadConfig } from '../shared/config.ts';
import { startHealthServer } from '../shared/health.ts';
import { leaveEndpoints, startComponent } from '../shared/lifecycle.ts';
import { createLogger } from '../shared/log.ts';
import { closeAfterEachAnswer, closeServer, listenOn } from '../shared/net.ts';
import { retry } from '../shared/retry.ts';
import { createPool, PostgresStore } from '../shared/store.ts';
import { serviceVersion } from '../shared/version.ts';
import { createCoreApi } from './api.ts';
import { keepBrokerResources } from './broker-resources.ts';
import { Commands, commandRate } from './commands.ts';
import { DeviceNotices } from './device-notices.ts';
import { EventStreams } from './event-stream.ts';
import { CORE_API_PORT, HEALTH_PORT, LISTEN_HOST } from '../shared/ports.ts';

const log = createLogger('core');
const version = serviceVersion();

await startComponent(log, version, async () => {
  const config = loadConfig();
  const apiToken = credential('IOT_API_TOKEN');
  const deviceCheckToken = credential('IOT_DEVICE_CHECK_TOKEN');
  const brokerPassword = credential('IOT_BROKER_CORE_PASSWORD');
  const pool = createPool(config.endpoints.database, DATABASE_ROLES.core, credential('IOT_DATABASE_CORE_PASSWORD'), log);
  const store = new PostgresStore(pool);
  const stopping = new AbortController();
  let tablesReached = false;

  const health = await startHealthServer(
    {
      component: 'core',
      version,
      checks: {
        tables: async () => {
          if (!tablesReached) throw new Error('its tables not reached yet');
        },
        database: () => store.ping(),
      },
    },
    { host: LISTEN_HOST, port: HEALTH_PORT },
  );
  const notices = new DeviceNotices({ log });
  const commands = new Commands({ store, log, perSecond: commandRate() });
  let broker: NatsConnection | undefined;
  const events = new EventStreams({ broker: () => broker, log });
  const api = createServer(createCoreApi({ store, apiToken, deviceCheckToken, notices, events, log, commands }));

  const brokerConnected = retry(() => connectBroker({ broker: config.endpoints.broker, user: BROKER_USERS.core, password: brokerPassword, name: `core-${hostname()}` }), {
    signal: stopping.signal,
    onFailure: (error, failures) => log.warn('broker not reachable; device changes wait for it', { error, failures }),
  }).then(async (connection) => {
    if (stopping.signal.aborted) return connection.close();
    broker = connection;
    notices.attach(connection);
    commands.attach(connection);
    keepBrokerResources(connection, { stream: config.stream, events: config.events, log, signal: stopping.signal });
    log.info('connected to the broker');
  });
  brokerConnected.catch((error: unknown) => {
    if (!stopping.signal.aborted) log.error('cannot connect to the broker', { error });
  });

  const serving = retry(() => store.reachesTables(['devices', 'telemetry', 'applications', 'device_connections']), {
    signal: stopping.signal,
    onFailure: (error, failures) => log.warn('database not ready; retrying', { error, failures }),
  }).then(async () => {
    tablesReached = true;
    await listenOn(api, { host: LISTEN_HOST, port: CORE_API_PORT });
    log.info('serving the API', { port: CORE_API_PORT, instance: config.instance, configVersion: config.version });
  });
  serving.catch((error: unknown) => {
    if (stopping.signal.aborted) return;
    log.error('cannot serve the API', { error });
    process.exit(1);
  });

  return {
    stop: async () => {
      health.stopping();
      closeAfterEachAnswer(api);
      await leaveEndpoints();
      stopping.abort(new Error('stopping'));
      events.close();
      if (api.listening) await closeServer(api);
      await notices.close();
      commands.close();
      await broker?.close();
      await pool.end();
      await health.close();
    },
  };
});
