/**
 * core's API on 127.0.0.1 over the in-memory store: registration, password reset and deletion
 * (each announced, refused while no announcement is possible), tokens (the api token everywhere,
 * the gateway's device-check token on the device check alone), the telemetry query and the
 * gateway's device check.
 */

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createCoreApi } from '../src/core/api.ts';
import { closeServer, listenOn } from '../src/shared/net.ts';
import { API_TOKEN, captureLog, DEVICE_CHECK_TOKEN, HOST, waitFor } from './harness.ts';
import { EventStreams } from '../src/core/event-stream.ts';
import { MemoryStore } from './memory-store.ts';

const store = new MemoryStore();
/** What core announced, and whether it may (the broker connection). */
const notices = {
  up: true,
  announced: [] as string[],
  connected: () => notices.up,
  announce: async (deviceId: string) => void notices.announced.push(deviceId),
};
let server: Server;
let base: string;

before(async () => {
  server = createServer(createCoreApi({ store, apiToken: API_TOKEN, deviceCheckToken: DEVICE_CHECK_TOKEN, notices, events: new EventStreams({ broker: () => undefined, log: captureLog('core').log }), log: captureLog('core').log }));
  await listenOn(server, { host: HOST, port: 0 });
  base = `http://${HOST}:${(server.address() as AddressInfo).port}`;
});
after(() => closeServer(server));

function call(path: string, init: { method?: string; token?: string | null; body?: unknown; contentType?: string } = {}) {
  const headers: Record<string, string> = {};
  if (init.token !== null) headers.Authorization = `Bearer ${init.token ?? API_TOKEN}`;
  if (init.body !== undefined) headers['Content-Type'] = init.contentType ?? 'application/json';
  return fetch(`${base}${path}`, {
    method: init.method ?? (init.body !== undefined ? 'POST' : 'GET'),
    headers,
    body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
  });
}

test('POST /v1/devices: 201 with a password stored only hashed; the same id again 409', async () => {
  const created = await call('/v1/devices', { body: { id: 'dev-1' } });
  assert.equal(created.status, 201);
  const body = (await created.json()) as { id: string; password: string };
  assert.equal(body.id, 'dev-1');
  assert.ok(body.password.length >= 32);
  assert.match(store.devices.get('dev-1') ?? '', /^sha256\$/);
  assert.ok(!(store.devices.get('dev-1') ?? '').includes(body.password));

  const again = await call('/v1/devices', { body: { id: 'dev-1' } });
  assert.equal(again.status, 409);
});

test('no token, a wrong token or another scheme: 401 on every route', async () => {
  for (const token of [null, 'wrong', '']) {
    assert.equal((await call('/v1/devices', { token, body: { id: 'dev-x' } })).status, 401);
    assert.equal((await call('/v1/devices/dev-1/telemetry', { token })).status, 401);
    assert.equal((await call('/v1/internal/device-auth', { token, body: { id: 'dev-1', password: 'x' } })).status, 401);
  }
  const basic = await fetch(`${base}/v1/devices/dev-1/telemetry`, { headers: { Authorization: `Basic ${Buffer.from(`x:${API_TOKEN}`).toString('base64')}` } });
  assert.equal(basic.status, 401);
  assert.equal(store.devices.has('dev-x'), false);
});

test('the device-check token: the device check only; 401 on every other route, method and path', async () => {
  const created = (await (await call('/v1/devices', { body: { id: 'dev-check' } })).json()) as { password: string };
  const check = await call('/v1/internal/device-auth', { token: DEVICE_CHECK_TOKEN, body: { id: 'dev-check', password: created.password } });
  assert.equal(check.status, 200);
  assert.deepEqual(await check.json(), { authenticated: true });
  assert.equal((await call('/v1/devices', { token: DEVICE_CHECK_TOKEN, body: { id: 'dev-by-gateway' } })).status, 401);
  assert.equal((await call('/v1/devices/dev-check/telemetry', { token: DEVICE_CHECK_TOKEN })).status, 401);
  assert.equal((await call('/v1/internal/device-auth', { token: DEVICE_CHECK_TOKEN })).status, 401, 'another method');
  assert.equal((await call('/v1/nothing', { token: DEVICE_CHECK_TOKEN })).status, 401, 'an unknown path');
  assert.equal(store.devices.has('dev-by-gateway'), false);
  const byAdmin = await call('/v1/internal/device-auth', { body: { id: 'dev-check', password: 'wrong' } });
  assert.equal(byAdmin.status, 200, 'the api token still checks devices');
  assert.deepEqual(await byAdmin.json(), { authenticated: false });
});

async function deviceCheck(id: string, password: string): Promise<boolean> {
  const response = await call('/v1/internal/device-auth', { token: DEVICE_CHECK_TOKEN, body: { id, password } });
  assert.equal(response.status, 200);
  return ((await response.json()) as { authenticated: boolean }).authenticated;
}

test('POST /v1/devices/<id>/password: a fresh password, the old one refused from then on, announced after it is stored; 404 for an unknown device', async () => {
  const { password: old } = (await (await call('/v1/devices', { body: { id: 'dev-reset' } })).json()) as { password: string };
  notices.announced.length = 0;
  const reset = await call('/v1/devices/dev-reset/password', { method: 'POST' });
  assert.equal(reset.status, 200);
  const body = (await reset.json()) as { id: string; password: string };
  assert.equal(body.id, 'dev-reset');
  assert.notEqual(body.password, old);
  assert.deepEqual(notices.announced, ['dev-reset']);
  assert.equal(await deviceCheck('dev-reset', old), false, 'the old password is refused');
  assert.equal(await deviceCheck('dev-reset', body.password), true, 'the new one is accepted');

  assert.equal((await call('/v1/devices/nobody/password', { method: 'POST' })).status, 404);
  assert.equal((await call('/v1/devices/a%2Fb/password', { method: 'POST' })).status, 404);
  assert.equal((await call('/v1/devices/dev-reset/password')).status, 405);
  assert.deepEqual(notices.announced, ['dev-reset'], 'nothing announced for an unknown device');
});

test('DELETE /v1/devices/<id>: 204, refused from then on, its telemetry still readable; 404 for an unknown device, announced all the same', async () => {
  const { password } = (await (await call('/v1/devices', { body: { id: 'dev-gone' } })).json()) as { password: string };
  await store.insertTelemetry([{ deviceId: 'dev-gone', messageId: 'kept', receivedAt: new Date().toISOString(), payload: { t: 1 } }]);
  notices.announced.length = 0;
  const deleted = await call('/v1/devices/dev-gone', { method: 'DELETE' });
  assert.equal(deleted.status, 204);
  assert.equal(await deleted.text(), '');
  assert.deepEqual(notices.announced, ['dev-gone']);
  assert.equal(store.devices.has('dev-gone'), false);
  assert.equal(await deviceCheck('dev-gone', password), false, 'a deleted device is refused');
  const telemetry = await call('/v1/devices/dev-gone/telemetry');
  assert.equal(telemetry.status, 200, 'its telemetry stays readable');
  assert.deepEqual(((await telemetry.json()) as Array<{ messageId: string }>).map((r) => r.messageId), ['kept']);

  assert.equal((await call('/v1/devices/dev-gone', { method: 'DELETE' })).status, 404, 'gone already');
  assert.deepEqual(notices.announced, ['dev-gone', 'dev-gone'], 'a repeated DELETE is announced again');
  assert.equal((await call('/v1/devices/dev-gone')).status, 404, 'a deleted device has no resource');
  assert.equal((await call('/v1/devices/dev-gone', { method: 'PUT' })).status, 405);
  const registeredAgain = await call('/v1/devices', { body: { id: 'dev-gone' } });
  assert.equal(registeredAgain.status, 201, 'the id may be registered again');
});

test('reset and deletion: api token only; while core cannot announce, 503 with Retry-After and nothing changed', async () => {
  const { password } = (await (await call('/v1/devices', { body: { id: 'dev-guarded' } })).json()) as { password: string };
  for (const token of [DEVICE_CHECK_TOKEN, 'wrong']) {
    assert.equal((await call('/v1/devices/dev-guarded/password', { method: 'POST', token })).status, 401);
    assert.equal((await call('/v1/devices/dev-guarded', { method: 'DELETE', token })).status, 401);
  }
  notices.up = false;
  try {
    for (const [path, method] of [['/v1/devices/dev-guarded/password', 'POST'], ['/v1/devices/dev-guarded', 'DELETE']] as const) {
      const refused = await call(path, { method });
      assert.equal(refused.status, 503, `${method} ${path}`);
      assert.equal(refused.headers.get('retry-after'), '1');
    }
  } finally {
    notices.up = true;
  }
  assert.equal(await deviceCheck('dev-guarded', password), true, 'neither the password changed nor the device went');
});

test('malformed requests: 400, 415, 404, 405', async () => {
  assert.equal((await call('/v1/devices', { body: { id: 'a/b' } })).status, 400);
  assert.equal((await call('/v1/devices', { body: {} })).status, 400);
  assert.equal((await call('/v1/devices', { body: '{oops' })).status, 400);
  assert.equal((await call('/v1/devices', { body: [1] })).status, 400);
  assert.equal((await call('/v1/devices', { body: 'id=x', contentType: 'text/plain' })).status, 415);
  assert.equal((await call('/v1/devices')).status, 405);
  assert.equal((await call('/v1/nothing')).status, 404);
  assert.equal((await call('/v1/devices/dev-1/telemetry?limit=0')).status, 400);
  assert.equal((await call('/v1/devices/dev-1/telemetry?limit=1001')).status, 400);
  assert.equal((await call('/v1/devices/dev-1/telemetry?limit=2.5')).status, 400);
  assert.equal((await call('/v1/devices/unknown/telemetry')).status, 404);
  assert.equal((await call('/v1/devices/%E0%A4%A/telemetry')).status, 404);
});

test('GET telemetry: newest first, at most limit, only the device\'s own', async () => {
  await store.createDevice('dev-2', 'unused');
  const at = (s: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, s)).toISOString();
  for (const [deviceId, messageId, s] of [['dev-1', 'a', 1], ['dev-1', 'b', 3], ['dev-1', 'c', 2], ['dev-2', 'z', 9]] as const) {
    await store.insertTelemetry([{ deviceId, messageId, receivedAt: at(s), payload: { s } }]);
  }
  const response = await call('/v1/devices/dev-1/telemetry?limit=2');
  assert.equal(response.status, 200);
  const records = (await response.json()) as Array<{ storedAt: string }>;
  for (const record of records) assert.ok(!Number.isNaN(Date.parse(record.storedAt)), 'each record says when it was stored');
  assert.deepEqual(
    records.map(({ storedAt: _, ...rest }) => rest),
    [
      { messageId: 'b', receivedAt: at(3), payload: { s: 3 } },
      { messageId: 'c', receivedAt: at(2), payload: { s: 2 } },
    ],
  );
  assert.equal(((await (await call('/v1/devices/dev-1/telemetry')).json()) as unknown[]).length, 3);
});

test('GET telemetry pages on from the last record: before + beforeMessageId, ties on receivedAt included', async () => {
  await store.createDevice('dev-p', 'unused');
  const at = (s: number) => new Date(Date.UTC(2025, 0, 2, 0, 0, s)).toISOString();
  // Five messages, three of them received in the same millisecond.
  for (const [messageId, s] of [['m1', 1], ['m2', 2], ['m3', 2], ['m4', 2], ['m5', 3]] as const) {
    await store.insertTelemetry([{ deviceId: 'dev-p', messageId, receivedAt: at(s), payload: { s } }]);
  }
  const seen: string[] = [];
  let query = '';
  for (let page = 0; page < 10; page++) {
    const response = await call(`/v1/devices/dev-p/telemetry?limit=2${query}`);
    assert.equal(response.status, 200);
    const records = (await response.json()) as Array<{ messageId: string; receivedAt: string }>;
    if (records.length === 0) break;
    seen.push(...records.map((r) => r.messageId));
    const last = records.at(-1)!;
    query = `&before=${encodeURIComponent(last.receivedAt)}&beforeMessageId=${encodeURIComponent(last.messageId)}`;
  }
  assert.deepEqual(seen, ['m5', 'm4', 'm3', 'm2', 'm1'], 'every record once, newest first');
  const beforeTime = (await (await call(`/v1/devices/dev-p/telemetry?before=${encodeURIComponent(at(2))}`)).json()) as Array<{ messageId: string }>;
  assert.deepEqual(beforeTime.map((r) => r.messageId), ['m1'], 'before alone: received strictly earlier');
  assert.equal((await call('/v1/devices/dev-p/telemetry?before=yesterday')).status, 400);
  assert.equal((await call('/v1/devices/dev-p/telemetry?beforeMessageId=m2')).status, 400);
  assert.equal((await call(`/v1/devices/dev-p/telemetry?before=${encodeURIComponent(at(2))}&beforeMessageId=${encodeURIComponent('a b')}`)).status, 400);
});

test('the device check says only whether the pair is valid', async () => {
  const created = (await (await call('/v1/devices', { body: { id: 'dev-3' } })).json()) as { password: string };
  const check = async (id: unknown, password: unknown) => {
    const response = await call('/v1/internal/device-auth', { body: { id, password } });
    assert.equal(response.status, 200);
    return ((await response.json()) as { authenticated: boolean }).authenticated;
  };
  assert.equal(await check('dev-3', created.password), true);
  assert.equal(await check('dev-3', 'wrong'), false);
  assert.equal(await check('nobody', created.password), false);
  assert.equal(await check('a/b', 'x'), false);
  assert.equal((await call('/v1/internal/device-auth', { body: { id: 'dev-3' } })).status, 400);
});

test('device checks: a bounded number computes at once, the excess is shed with 503 and Retry-After; a check the gateway abandoned while waiting is not computed', async () => {
  const gated = new (class extends MemoryStore {
    looked: string[] = [];
    gates: Array<() => void> = [];
    override async passwordHash(id: string): Promise<string | undefined> {
      this.looked.push(id);
      await new Promise<void>((resolve) => this.gates.push(resolve));
      return super.passwordHash(id);
    }
  })();
  const bounded = createServer(createCoreApi({ store: gated, apiToken: API_TOKEN, deviceCheckToken: DEVICE_CHECK_TOKEN, notices, events: new EventStreams({ broker: () => undefined, log: captureLog('core').log }), log: captureLog('core').log, checks: { concurrency: 1, maxQueued: 2 } }));
  await listenOn(bounded, { host: HOST, port: 0 });
  const url = `http://${HOST}:${(bounded.address() as AddressInfo).port}/v1/internal/device-auth`;
  const check = (id: string, signal?: AbortSignal) =>
    fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${API_TOKEN}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ id, password: 'x' }), signal });
  try {
    const first = check('running');
    await waitFor(() => gated.looked.length === 1, 'the first check running');
    const abandoned = new AbortController();
    const second = check('abandoned', abandoned.signal);
    const third = check('queued');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const shed = await check('shed');
    assert.equal(shed.status, 503);
    assert.equal(shed.headers.get('retry-after'), '1');
    abandoned.abort();
    await assert.rejects(second);
    await new Promise((resolve) => setTimeout(resolve, 100));
    gated.gates.shift()!();
    assert.equal((await first).status, 200);
    await waitFor(() => gated.looked.length === 2, 'the queued check running');
    gated.gates.shift()!();
    assert.equal((await third).status, 200);
    assert.deepEqual(gated.looked, ['running', 'queued'], 'the abandoned check never looked anything up');
  } finally {
    await closeServer(bounded);
  }
});
