/**
 * core as the `fleet` scenario runs it (scenarios/fleet.ts): `node --import tsx bench/fleet/core.ts`.
 *
 * Guarantees: serves core's own API (core/api.ts `createCoreApi`, with its default bound on
 * password checks) on the real PostgreSQL store (shared/store.ts `PostgresStore`, as role
 * iot_core), reading config.yml (IOT_CONFIG_FILE), IOT_API_TOKEN, IOT_DEVICE_CHECK_TOKEN,
 * IOT_BROKER_CORE_PASSWORD and IOT_DATABASE_CORE_PASSWORD as core's main.ts does, on 127.0.0.1 at
 * the port of config.yml's `endpoints.core`; on the broker it keeps the streams in place and
 * announces device changes (its heartbeats, which the gateway follows), as core's main.ts does.
 * It differs from core's main.ts in what the benchmark does not measure: no health server (its
 * port, 8081, is the gateway's /metrics on this machine), and it serves at once (the database
 * image made the tables before the scenario registered the devices). On SIGTERM it stops
 * accepting, finishes open requests, says farewell on the broker and closes the pool.
 */
import { createServer } from 'node:http';
import { createCoreApi } from '../../workloads/iot-service/src/core/api.ts';
import { keepBrokerResources } from '../../workloads/iot-service/src/core/broker-resources.ts';
import { DeviceNotices } from '../../workloads/iot-service/src/core/device-notices.ts';
import { EventStreams } from '../../workloads/iot-service/src/core/event-stream.ts';
import { connectBroker } from '../../workloads/iot-service/src/shared/broker.ts';
import { BROKER_USERS, credential, DATABASE_ROLES, loadConfig } from '../../workloads/iot-service/src/shared/config.ts';
import { startComponent } from '../../workloads/iot-service/src/shared/lifecycle.ts';
import { createLogger } from '../../workloads/iot-service/src/shared/log.ts';
import { closeServer, listenOn } from '../../workloads/iot-service/src/shared/net.ts';
import { createPool, PostgresStore } from '../../workloads/iot-service/src/shared/store.ts';
import { serviceVersion } from '../../workloads/iot-service/src/shared/version.ts';

const log = createLogger('core');

await startComponent(log, serviceVersion(), async () => {
  const config = loadConfig();
  const pool = createPool(config.endpoints.database, DATABASE_ROLES.core, credential('IOT_DATABASE_CORE_PASSWORD'), log);
  const broker = await connectBroker({ broker: config.endpoints.broker, user: BROKER_USERS.core, password: credential('IOT_BROKER_CORE_PASSWORD'), name: 'core-fleet' });
  const stopping = new AbortController();
  const notices = new DeviceNotices({ log });
  notices.attach(broker);
  keepBrokerResources(broker, { stream: config.stream, events: config.events, log, signal: stopping.signal });
  const events = new EventStreams({ broker: () => broker, log });
  const api = createServer(createCoreApi({ store: new PostgresStore(pool), apiToken: credential('IOT_API_TOKEN'), deviceCheckToken: credential('IOT_DEVICE_CHECK_TOKEN'), notices, events, log }));
  await listenOn(api, { host: '127.0.0.1', port: config.endpoints.core.port });
  log.info('serving the API', { port: config.endpoints.core.port });
  return {
    stop: async () => {
      stopping.abort(new Error('stopping'));
      events.close();
      await closeServer(api);
      await notices.close();
      await broker.close();
      await pool.end();
    },
  };
});
