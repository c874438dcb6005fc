/**
 * Applications follow the tenant's stored telemetry through core (core/applications.ts,
 * core/event-stream.ts, processing/telemetry-events.ts) on the reference service in one process
 * with a real NATS Server: an application's own credential reads and does nothing else and is
 * refused once revoked, its open stream closed; the stream carries every stored message once it
 * is stored, per device in order, and an application that disconnects resumes after its last
 * event id, or from a time, missing nothing — also across a broker restart and a restart of
 * processing. Malformed resume points and filters get a 400 with the reason.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { EVENTS_STREAM } from '../src/shared/events.ts';
import { followEvents, HttpStatusError, issueApplication, postHttp, readCommand, registerDevice, revokeApplication, sendCommand, type DeviceCredentials, type StreamedEvent } from '../src/simulator/index.ts';
import { API_TOKEN, connectToBroker, startService, waitFor, type Service } from './harness.ts';

let service: Service;
const admin = () => ({ coreUrl: service.coreUrl, apiToken: API_TOKEN });

before(async () => {
  service = await startService({ heartbeatMs: 100 });
});
after(() => service.close());

/** Sends `count` messages as `device`, numbered from `first`, each until the gateway acknowledged it (503 while the broker is away: sent again, as a device does). */
async function send(device: DeviceCredentials, first: number, count: number): Promise<void> {
  for (let n = first; n < first + count; n++) {
    for (;;) {
      const sent = await postHttp(service.gatewayHttpUrl, device, { n }, `${device.id}-${n}`).then(
        () => true,
        (error: unknown) => {
          if (error instanceof HttpStatusError && error.status === 503) return false;
          throw error;
        },
      );
      if (sent) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/**
 * Follows until `done` holds for what arrived, then disconnects; the events and the id to resume
 * after. A 503 (core not yet back on the broker after its restart) is followed again after its
 * Retry-After, as an application does.
 */
async function followUntil(token: string, options: { lastEventId?: string; from?: string; devices?: string[] }, done: (events: StreamedEvent[]) => boolean) {
  const events: StreamedEvent[] = [];
  const stop = new AbortController();
  for (;;) {
    try {
      const lastEventId = await followEvents(service.coreUrl, { token, ...options, signal: stop.signal }, (event) => {
        events.push(event);
        if (done(events)) stop.abort();
      });
      return { events, lastEventId };
    } catch (error) {
      if (!(error instanceof HttpStatusError && error.status === 503)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

const numbers = (events: StreamedEvent[], deviceId: string) => events.filter((e) => e.type === 'telemetry' && e.data.deviceId === deviceId).map((e) => (e.data.payload as { n: number }).n);

test('an application token reads (stream, telemetry) and sends commands but cannot register devices or issue credentials, and is refused once revoked, its open stream ended', async () => {
  const app = await issueApplication(admin(), 'dashboard');
  await assert.rejects(issueApplication(admin(), 'dashboard'), (e: unknown) => e instanceof HttpStatusError && e.status === 409);
  await assert.rejects(issueApplication(admin(), 'bad id'), (e: unknown) => e instanceof HttpStatusError && e.status === 400);
  const device = await registerDevice(admin(), 'dev-app-rights');
  await send(device, 0, 1);
  const asApp = { coreUrl: service.coreUrl, apiToken: app.token };
  await assert.rejects(registerDevice(asApp, 'dev-by-app'), (e: unknown) => e instanceof HttpStatusError && e.status === 403 && /reading and commands only/.test(e.body));
  await assert.rejects(issueApplication(asApp, 'another'), (e: unknown) => e instanceof HttpStatusError && e.status === 403);
  await assert.rejects(registerDevice({ coreUrl: service.coreUrl, apiToken: `${app.token}x` }, 'dev-by-forger'), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
  await waitFor(() => service.store.rows.size > 0, 'stored');
  const read = await fetch(`${service.coreUrl}/v1/devices/dev-app-rights/telemetry`, { headers: { Authorization: `Bearer ${app.token}` } });
  assert.equal(read.status, 200, 'it reads telemetry');
  const command = await sendCommand(asApp, device.id, { name: 'reboot' });
  assert.equal(command.status, 202, 'it sends a command');
  assert.equal((await readCommand(asApp, device.id, String(command.body.commandId))).state, 'queued', 'and reads its state');

  let ended = false;
  const following = followEvents(service.coreUrl, { token: app.token }, () => undefined).then(() => (ended = true));
  await waitFor(() => service.coreEvents.followers().includes('dashboard'), 'the application following');
  await revokeApplication(admin(), 'dashboard');
  await following;
  assert.ok(ended, 'the open stream ended after revocation');
  await assert.rejects(followEvents(service.coreUrl, { token: app.token }, () => undefined), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
  await assert.rejects(revokeApplication(admin(), 'dashboard'), (e: unknown) => e instanceof HttpStatusError && e.status === 404);
});

test('an application follows every stored message, in order per device, and resumes after its disconnect, a broker restart and a restart of processing, missing nothing', { timeout: 60_000 }, async () => {
  const app = await issueApplication(admin(), 'follower');
  const [a, b] = [await registerDevice(admin(), 'dev-follow-a'), await registerDevice(admin(), 'dev-follow-b')];
  const startedAt = new Date().toISOString();
  await Promise.all([send(a, 0, 20), send(b, 0, 20)]);

  // First connection: from a time, until 10 of device a's messages arrived, then it disconnects.
  const first = await followUntil(app.token, { from: startedAt }, (events) => numbers(events, a.id).length >= 10);
  assert.ok(first.lastEventId, 'it has an id to resume after');
  // Meanwhile more is stored, across a restart of the broker.
  await send(a, 20, 10);
  await service.broker.kill();
  await service.broker.start();
  await Promise.all([send(a, 30, 10), send(b, 20, 20)]);
  // Processing restarts: what it had not acknowledged is handed out again (writer.ts keeps a redelivered message, so its event is published again).
  await service.stopProcessing();
  await service.startProcessing();

  const second = await followUntil(app.token, { lastEventId: first.lastEventId }, (events) => numbers([...first.events, ...events], a.id).includes(39) && numbers([...first.events, ...events], b.id).includes(39));
  const all = [...first.events, ...second.events];
  for (const device of [a, b]) {
    const seen = [...new Set(numbers(all, device.id))];
    assert.deepEqual([...seen].sort((x, y) => x - y), Array.from({ length: 40 }, (_, n) => n), `${device.id}: every message`);
    // The promise is the order processing stored them: a delivery lost with the broker is handed out
    // again after the consumer's ack wait, after messages of the device pulled since (docs: "In order per device").
    const stored = [...service.store.rows.values()].filter((row) => row.deviceId === device.id).map((row) => (row.payload as { n: number }).n);
    assert.deepEqual(seen, stored, `${device.id}: in the order stored`);
  }
  const ids = all.map((e) => Number(e.id));
  assert.deepEqual(ids, [...ids].sort((x, y) => x - y), 'ids only grow');
  assert.equal(new Set(ids).size, ids.length, 'no event sent twice across the resume');
  for (const event of all) assert.ok(service.store.rows.has(JSON.stringify([event.data.deviceId, event.data.messageId])), 'every event is of a stored message');
});

test('a device filter keeps only those devices\' events; an application that starts without a position resumes from the one core opened with', { timeout: 60_000 }, async () => {
  const app = await issueApplication(admin(), 'filtered');
  const [a, b] = [await registerDevice(admin(), 'dev-filter-a'), await registerDevice(admin(), 'dev-filter-b')];
  // It connects with no position and leaves before any event, once core told it the stream's position.
  const stop = new AbortController();
  let told: string | undefined;
  const opening = followEvents(service.coreUrl, { token: app.token, devices: [a.id], signal: stop.signal, onPosition: (id) => (told = id) }, () => undefined);
  await waitFor(() => told !== undefined, 'the opening position');
  stop.abort();
  const position = await opening;
  assert.match(position ?? '', /^\d+$/, 'the opening position');
  assert.equal(position, told);
  await Promise.all([send(a, 0, 5), send(b, 0, 5)]);
  const resumed = await followUntil(app.token, { lastEventId: position, devices: [a.id] }, (events) => events.length >= 5);
  assert.deepEqual(numbers(resumed.events, a.id), [0, 1, 2, 3, 4], 'everything of device a since it left');
  assert.deepEqual(numbers(resumed.events, b.id), [], 'nothing of device b');
});

test('a malformed resume point or device filter gets 400 with the reason', async () => {
  const app = await issueApplication(admin(), 'careless');
  const get = async (query: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${service.coreUrl}/v1/stream${query}`, { headers: { Authorization: `Bearer ${app.token}`, ...headers } });
    return { status: response.status, body: await response.text() };
  };
  assert.deepEqual(await get('?from=yesterday'), { status: 400, body: JSON.stringify({ error: 'from must be an RFC 3339 time, e.g. 2026-11-29T08:00:00Z' }) });
  assert.equal((await get('', { 'Last-Event-ID': '-3' })).status, 400);
  assert.match((await get('?after=x')).body, /Last-Event-ID \(or after\) must be an event id/);
  assert.match((await get('?device=a%20b')).body, /is not a device id/);
  const inspector = await connectToBroker(service.broker, 'inspect-events');
  const { config } = await (await jetstreamManager(inspector)).streams.info(EVENTS_STREAM);
  await inspector.close();
  assert.ok(config.max_age >= 24 * 3600 * 1e9, 'the events stream keeps at least a day');
});
