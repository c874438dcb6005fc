/**
 * core as the `fleet` scenario runs it (scenarios/fleet.ts): `node --import tsx bench/fleet/core.ts`.
 *
 * Guarantees: serves core's own API (core/api.ts `createCoreApi`, with its default bound on
 * password checks) on the real PostgreSQL store (shared/store.ts `PostgresStore`), reading
 * config.yml (IOT_CONFIG_FILE), IOT_API_TOKEN and IOT_DATABASE_PASSWORD as core's main.ts does,
 * on 127.0.0.1 at the port of config.yml's `endpoints.core`. It differs from core's main.ts in
 * what the benchmark does not measure: no health server (its port, 8081, is the gateway's
 * /metrics on this machine) and no schema creation (the scenario made the schema before seeding
 * the devices). On SIGTERM it stops accepting, finishes open requests and closes the pool.
 */
import { createServer } from 'node:http';
import { createCoreApi } from '../../workloads/iot-service/src/core/api.ts';
import { credential, loadConfig } from '../../workloads/iot-service/src/shared/config.ts';
import { startComponent } from '../../workloads/iot-service/src/shared/lifecycle.ts';
import { createLogger } from '../../workloads/iot-service/src/shared/log.ts';
import { closeServer, listenOn } from '../../workloads/iot-service/src/shared/net.ts';
import { createPool, PostgresStore } from '../../workloads/iot-service/src/shared/store.ts';
import { serviceVersion } from '../../workloads/iot-service/src/shared/version.ts';

const log = createLogger('core');

await startComponent(log, serviceVersion(), async () => {
  const config = loadConfig();
  const pool = createPool(config.endpoints.database, credential('IOT_DATABASE_PASSWORD'), log);
  const api = createServer(createCoreApi({ store: new PostgresStore(pool), apiToken: credential('IOT_API_TOKEN'), log }));
  await listenOn(api, { host: '127.0.0.1', port: config.endpoints.core.port });
  log.info('serving the API', { port: config.endpoints.core.port });
  return {
    stop: async () => {
      await closeServer(api);
      await pool.end();
    },
  };
});
