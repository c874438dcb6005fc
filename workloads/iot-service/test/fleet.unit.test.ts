/**
 * The simulator's fleet (simulator/fleet.ts) against the real gateway, core and NATS on
 * 127.0.0.1: every device gets in, a device with a wrong password gives up at once (CONNACK 4),
 * and when every connection is cut (a TCP proxy in front of the gateway drops them, as a gateway
 * pod's death would) each device connects again in a run of its own; `close` ends it all.
 * `settled` waits for every device's first run and `client` hands out its connection; one
 * attempt on its own (`connectOnce`) comes from the local address it is given, over TLS; the
 * retry delay is the service's backoff times a factor in [0.5, 1).
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connect as tcpConnect, createServer, type AddressInfo, type Socket } from 'node:net';
import { hashPassword } from '../src/core/passwords.ts';
import { connectFleet, connectOnce, failureKind, retryDelayMs } from '../src/simulator/fleet.ts';
import { issue, makeCa, secretVolume } from './certificates.ts';
import { HOST, startService, waitFor, type Service } from './harness.ts';

const gatewayCa = makeCa('fleet-ca');
const volume = secretVolume();
let service: Service;
before(async () => {
  const gatewayCert = issue(gatewayCa, 'gateway', HOST);
  volume.write({ 'tls.crt': gatewayCert.cert, 'tls.key': gatewayCert.key, 'ca.crt': gatewayCa.cert });
  service = await startService({ processing: false, gateway: { tlsDir: volume.dir } });
});
after(async () => {
  await service.close();
  volume.remove();
});

/** Registers `n` devices named `prefix-<i>` with one password. */
async function register(prefix: string, n: number) {
  const hash = await hashPassword(`${prefix}-password`);
  const devices = Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, password: `${prefix}-password` }));
  for (const device of devices) await service.store.createDevice(device.id, hash);
  return devices;
}

/**
 * A TCP proxy to the gateway's port `target` names whose `cut` drops every connection through it;
 * `sources` are the remote addresses of the connections it accepted.
 */
async function proxy(target: URL): Promise<{ url: string; sources: string[]; cut: () => void; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const sources: string[] = [];
  const server = createServer((inbound) => {
    sources.push(inbound.remoteAddress ?? '');
    const outbound = tcpConnect(Number(target.port), target.hostname);
    for (const [a, b] of [[inbound, outbound], [outbound, inbound]] as const) {
      sockets.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        sockets.delete(a);
        b.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  return {
    url: `${target.protocol}//${HOST}:${(server.address() as AddressInfo).port}`,
    sources,
    cut: () => sockets.forEach((socket) => socket.destroy()),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

test('a fleet: every device gets in, a wrong password gives up at once, all connect again after their connections are cut', async () => {
  const devices = await register('fleet', 20);
  const through = await proxy(new URL(service.gatewayMqttUrl));
  const fleet = connectFleet(through.url, [...devices, { id: 'fleet-impostor', password: 'wrong' }]);
  try {
    await waitFor(() => fleet.connected() === 20, 'all 20 devices connected', 30_000);
    await fleet.settled(); // the impostor too: told to come back (CONNACK 3) before its CONNACK 4, it may still be waiting
    const impostor = fleet.runs()[20]!;
    assert.equal(impostor.length, 1);
    assert.equal(impostor[0]!.connectedAt, undefined, 'never connected');
    const { failures, attempts } = impostor[0]!;
    assert.equal(failures['connack-4'], 1, 'refused with CONNACK 4 (bad user name or password) once, then given up');
    assert.deepEqual(Object.keys(failures).filter((kind) => kind !== 'connack-4' && kind !== 'connack-3'), [], 'besides being told to come back (CONNACK 3: core busy)');
    assert.equal(attempts, Object.values(failures).reduce((sum, n) => sum + n, 0), 'every attempt failed');

    const cutAt = Date.now();
    through.cut();
    await waitFor(() => fleet.runs().slice(0, 20).every((runs) => runs.length === 2 && runs[1]!.connectedAt !== undefined), 'every device connected again', 30_000);
    for (const [first, second] of fleet.runs().slice(0, 20)) {
      assert.ok(first!.connectedAt! <= cutAt, 'the first run connected before the cut');
      assert.ok(second!.startedAt >= cutAt && second!.connectedAt! >= second!.startedAt, 'a run of its own from the moment its connection closed');
    }
    assert.equal(fleet.connected(), 20);
  } finally {
    await fleet.close();
    await through.close();
  }
  assert.equal(fleet.connected(), 0, 'close ends every connection');
  const runsAfterClose = fleet.runs().flat().length;
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(fleet.runs().flat().length, runsAfterClose, 'and no device tries again');
});

test('settled: every first run ended, each connected device\'s client publishes; a device refused for good has none', async () => {
  const devices = await register('settled', 5);
  const fleet = connectFleet(service.gatewayMqttUrl, [...devices, { id: 'settled-impostor', password: 'wrong' }], { keep: false });
  try {
    await fleet.settled();
    assert.equal(fleet.connected(), 5, 'all 5 connected once settled');
    assert.ok(fleet.runs().every((runs) => runs.length === 1), 'one run each');
    assert.equal(fleet.client(5), undefined, 'the impostor has no connection');
    for (const [i, device] of devices.entries()) {
      const client = fleet.client(i);
      assert.ok(client?.connected, `device ${i} has its connection`);
      await client.publishAsync(`telemetry/${device.id}`, '{"n":1}', { qos: 1 });
    }
  } finally {
    await fleet.close();
  }
  assert.equal(fleet.client(0), undefined, 'no connection after close');
});

test('connectOnce: one attempt, from the local address it is given over TLS; failureKind names a refusal', async () => {
  const [device] = await register('once', 1);
  const through = await proxy(new URL(service.gatewayMqttsUrl));
  try {
    const client = await connectOnce(through.url, device!, { tls: { ca: gatewayCa.cert }, localAddress: '127.0.0.2' });
    await client.endAsync();
    assert.deepEqual(through.sources, ['127.0.0.2']);
    const refused = await connectOnce(through.url, { id: device!.id, password: 'wrong' }, { tls: { ca: gatewayCa.cert } }).then(
      () => 'admitted',
      (error: unknown) => failureKind(error),
    );
    assert.equal(refused, 'connack-4', 'bad user name or password');
    await assert.rejects(connectOnce(service.gatewayMqttUrl, device!, { localAddress: '127.0.0.2' }), /localAddress needs a TLS URL/);
  } finally {
    await through.close();
  }
});

test("retryDelayMs is the service's backoff scaled into [0.5, 1) of it", () => {
  assert.equal(retryDelayMs(1, () => 0), 100);
  assert.equal(retryDelayMs(3, () => 0.5), 600);
  assert.ok(retryDelayMs(10, () => 0.999) < 5_000);
  assert.equal(retryDelayMs(10, () => 0), 2_500);
});
