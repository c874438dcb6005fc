/**
 * processing's entry point: `node --import tsx src/processing/main.ts` (in the image:
 * `node dist/processing.mjs`).
 *
 * Guarantees: reads config.yml, IOT_BROKER_PROCESSING_PASSWORD (broker user `processing`) and
 * IOT_DATABASE_PROCESSING_PASSWORD (database role `iot_processing`: adding telemetry and dead
 * letters and deleting expired ones, no DDL); serves /healthz and /readyz on 8081 (ready =
 * consuming from the broker, the database answers, and no message has waited STALLED_AFTER_MS
 * with no batch written: a database that answers but stores nothing, a full disk say, makes
 * processing unready, so the instance is not reported Available); waits until it reaches its
 * tables (telemetry, dead_letters: the database image makes them), retrying, before it connects
 * to the broker, then consumes the telemetry stream as consume.ts says, keeps devices' connection states as
 * connection-state.ts says, and deletes telemetry
 * older than config.yml's retention as retention.ts says. Messages published while processing is away wait
 * in the stream. On SIGTERM it turns unready, acknowledges nothing more, disconnects
 * and closes the database pool; what it had not acknowledged is handed out again. If the broker
 * ends either consumer otherwise, it exits 1 (and is restarted).
 */

import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectBroker, watchLink } from '../shared/broker.ts';
import { BROKER_USERS, credential, DATABASE_ROLES, loadConfig } from '../shared/config.ts';
import { startHealthServer } from '../shared/health.ts';
import { startComponent } from '../shared/lifecycle.ts';
import { createLogger } from '../shared/log.ts';
import { HEALTH_PORT, LISTEN_HOST } from '../shared/ports.ts';
import { retry } from '../shared/retry.ts';
import { createPool, PostgresStore } from '../shared/store.ts';
import { serviceVersion } from '../shared/version.ts';
import { consumeTelemetry } from './consume.ts';
import { keepConnectionState } from './connection-state.ts';
import { WriteProgress } from './writer.ts';
import { keepRetention } from './retention.ts';

/** How long messages may wait with no batch written before processing calls itself unready. */
const STALLED_AFTER_MS = 60_000;

const log = createLogger('processing');
const version = serviceVersion();

await startComponent(log, version, async () => {
  const config = loadConfig();
  const pool = createPool(config.endpoints.database, DATABASE_ROLES.processing, credential('IOT_DATABASE_PROCESSING_PASSWORD'), log);
  const store = new PostgresStore(pool);
  const stopping = new AbortController();
  let connection: NatsConnection | undefined;
  let link = { up: false };
  let consuming = false;
  const progress = new WriteProgress();

  const health = await startHealthServer(
    {
      component: 'processing',
      version,
      checks: {
        broker: async () => {
          if (!consuming || !link.up) throw new Error('not consuming from the broker');
        },
        database: () => store.ping(),
        writing: async () => {
          const stalled = progress.stalledForMs();
          if (stalled > STALLED_AFTER_MS) throw new Error(`nothing written for ${Math.round(stalled / 1000)} s while messages wait`);
        },
      },
    },
    { host: LISTEN_HOST, port: HEALTH_PORT },
  );

  const running = (async () => {
    await retry(() => store.reachesTables(['telemetry', 'dead_letters', 'device_connections']), {
      signal: stopping.signal,
      onFailure: (error, failures) => log.warn('database not ready; retrying', { error, failures }),
    });
    keepRetention({ store, seconds: config.retention.seconds, log, signal: stopping.signal });
    connection = await connectBroker({ broker: config.endpoints.broker, user: BROKER_USERS.processing, password: credential('IOT_BROKER_PROCESSING_PASSWORD'), name: `processing-${hostname()}` });
    link = watchLink(connection);
    await Promise.all([
      consumeTelemetry(connection, { store, log, signal: stopping.signal, progress, onConsuming: () => (consuming = true) }),
      keepConnectionState(connection, { store, log, signal: stopping.signal }),
    ]);
  })();
  running.catch((error: unknown) => {
    if (stopping.signal.aborted) return;
    log.error('cannot consume', { error, instance: config.instance });
    process.exit(1);
  });

  return {
    stop: async () => {
      health.stopping();
      consuming = false;
      stopping.abort(new Error('stopping'));
      await running.catch(() => undefined);
      await connection?.close();
      await pool.end();
      await health.close();
    },
  };
});
