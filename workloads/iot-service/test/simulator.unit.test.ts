/**
 * The device simulator against the whole service in one process on 127.0.0.1: everything sent
 * over MQTT and HTTP is read back from core, and refusals reach the caller.
 */

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { HttpStatusError, postHttp, publishMqtt, readTelemetry, registerDevice, simulateDevice } from '../src/simulator/index.ts';
import { API_TOKEN, startService, type Service } from './harness.ts';

let service: Service;
before(async () => {
  service = await startService();
});
after(() => service.close());

test('M messages over MQTT and M over HTTP are all stored, newest first, each once', async () => {
  const addresses = { coreUrl: service.coreUrl, gatewayHttpUrl: service.gatewayHttpUrl, gatewayMqttUrl: service.gatewayMqttUrl, apiToken: API_TOKEN };
  const report = await simulateDevice(addresses, { deviceId: 'sim-1', messages: 5, timeoutMs: 10_000, pollMs: 20 });
  assert.deepEqual(report.sent, { mqtt: 5, http: 5, total: 10 });
  assert.equal(report.stored, 10);
  const records = await readTelemetry(addresses, 'sim-1', 100);
  assert.equal(records.length, 10);
  const times = records.map((r) => r.receivedAt);
  assert.deepEqual(times, [...times].sort().reverse());
  assert.deepEqual(
    records.map((r) => (r.payload as { via: string }).via).sort(),
    ['http', 'http', 'http', 'http', 'http', 'mqtt', 'mqtt', 'mqtt', 'mqtt', 'mqtt'],
  );
});

test('an MQTT connection refused at first (nothing listening yet) is tried again until the gateway answers', async () => {
  const gateway = new URL(service.gatewayMqttUrl);
  const port = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
  // The gateway comes up on that port 1.5 s after the device first dials it.
  let relay: net.Server | undefined;
  const opening = setTimeout(() => {
    relay = net.createServer((socket) => socket.pipe(net.connect(Number(gateway.port), gateway.hostname)).pipe(socket)).listen(port, '127.0.0.1');
  }, 1_500);
  try {
    const addresses = { coreUrl: service.coreUrl, gatewayHttpUrl: service.gatewayHttpUrl, gatewayMqttUrl: `mqtt://127.0.0.1:${port}`, apiToken: API_TOKEN };
    const report = await simulateDevice(addresses, { deviceId: 'sim-late', messages: 2, timeoutMs: 10_000, pollMs: 20 });
    assert.deepEqual(report.sent, { mqtt: 2, http: 2, total: 4 });
    assert.equal(report.stored, 4);
  } finally {
    clearTimeout(opening);
    relay?.close();
  }
});

test('a wrong device password is refused on both protocols, a wrong token with 401', async () => {
  const device = await registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'sim-2');
  const wrong = { id: device.id, password: 'wrong' };
  await assert.rejects(publishMqtt(service.gatewayMqttUrl, wrong, [{ x: 1 }]), /Bad username or password/);
  await assert.rejects(postHttp(service.gatewayHttpUrl, wrong, { x: 1 }), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
  await assert.rejects(registerDevice({ coreUrl: service.coreUrl, apiToken: 'wrong' }, 'sim-3'), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
  await assert.rejects(readTelemetry({ coreUrl: service.coreUrl, apiToken: 'wrong' }, 'sim-2', 10), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
  await assert.rejects(registerDevice({ coreUrl: service.coreUrl, apiToken: API_TOKEN }, 'sim-2'), (e: unknown) => e instanceof HttpStatusError && e.status === 409);
});

test('a publish to another device’s topic is refused at once and nothing of it is stored', async () => {
  const addresses = { coreUrl: service.coreUrl, apiToken: API_TOKEN };
  const [device, other] = [await registerDevice(addresses, 'sim-4'), await registerDevice(addresses, 'sim-5')];
  await assert.rejects(publishMqtt(service.gatewayMqttUrl, device, [{ x: 1 }], `telemetry/${other.id}`), /closed the connection of sim-4 before acknowledging its publish to telemetry\/sim-5/);
  assert.equal(await publishMqtt(service.gatewayMqttUrl, device, [{ x: 2 }]), 1, 'its own topic still takes its messages');
  assert.deepEqual(await readTelemetry(addresses, other.id, 10), []);
});
