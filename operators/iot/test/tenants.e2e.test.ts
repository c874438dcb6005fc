/**
 * Two tenants of the reference IoT service on the real node: isolated by packets, and one of them
 * deleted without a trace. Two IoTServices of one landscape, `tenant-a` and `tenant-b`, run the
 * reference images (built and pushed by `npm run image:iot-service`), every component on the real
 * node, broker and database on 1Gi claims of the default StorageClass (local-path-provisioner:
 * directories on the node), this machine admitted as a device source of both gateways. Proves:
 * - a device registered through A's core is refused by B's gateway on MQTT and HTTP, and B's core
 *   does not know it (404), while A's gateway takes its messages and A's core reads them all back
 *   (each of A's components reaches the ones it uses through the per-component policies);
 * - from a pod of B (its core, through `kubectl exec`, with Node's `net.connect`), A's broker
 *   (4222) and database (5432), named as A's own components name them, resolve but are not
 *   reached, nor are A's gateway (1883, 8080) and core (8080), while the same probe from B's core
 *   reaches B's broker and database and from A's core A's (core may use both);
 * - A's IoTService deleted: it disappears once its namespace is gone, and its claims, the
 *   PersistentVolumes bound to them and the volumes' directories on the node (with the database's
 *   files in them) are all gone too, while B still takes and stores a device's messages and keeps
 *   its volumes.
 * Reported as not run where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, realNode } from '@iot-operator/local-cluster';
import { HttpStatusError, postHttp, publishMqtt, readTelemetry, registerDevice, simulateDevice, type ServiceAddresses } from '@iot-operator/iot-service/simulator';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { PORTS } from '../src/resources/ports.ts';
import { componentPod, deviceAddresses, dialFromPod, getIoT, getOrUndefined, iotService, realNodeSpec, startReferenceLandscape, stopServedLandscape, waitForPhase } from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const VERSION = '2.4.1';
const MESSAGES = 10;
const TENANTS = ['tenant-a', 'tenant-b'] as const;

let landscape = '';
let mgr: Manager | undefined;

type Claim = KubeObject & { spec: { volumeName?: string }; status?: { phase?: string } };
type Volume = KubeObject & { spec: { local?: { path: string }; hostPath?: { path: string }; claimRef?: { namespace?: string; name?: string } } };

/** Where a PersistentVolume's data is on the node (local-path-provisioner writes hostPath, or local for `volumeType: local`). */
function volumeDirectory(pv: Volume): string {
  const dir = pv.spec.local?.path ?? pv.spec.hostPath?.path;
  assert.ok(dir, `PersistentVolume ${pv.metadata.name} names a directory on the node: ${JSON.stringify(pv.spec)}`);
  return dir;
}

/** Each bound claim of a namespace with its PersistentVolume and that volume's directory on the node. */
async function volumesOf(namespace: string): Promise<Array<{ claim: string; volume: string; directory: string }>> {
  const { items } = await env.client.list<Claim>(Kinds.PersistentVolumeClaim, { namespace });
  return Promise.all(
    items.map(async (claim) => {
      assert.equal(claim.status?.phase, 'Bound', `claim ${namespace}/${claim.metadata.name} is bound`);
      const pv = (await env.client.get(Kinds.PersistentVolume, claim.spec.volumeName!)) as Volume;
      return { claim: claim.metadata.name!, volume: pv.metadata.name!, directory: volumeDirectory(pv) };
    }),
  );
}

describe('two tenants of the reference IoT service on the real node', { skip }, () => {
  const namespaceOf = (tenant: string) => `${landscape}-${tenant}`;
  const addresses: Record<string, ServiceAddresses> = {};

  before(async () => {
    ({ landscape, mgr } = await startReferenceLandscape(env, VERSION));
    const applied = Date.now();
    for (const tenant of TENANTS) await env.client.create(IoTServiceV1alpha1Type, iotService(tenant, landscape, realNodeSpec({ gateway: { protocols: ['mqtt', 'http'] } })));
    for (const tenant of TENANTS) await waitForPhase(env, landscape, tenant, 'Available', 420_000);
    console.log(`tenants: both applied → Available in ${Date.now() - applied} ms`);
    for (const tenant of TENANTS) addresses[tenant] = await deviceAddresses(env, namespaceOf(tenant));
  });

  after(() => stopServedLandscape({ env, landscape, mgr }));

  it('a device of tenant A is refused by tenant B’s gateway on MQTT and HTTP; A’s gateway takes its messages and A stores them', async () => {
    const [a, b] = [addresses['tenant-a']!, addresses['tenant-b']!];
    const device = await registerDevice(a, `a-device-${Date.now()}`);
    await assert.rejects(publishMqtt(b.gatewayMqttUrl, device, [{ n: 1 }]), /Bad username or password/, 'B’s gateway answers A’s device with CONNACK 4');
    await assert.rejects(postHttp(b.gatewayHttpUrl, device, { n: 1 }), (e: unknown) => e instanceof HttpStatusError && e.status === 401, 'B’s gateway refuses A’s device on HTTP');
    await assert.rejects(readTelemetry(b, device.id, 10), (e: unknown) => e instanceof HttpStatusError && e.status === 404, 'B’s core does not know A’s device');

    const report = await simulateDevice(a, { messages: MESSAGES, timeoutMs: 60_000 });
    console.log(`tenants: tenant A's device sent ${report.sent.total}, stored ${report.stored} in ${report.elapsedMs} ms`);
    assert.deepEqual(report.sent, { mqtt: MESSAGES, http: MESSAGES, total: 2 * MESSAGES });
    assert.equal(report.stored, 2 * MESSAGES, 'A’s components reach each other: every message is stored');
    assert.equal(await publishMqtt(a.gatewayMqttUrl, device, [{ n: 1 }]), 1, 'A’s gateway takes the device B refused');
  });

  it('from a pod of tenant B, tenant A’s broker and database ports are not reached; each tenant reaches its own', async () => {
    const [aNs, bNs] = [namespaceOf('tenant-a'), namespaceOf('tenant-b')];
    const [aCore, bCore] = [await componentPod(env, aNs, 'core'), await componentPod(env, bNs, 'core')];
    const targets = (ns: string) => [
      { name: `broker.${ns}.svc.cluster.local`, port: PORTS.brokerClient },
      { name: `database.${ns}.svc.cluster.local`, port: PORTS.database },
    ];
    for (const [ns, pod] of [[aNs, aCore.name], [bNs, bCore.name]] as const) {
      for (const t of targets(ns)) assert.equal((await dialFromPod(env, ns, pod, t.name, t.port)).outcome, 'connected', `${ns}/${pod} → its own ${t.name}:${t.port}`);
    }
    const aPods = { [PORTS.brokerClient]: (await componentPod(env, aNs, 'broker')).ip, [PORTS.database]: (await componentPod(env, aNs, 'database')).ip };
    for (const t of targets(aNs)) {
      const byName = await dialFromPod(env, bNs, bCore.name, t.name, t.port);
      console.log(`tenants: ${bNs}/${bCore.name} → ${t.name}:${t.port}: ${byName.outcome}`);
      assert.equal(byName.resolved, aPods[t.port], `the name ${t.name} resolves from B to A's pod (the probe dialled it)`);
      assert.notEqual(byName.outcome, 'connected', `B's pod → A's ${t.name}:${t.port}`);
      const byIp = await dialFromPod(env, bNs, bCore.name, aPods[t.port]!, t.port);
      assert.notEqual(byIp.outcome, 'connected', `B's pod → A's pod ${aPods[t.port]}:${t.port}`);
    }
    const [aGateway, aCoreIp] = [(await componentPod(env, aNs, 'gateway')).ip, aCore.ip];
    for (const [ip, port] of [[aGateway, PORTS.mqtt], [aGateway, PORTS.http], [aCoreIp, PORTS.http]] as const) {
      assert.notEqual((await dialFromPod(env, bNs, bCore.name, ip, port)).outcome, 'connected', `B's pod → A's ${ip === aGateway ? 'gateway' : 'core'} ${ip}:${port}`);
    }
  });

  it('tenant A deleted: its IoTService, namespace, claims, volumes and their data on the node are gone; tenant B keeps working', async () => {
    const aNs = namespaceOf('tenant-a');
    const volumes = await volumesOf(aNs);
    assert.deepEqual(volumes.map((v) => v.claim).sort(), ['data-broker-0', 'data-database-0'], 'A has the broker’s and the database’s claims');
    for (const v of volumes) assert.ok(existsSync(v.directory), `${v.claim}'s data is on the node at ${v.directory}`);
    const database = volumes.find((v) => v.claim === 'data-database-0')!;
    assert.ok(existsSync(path.join(database.directory, 'pgdata', 'PG_VERSION')), 'the database’s files are in its volume');
    const bVolumes = await volumesOf(namespaceOf('tenant-b'));

    const deleted = Date.now();
    const since = () => Date.now() - deleted;
    await env.client.delete(IoTServiceV1alpha1Type, 'tenant-a', landscape);
    const times: Record<string, number> = {};
    await waitFor('the IoTService tenant-a to be gone', async () => {
      const iot = await getIoT(env, landscape, 'tenant-a');
      return { done: !iot, value: undefined, seen: iot && { finalizers: iot.metadata.finalizers, status: iot.status } };
    }, { timeoutMs: 300_000, intervalMs: 500 });
    times.iotService = since();
    assert.equal(await getOrUndefined(env, Kinds.Namespace, aNs), undefined, 'the namespace is gone when the IoTService is (its finalizer waits for it)');
    for (const v of volumes) {
      await waitFor(`claim ${v.claim} to be gone`, async () => {
        const claim = await getOrUndefined(env, Kinds.PersistentVolumeClaim, v.claim, aNs);
        return { done: !claim, value: undefined, seen: claim?.metadata };
      }, { timeoutMs: 60_000 });
    }
    times.claims = since();
    for (const v of volumes) {
      await waitFor(`PersistentVolume ${v.volume} (${v.claim}) to be deleted`, async () => {
        const pv = await getOrUndefined<Volume & { status?: unknown }>(env, Kinds.PersistentVolume, v.volume);
        return { done: !pv, value: undefined, seen: pv && { deletionTimestamp: pv.metadata.deletionTimestamp, status: pv.status } };
      }, { timeoutMs: 180_000, intervalMs: 500 });
    }
    times.volumes = since();
    for (const v of volumes) {
      await waitFor(`${v.directory} to be removed from the node`, async () => ({ done: !existsSync(v.directory), value: undefined }), { timeoutMs: 60_000, intervalMs: 500 });
    }
    times.data = since();
    console.log(`tenants: delete tenant-a → IoTService and namespace gone ${times.iotService} ms, claims ${times.claims} ms, volumes ${times.volumes} ms, data on the node ${times.data} ms`);

    const b = addresses['tenant-b']!;
    const report = await simulateDevice(b, { messages: MESSAGES, timeoutMs: 60_000 });
    assert.equal(report.stored, 2 * MESSAGES, 'B still takes and stores a device’s messages');
    assert.deepEqual(await volumesOf(namespaceOf('tenant-b')), bVolumes, 'B keeps its claims and volumes');
    for (const v of bVolumes) assert.ok(existsSync(v.directory), `B's data stays at ${v.directory}`);
  });
});
