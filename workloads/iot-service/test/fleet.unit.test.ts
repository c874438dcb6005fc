/**
 * The simulator's fleet (simulator/fleet.ts) against the real gateway, core and NATS on
 * 127.0.0.1: every device gets in, a device with a wrong password gives up at once (CONNACK 4),
 * and when every connection is cut (a TCP proxy in front of the gateway drops them, as a gateway
 * pod's death would) each device connects again in a run of its own; `close` ends it all.
 */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connect as tcpConnect, createServer, type AddressInfo, type Socket } from 'node:net';
import { hashPassword } from '../src/core/passwords.ts';
import { connectFleet } from '../src/simulator/fleet.ts';
import { HOST, startService, waitFor, type Service } from './harness.ts';

let service: Service;
before(async () => {
  service = await startService({ processing: false });
});
after(() => service.close());

/** A TCP proxy to the gateway's MQTT port whose `cut` drops every connection through it. */
async function proxy(target: URL): Promise<{ url: string; cut: () => void; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
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
    url: `mqtt://${HOST}:${(server.address() as AddressInfo).port}`,
    cut: () => sockets.forEach((socket) => socket.destroy()),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

test('a fleet: every device gets in, a wrong password gives up at once, all connect again after their connections are cut', async () => {
  const hash = await hashPassword('fleet-password');
  const devices = Array.from({ length: 20 }, (_, i) => ({ id: `fleet-${i}`, password: 'fleet-password' }));
  for (const device of devices) await service.store.createDevice(device.id, hash);
  const through = await proxy(new URL(service.gatewayMqttUrl));
  const fleet = connectFleet(through.url, [...devices, { id: 'fleet-impostor', password: 'wrong' }]);
  try {
    await waitFor(() => fleet.connected() === 20, 'all 20 devices connected', 30_000);
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
