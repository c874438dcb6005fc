/**
 * Device connections as events (gateway/connection-events.ts) and as state
 * (processing/connection-state.ts, core's `GET /v1/devices/<id>`), on the reference service in
 * one process with a real NATS Server: an MQTT device's connect, its clean disconnect, a lost
 * connection and a refused login each reach an application following the stream, and core's
 * device resource shows `connected` and `lastSeen` as they change; an HTTP device is connected
 * while its poll for commands is held, and its refused login is an event; a gateway closing with 1,000
 * devices connected yields 1,000 disconnect events, every device then shown disconnected.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import mqtt from 'mqtt';
import {
  connectFleet,
  connectOnce,
  followEvents,
  HttpStatusError,
  issueApplication,
  pollCommand,
  postHttp,
  registerDevice,
  type DeviceCredentials,
  type StreamedEvent,
} from '../src/simulator/index.ts';
import { API_TOKEN, startService, waitFor, type Service } from './harness.ts';

let service: Service;
const admin = () => ({ coreUrl: service.coreUrl, apiToken: API_TOKEN });

before(async () => {
  service = await startService();
});
after(() => service.close());

async function deviceResource(id: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${service.coreUrl}/v1/devices/${id}`, { headers: { Authorization: `Bearer ${API_TOKEN}` } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Follows the devices' events from `from` until `done` holds for what arrived. */
async function eventsUntil(token: string, from: string, devices: string[], done: (events: StreamedEvent[]) => boolean): Promise<StreamedEvent[]> {
  const events: StreamedEvent[] = [];
  const stop = new AbortController();
  await followEvents(service.coreUrl, { token, from, devices, signal: stop.signal }, (event) => {
    events.push(event);
    if (done(events)) stop.abort();
  });
  return events;
}

const transitions = (events: StreamedEvent[]) => events.filter((e) => e.type === 'connection').map((e) => [e.data.state, e.data.reason ?? null]);

test('connect, clean disconnect, lost connection and refused login are events; the device resource shows connected and lastSeen', { timeout: 60_000 }, async () => {
  const app = await issueApplication(admin(), 'connection-watcher');
  const device = await registerDevice(admin(), 'dev-conn');
  const from = new Date().toISOString();
  assert.deepEqual(await deviceResource(device.id), { status: 200, body: { id: device.id, connected: false, lastSeen: null } });

  const first = await connectOnce(service.gatewayMqttUrl, device, { keep: false });
  await waitFor(() => service.store.connections.get(device.id)?.connected === true, 'the connection recorded');
  const open = await deviceResource(device.id);
  assert.equal(open.body.connected, true);
  assert.ok(typeof open.body.lastSeen === 'string' && open.body.lastSeen >= from, 'lastSeen: when it connected');
  await first.endAsync(); // DISCONNECT: clean

  const second = await connectOnce(service.gatewayMqttUrl, device, { keep: false });
  second.stream.destroy(); // no DISCONNECT: lost
  await assert.rejects(mqtt.connectAsync(service.gatewayMqttUrl, { username: device.id, password: `${device.password}x`, clientId: device.id, reconnectPeriod: 0 }), /Bad username or password/);

  const events = await eventsUntil(app.token, from, [device.id], (seen) => transitions(seen).length >= 5);
  assert.deepEqual(transitions(events), [
    ['connected', null],
    ['disconnected', 'clean'],
    ['connected', null],
    ['disconnected', 'lost'],
    ['refused', null],
  ]);
  const [, , reconnect, lost] = events;
  assert.equal(lost!.data.connectionId, reconnect!.data.connectionId, 'a disconnect names the connection it ends');
  await waitFor(() => service.store.connections.get(device.id)?.connected === false, 'the disconnect recorded');
  const closed = await deviceResource(device.id);
  assert.equal(closed.body.connected, false);
  assert.ok(String(closed.body.lastSeen) >= String(open.body.lastSeen), 'lastSeen moves forward');
  assert.equal((await deviceResource('dev-never-registered')).status, 404);
});

test('an HTTP device polling for commands (ttd) is connected while its poll is held; a refused HTTP login is an event; telemetry alone is none', { timeout: 60_000 }, async () => {
  const app = await issueApplication(admin(), 'http-connection-watcher');
  const device = await registerDevice(admin(), 'dev-http-conn');
  const from = new Date().toISOString();
  await postHttp(service.gatewayHttpUrl, device, { plain: true }); // no ttd: no connection
  const poll = pollCommand(service.gatewayHttpUrl, device, 2); // held 2 s: no command waits
  await waitFor(() => service.store.connections.get(device.id)?.connected === true, 'the poll recorded as a connection');
  assert.equal((await deviceResource(device.id)).body.connected, true, 'connected while the poll is held');
  assert.equal(await poll, undefined, 'no command: 202 after the ttd');
  await assert.rejects(postHttp(service.gatewayHttpUrl, { id: device.id, password: `${device.password}x` }, { wrong: true }), (error: unknown) => error instanceof HttpStatusError && error.status === 401);

  const events = await eventsUntil(app.token, from, [device.id], (seen) => transitions(seen).length >= 3);
  assert.deepEqual(transitions(events), [
    ['connected', null],
    ['disconnected', 'clean'],
    ['refused', null],
  ]);
  const [connected, disconnected] = events.filter((e) => e.type === 'connection');
  assert.equal(disconnected!.data.connectionId, connected!.data.connectionId, 'the disconnect names the poll it ends');
  await waitFor(() => service.store.connections.get(device.id)?.connected === false, 'the poll\'s end recorded');
  assert.equal((await deviceResource(device.id)).body.connected, false);
});

test('a gateway closing with 1,000 devices connected yields 1,000 disconnect events; every device is then shown disconnected', { timeout: 120_000 }, async () => {
  const mass = await startService();
  try {
    const app = await issueApplication({ coreUrl: mass.coreUrl, apiToken: API_TOKEN }, 'fleet-watcher');
    const devices: DeviceCredentials[] = [];
    for (let i = 0; i < 1000; i++) devices.push(await registerDevice({ coreUrl: mass.coreUrl, apiToken: API_TOKEN }, `mass-${i}`));
    const from = new Date().toISOString();
    const fleet = connectFleet(mass.gatewayMqttUrl, devices, { keep: false });
    await fleet.settled();
    assert.equal(fleet.connected(), 1000);
    await waitFor(() => [...mass.store.connections.values()].filter((c) => c.connected).length === 1000, 'every connection recorded', 30_000);

    await mass.gateway.close(); // every connection closed by the gateway
    await mass.connectionEvents.flush(30_000);
    const disconnects = new Set<string>();
    const stop = new AbortController();
    await followEvents(mass.coreUrl, { token: app.token, from, signal: stop.signal }, (event) => {
      if (event.type === 'connection' && event.data.state === 'disconnected') disconnects.add(String(event.data.deviceId));
      if (disconnects.size === 1000) stop.abort();
    });
    assert.equal(disconnects.size, 1000, 'one disconnect event per device');
    await waitFor(() => [...mass.store.connections.values()].every((c) => !c.connected), 'every disconnect recorded', 30_000);
    await fleet.close();
  } finally {
    await mass.close();
  }
});
