/**
 * The stream EVENTS against NATS Server's default of 1,000 consumers a stream, on a real NATS
 * Server with the broker image's users: 1,001 applications following at once through core's
 * `GET /v1/stream` (each an ordered consumer of EVENTS) all get the next event, on a stream an
 * older core made without the limit and core brought to it.
 */

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { createCoreApi } from '../src/core/api.ts';
import { DeviceNotices } from '../src/core/device-notices.ts';
import { EventStreams } from '../src/core/event-stream.ts';
import { MAX_STREAM_CONSUMERS } from '../src/shared/broker.ts';
import { ensureEventsStream, EVENTS_STREAM, EVENTS_SUBJECTS, publishEvents } from '../src/shared/events.ts';
import { followEvents } from '../src/simulator/index.ts';
import { MemoryStore } from './memory-store.ts';
import { API_TOKEN, captureLog, connectAs, connectToBroker, DEVICE_CHECK_TOKEN, HOST, waitFor } from './harness.ts';
import { startNatsServer, type NatsServer } from './nats-server.ts';

const FOLLOWERS = 1_001;
let broker: NatsServer;
let core: NatsConnection;
let admin: NatsConnection;
let server: Server | undefined;

before(async () => {
  broker = await startNatsServer();
  core = await connectAs(broker, 'core', 'core-test');
  admin = await connectToBroker(broker, 'publisher');
});
after(async () => {
  server?.closeAllConnections();
  server?.close();
  await admin?.close();
  await core?.close();
  await broker?.close();
});

test('1,001 applications following at once each have a consumer and get the next event, on a stream an older core made', { timeout: 60_000 }, async () => {
  const jsm = await jetstreamManager(core, { checkAPI: false });
  await jsm.streams.add({ name: EVENTS_STREAM, subjects: [EVENTS_SUBJECTS], storage: StorageType.File, retention: RetentionPolicy.Limits });
  await ensureEventsStream(jsm, { replicas: 1, maxBytes: 64 * 1024 * 1024 }, { seconds: 3_600, maxBytes: 64 * 1024 * 1024 });
  assert.equal((await jsm.streams.info(EVENTS_STREAM)).config.max_consumers, MAX_STREAM_CONSUMERS);

  const log = captureLog('core').log;
  const events = new EventStreams({ broker: () => core, log });
  server = createServer(createCoreApi({ store: new MemoryStore(), apiToken: API_TOKEN, deviceCheckToken: DEVICE_CHECK_TOKEN, notices: new DeviceNotices({ log }), events, log }));
  await new Promise<void>((resolve) => server!.listen(0, HOST, resolve));
  const coreUrl = `http://${HOST}:${(server.address() as AddressInfo).port}`;

  const stop = new AbortController();
  const received = new Array<string | undefined>(FOLLOWERS);
  const following = Array.from({ length: FOLLOWERS }, (_, i) => followEvents(coreUrl, { token: API_TOKEN, signal: stop.signal }, (event) => (received[i] = String(event.data.deviceId))));
  try {
    await waitFor(() => events.followers().length === FOLLOWERS, 'every application following', 30_000);
    const consumers = async () => (await jsm.streams.info(EVENTS_STREAM)).state.consumer_count;
    for (let count = await consumers(), deadline = Date.now() + 10_000; count < FOLLOWERS; count = await consumers()) {
      assert.ok(Date.now() < deadline, `${count} of ${FOLLOWERS} followers have a consumer`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    const at = new Date().toISOString();
    await publishEvents(() => jetstream(admin), [{ type: 'connection', deviceId: 'dev-followed', state: 'connected', connectionId: 'c-1', at }], { signal: stop.signal, onFailure: () => undefined });
    await waitFor(() => received.every((deviceId) => deviceId === 'dev-followed'), 'every application got the event', 10_000);
  } finally {
    stop.abort();
    await Promise.allSettled(following);
    events.close();
  }
});
