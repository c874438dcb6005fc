/**
 * A device's password reset or the device deleted at core reaches every gateway within 5 s,
 * despite the gateway's 5-minute login cache: the notice itself over a real NATS Server, a notice
 * the gateway never got (the core that sent it went silent, the broker restarted), and the
 * tracker's bookkeeping of each core process on its own.
 */

import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import mqtt from 'mqtt';
import { createCoreApi } from '../src/core/api.ts';
import { DeviceNotices } from '../src/core/device-notices.ts';
import { DeviceChangeTracker } from '../src/gateway/device-changes.ts';
import { coreDeviceCheck } from '../src/gateway/devices.ts';
import { connectBrokerLink } from '../src/gateway/forwarder.ts';
import { startGateway, trackDeviceChanges, type Gateway } from '../src/gateway/gateway.ts';
import { SILENCE_LIMIT_MS, type DeviceChange } from '../src/shared/device-changes.ts';
import { HttpStatusError, postHttp, registerDevice, type DeviceCredentials } from '../src/simulator/index.ts';
import { API_TOKEN, brokerEndpoint, captureLog, connectAs, DEVICE_CHECK_TOKEN, HOST, startService, waitFor, type Service } from './harness.ts';
import { BROKER_PASSWORDS } from './nats-server.ts';

/** The most a change may take to reach every gateway. */
const EFFECTIVE_WITHIN_MS = 5_000;

const admin = (service: Service) => ({ coreUrl: service.coreUrl, apiToken: API_TOKEN });

async function resetPassword(service: Service, id: string): Promise<string> {
  const response = await fetch(`${service.coreUrl}/v1/devices/${id}/password`, { method: 'POST', headers: { Authorization: `Bearer ${API_TOKEN}` } });
  assert.equal(response.status, 200);
  return ((await response.json()) as { password: string }).password;
}

async function deleteDevice(service: Service, id: string): Promise<void> {
  const response = await fetch(`${service.coreUrl}/v1/devices/${id}`, { method: 'DELETE', headers: { Authorization: `Bearer ${API_TOKEN}` } });
  assert.equal(response.status, 204);
}

/** How the gateway at `url` answers a message from `device` now: 202, or the refusal's status. */
const answer = (url: string, device: DeviceCredentials) => postHttp(url, device, { t: 1 }).then(() => 202, (e: unknown) => (e instanceof HttpStatusError ? e.status : Promise.reject(e)));

/** Waits until the gateway at `url` refuses `device` (401), at most EFFECTIVE_WITHIN_MS from `since`; how long it took. */
async function refusedWithin(url: string, device: DeviceCredentials, since: number): Promise<number> {
  for (;;) {
    const status = await answer(url, device);
    if (status === 401) return Date.now() - since;
    assert.equal(status, 202, 'until refused, admitted');
    assert.ok(Date.now() - since < EFFECTIVE_WITHIN_MS, `still admitted ${Date.now() - since} ms after the change`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A second gateway pod beside the service's own: its own broker link, login cache and device checks. */
async function secondGateway(service: Service): Promise<{ url: string; checks: () => number; close: () => Promise<void> }> {
  const log = captureLog('gateway-2').log;
  let gateway: Gateway | undefined;
  const link = connectBrokerLink({
    broker: brokerEndpoint(service.broker),
    password: BROKER_PASSWORDS.gateway,
    name: 'gateway-2',
    deviceChanges: trackDeviceChanges(log, () => gateway),
  });
  await waitFor(() => link.connected(), 'the second gateway connected to the broker');
  const core = new URL(service.coreUrl);
  const check = coreDeviceCheck({ host: core.hostname, port: Number(core.port) }, DEVICE_CHECK_TOKEN);
  let checks = 0;
  gateway = await startGateway({
    protocols: new Set(['http']),
    host: HOST,
    ports: { mqtt: 0, mqtts: 0, http: 0, https: 0 },
    check: (id, password) => (checks++, check(id, password)),
    forward: link.forward,
    log,
    tlsDir: '/nonexistent',
  });
  return {
    url: `http://${HOST}:${gateway.ports.http}`,
    checks: () => checks,
    close: async () => {
      await gateway?.close();
      await link.close();
    },
  };
}

test('a password reset reaches every gateway: the old password refused within 5 s although cached, the MQTT connection closed, the new one admitted', async () => {
  const service = await startService({ processing: false });
  const other = await secondGateway(service);
  try {
    const device = await registerDevice(admin(service), 'dev-reset');
    for (const url of [service.gatewayHttpUrl, other.url]) {
      assert.equal(await answer(url, device), 202);
      assert.equal(await answer(url, device), 202);
    }
    assert.deepEqual([service.deviceChecks(), other.checks()], [1, 1], 'each gateway admits the device from its cache');
    const connection = await mqtt.connectAsync(service.gatewayMqttUrl, { username: device.id, password: device.password, clientId: device.id, reconnectPeriod: 0 });
    const closed = new Promise<number>((resolve) => connection.once('close', () => resolve(Date.now())));

    const changedAt = Date.now();
    const password = await resetPassword(service, device.id);
    const tookMs = [await refusedWithin(service.gatewayHttpUrl, device, changedAt), await refusedWithin(other.url, device, changedAt)];
    assert.ok((await closed) - changedAt < EFFECTIVE_WITHIN_MS, 'the open MQTT connection is closed');
    await connection.endAsync(true);
    await assert.rejects(mqtt.connectAsync(service.gatewayMqttUrl, { username: device.id, password: device.password, clientId: device.id, reconnectPeriod: 0 }), /Bad username or password/);
    for (const url of [service.gatewayHttpUrl, other.url]) assert.equal(await answer(url, { id: device.id, password }), 202, 'the new password is admitted');
    console.log(`old password refused ${tookMs.join(' and ')} ms after the reset`);
  } finally {
    await other.close();
    await service.close();
  }
});

test('a deleted device is refused by every gateway within 5 s although cached; what it sent stays readable', async () => {
  const service = await startService();
  const other = await secondGateway(service);
  try {
    const device = await registerDevice(admin(service), 'dev-delete');
    for (const url of [service.gatewayHttpUrl, other.url]) assert.equal(await answer(url, device), 202);
    await waitFor(() => service.store.rows.size === 2, 'both messages stored');
    const changedAt = Date.now();
    await deleteDevice(service, device.id);
    await refusedWithin(service.gatewayHttpUrl, device, changedAt);
    await refusedWithin(other.url, device, changedAt);
    const stored = await fetch(`${service.coreUrl}/v1/devices/${device.id}/telemetry`, { headers: { Authorization: `Bearer ${API_TOKEN}` } });
    assert.equal(stored.status, 200);
    assert.equal(((await stored.json()) as unknown[]).length, 2);
  } finally {
    await other.close();
    await service.close();
  }
});

test('a notice the gateway never got: the core that sent it went silent, so every cached login is forgotten within 5 s of the change', async () => {
  const service = await startService({ processing: false });
  try {
    // A second core process, heard by the gateway, then cut off from the broker without a farewell.
    const lostConnection = await connectAs(service.broker, 'core', 'core-2');
    const lost = new DeviceNotices({ log: captureLog('core-2').log });
    lost.attach(lostConnection);
    const device = await registerDevice(admin(service), 'dev-lost-notice');
    assert.equal(await answer(service.gatewayHttpUrl, device), 202);
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // heard at least one heartbeat of core-2
    await lostConnection.close();
    // core-2 resets the password; its notice never reaches the broker.
    const changedAt = Date.now();
    await service.store.setPasswordHash(device.id, 'scrypt$changed-elsewhere');
    const tookMs = await refusedWithin(service.gatewayHttpUrl, device, changedAt);
    assert.ok(service.logs.gateway.lines.some((l) => l.msg === 'device changes may have been missed: every cached login forgotten' && /not heard from core/.test(String(l.why))));
    console.log(`refused ${tookMs} ms after the lost change (silence limit ${SILENCE_LIMIT_MS} ms)`);
    await lost.close();
  } finally {
    await service.close();
  }
});

test('a notice sent while the gateway was away from the broker: its cache is forgotten when it is back', async () => {
  const service = await startService({ processing: false });
  try {
    const device = await registerDevice(admin(service), 'dev-away');
    assert.equal(await answer(service.gatewayHttpUrl, device), 202);
    await service.broker.kill();
    await waitFor(() => !service.brokerLink.connected(), 'the gateway to see the broker gone');
    await service.store.setPasswordHash(device.id, 'scrypt$changed-while-away');
    await service.broker.start();
    await waitFor(() => service.brokerLink.connected(), 'the gateway back on the broker', 10_000);
    const backAt = Date.now();
    await refusedWithin(service.gatewayHttpUrl, device, backAt);
    assert.ok(service.logs.gateway.lines.some((l) => l.msg === 'device changes may have been missed: every cached login forgotten' && l.why === 'reconnected to the broker'));
  } finally {
    await service.close();
  }
});

test('core answers a reset only while it can announce it: with the broker gone, 503 and the password unchanged', async () => {
  const service = await startService({ processing: false });
  try {
    const device = await registerDevice(admin(service), 'dev-no-broker');
    await service.broker.kill();
    await waitFor(() => !service.coreNotices.connected(), 'core to see the broker gone');
    const refused = await fetch(`${service.coreUrl}/v1/devices/${device.id}/password`, { method: 'POST', headers: { Authorization: `Bearer ${API_TOKEN}` } });
    assert.equal(refused.status, 503);
    const check = await fetch(`${service.coreUrl}/v1/internal/device-auth`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${DEVICE_CHECK_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(device),
    });
    assert.deepEqual(await check.json(), { authenticated: true });
  } finally {
    await service.close();
  }
});

test('the tracker: a notice that follows on is a change; a gap, a first word counting earlier notices or silence is a miss; a farewell is none', () => {
  let now = 0;
  const events: string[] = [];
  const tracker = new DeviceChangeTracker({ changed: (id) => events.push(`changed ${id}`), missed: () => events.push('missed') }, () => now);
  const hear = (change: DeviceChange) => tracker.receive(change);

  hear({ origin: 'a', seq: 0 }); // a core started after the gateway: nothing announced yet
  hear({ origin: 'a', seq: 1, device: 'd1' });
  hear({ origin: 'a', seq: 1 });
  hear({ origin: 'a', seq: 3 }); // notice 2 and 3 never arrived
  hear({ origin: 'a', seq: 5, device: 'd5' }); // notice 4 never arrived: d5 alone is not enough
  hear({ origin: 'b', seq: 1, device: 'd-b' }); // the first word of b is its first notice
  hear({ origin: 'c', seq: 2 }); // the first word of c counts notices before it
  assert.deepEqual(events, ['changed d1', 'missed', 'missed', 'changed d-b', 'missed']);

  events.length = 0;
  now = SILENCE_LIMIT_MS - 1;
  hear({ origin: 'b', seq: 1, bye: true }); // b stops, nothing missed
  hear({ origin: 'c', seq: 2 });
  tracker.checkSilence();
  assert.deepEqual(events, [], 'nobody silent yet');
  now = SILENCE_LIMIT_MS;
  tracker.checkSilence(); // a, last heard at 0, is silent; c was heard just now; b said farewell
  assert.deepEqual(events, ['missed']);
  tracker.checkSilence();
  assert.deepEqual(events, ['missed'], 'a silent core is counted once');
  hear({ origin: 'a', seq: 5 }); // a speaks again: its first word after being forgotten counts its notices
  hear({ origin: 'c', seq: 2, bye: true });
  hear({ origin: 'd', seq: 0 });
  hear({ origin: 'd', seq: 1, bye: true }); // a farewell counting a notice never received
  tracker.reconnected();
  assert.deepEqual(events, ['missed', 'missed', 'missed', 'missed']);
});

test('a second core beside the first: its changes reach the gateway as well', async () => {
  const service = await startService({ processing: false });
  const connection = await connectAs(service.broker, 'core', 'core-b');
  const notices = new DeviceNotices({ log: captureLog('core-b').log });
  notices.attach(connection);
  const coreB = createHttpServer(createCoreApi({ store: service.store, apiToken: API_TOKEN, deviceCheckToken: DEVICE_CHECK_TOKEN, notices, events: service.coreEvents, log: captureLog('core-b').log }));
  await new Promise<void>((resolve) => coreB.listen(0, HOST, resolve));
  try {
    const device = await registerDevice(admin(service), 'dev-two-cores');
    assert.equal(await answer(service.gatewayHttpUrl, device), 202);
    const changedAt = Date.now();
    const response = await fetch(`http://${HOST}:${(coreB.address() as AddressInfo).port}/v1/devices/${device.id}/password`, { method: 'POST', headers: { Authorization: `Bearer ${API_TOKEN}` } });
    assert.equal(response.status, 200);
    await refusedWithin(service.gatewayHttpUrl, device, changedAt);
  } finally {
    await new Promise((resolve) => coreB.close(resolve));
    await notices.close();
    await connection.close();
    await service.close();
  }
});
