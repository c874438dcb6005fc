/**
 * processing's entry point: `node --import tsx src/processing/main.ts` (in the image:
 * `node dist/processing.mjs`).
 *
 * Guarantees: reads config.yml, IOT_BROKER_PASSWORD and IOT_DATABASE_PASSWORD; serves /healthz
 * and /readyz on 8081 (ready = subscribed at the broker and the database answers); creates the
 * schema if missing (retrying until the database accepts it) before it connects to the broker;
 * then holds one persistent MQTT session (client id `iot-processing`, clean session off) with a
 * QoS 1 subscription to `telemetry/+`, so messages published while it is away wait at the broker,
 * and writes each message as writer.ts says. On SIGTERM it turns unready, acknowledges nothing
 * more, disconnects and closes the database pool.
 */

import mqtt from 'mqtt';
import { credential, loadConfig, SERVICE_USER } from '../shared/config.ts';
import { startHealthServer } from '../shared/health.ts';
import { startComponent } from '../shared/lifecycle.ts';
import { createLogger } from '../shared/log.ts';
import { HEALTH_PORT, LISTEN_HOST } from '../shared/ports.ts';
import { retry } from '../shared/retry.ts';
import { createPool, ensureSchema, PostgresStore } from '../shared/store.ts';
import { TELEMETRY_SUBSCRIPTION } from '../shared/telemetry.ts';
import { serviceVersion } from '../shared/version.ts';
import { createMessageHandler } from './writer.ts';

/** One session for the whole instance: the broker keeps its messages while processing restarts. */
const PROCESSING_CLIENT_ID = 'iot-processing';

const log = createLogger('processing');
const version = serviceVersion();

await startComponent(log, version, async () => {
  const config = loadConfig();
  const brokerPassword = credential('IOT_BROKER_PASSWORD');
  const pool = createPool(config.endpoints.database, credential('IOT_DATABASE_PASSWORD'), log);
  const store = new PostgresStore(pool);
  const stopping = new AbortController();
  let subscribed = false;
  let client: mqtt.MqttClient | undefined;

  const health = await startHealthServer(
    {
      component: 'processing',
      version,
      checks: {
        broker: async () => {
          if (!client?.connected || !subscribed) throw new Error('not subscribed at the broker');
        },
        database: () => store.ping(),
      },
    },
    { host: LISTEN_HOST, port: HEALTH_PORT },
  );

  const consuming = retry(() => ensureSchema(pool), {
    signal: stopping.signal,
    onFailure: (error, failures) => log.warn('database not ready for the schema; retrying', { error, failures }),
  }).then(() => {
    const session = mqtt.connect({
      host: config.endpoints.brokerMqtt.host,
      port: config.endpoints.brokerMqtt.port,
      protocol: 'mqtt',
      username: SERVICE_USER,
      password: brokerPassword,
      clientId: PROCESSING_CLIENT_ID,
      clean: false,
      reconnectPeriod: 1_000,
      connectTimeout: 5_000,
    });
    session.handleMessage = createMessageHandler({ store, log, signal: stopping.signal });
    client = session;
    session.on('connect', (connack) => {
      session.subscribe(TELEMETRY_SUBSCRIPTION, { qos: 1 }, (error) => {
        if (error) return log.error('subscribe failed', { error });
        subscribed = true;
        log.info('consuming', { topic: TELEMETRY_SUBSCRIPTION, sessionPresent: connack.sessionPresent, instance: config.instance });
      });
    });
    session.on('close', () => {
      subscribed = false;
    });
    session.on('error', (error) => log.warn('broker connection error', { error }));
  });
  consuming.catch((error: unknown) => {
    if (stopping.signal.aborted) return;
    log.error('cannot consume', { error });
    process.exit(1);
  });

  return {
    stop: async () => {
      health.stopping();
      stopping.abort(new Error('stopping'));
      await client?.endAsync();
      await pool.end();
      await health.close();
    },
  };
});
