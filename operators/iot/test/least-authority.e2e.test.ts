/**
 * Least authority inside an instance, on the real node with the reference images (docs/
 * iotservice.md, "Device security model"). One IoTService with two gateway pods, devices over TLS
 * from this machine (a device source). What a user and an attacker who took over the gateway see:
 * - from inside the gateway pod the broker answers but the database does not (its NetworkPolicy),
 *   and the gateway holds no api token: its device-check token gets 401 from every route of core
 *   but the device check;
 * - a device's password reset, then the device deleted, through core's API: from at most 5 s after
 *   core answered, neither gateway pod admits the old password, although both had it cached;
 * - the internal credentials rotated (the annotation) while a device publishes over MQTTS and
 *   HTTPS through the Services: every key of iot-credentials changes (the api token too: the one
 *   before is refused), every pod is replaced, the instance is Available again with the device
 *   still publishing, and every message the gateway acknowledged is stored.
 * Reported as not run where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, realNode } from '@iot-operator/local-cluster';
import {
  HttpStatusError,
  publishMqtt,
  readAllTelemetry,
  readTelemetry,
  registerDevice,
  startContinuousDevice,
  type DeviceCredentials,
  type ServiceAddresses,
} from '@iot-operator/iot-service/simulator';
import { apiToken, dialFromPod, iotService, realNodeSpec, startReferenceLandscape, stopServedLandscape, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const VERSION = '2.4.1';
const NAME = 'guarded';
const ROTATE = 'cp.iotservices.io/rotate-credentials';

type Pod = KubeObject & { status?: { podIP?: string; phase?: string } };
type Secret = KubeObject & { data?: Record<string, string> };
type Deployment = KubeObject & { spec: { template: { spec: { containers: { env?: { name: string }[] }[] } } } };

let landscape = '';
let mgr: Manager | undefined;

describe('least authority inside an instance on the real node', { skip }, () => {
  let namespace = '';
  let caCertificate = '';
  let token = '';
  let coreUrl = '';

  const runningPods = async (component?: string) =>
    (await env.client.list<Pod>(Kinds.Pod, { namespace, labelSelector: component ? `app.kubernetes.io/component=${component}` : undefined })).items.filter((p) => !p.metadata.deletionTimestamp && p.status?.phase === 'Running');
  const secretKey = async (key: string) => Buffer.from((await env.client.get<Secret>(Kinds.Secret, 'iot-credentials', namespace)).data?.[key] ?? '', 'base64').toString('utf8');
  const serviceIp = async (name: string) => (await env.client.get<KubeObject & { spec: { clusterIP: string } }>(Kinds.Service, name, namespace)).spec.clusterIP;

  before(async () => {
    ({ landscape, mgr } = await startReferenceLandscape(env, VERSION));
    await env.client.create(IoTServiceV1alpha1Type, iotService(NAME, landscape, realNodeSpec({ gateway: { replicas: 2 } })));
    await waitForPhase(env, landscape, NAME, 'Available', 300_000);
    namespace = `${landscape}-${NAME}`;
    caCertificate = (await env.client.get<KubeObject & { data?: Record<string, string> }>(Kinds.ConfigMap, 'gateway-ca', namespace)).data?.['ca.crt'] ?? '';
    token = await apiToken(env, namespace);
    coreUrl = `http://${await serviceIp('core')}:8080`;
  });

  after(() => stopServedLandscape({ env, landscape, mgr }));

  it('the gateway pod reaches the broker but not the database; its token checks devices and nothing else', async () => {
    const [gateway] = await runningPods('gateway');
    const dial = async (host: string, port: number) => (await dialFromPod(env, namespace, gateway!.metadata.name!, host, port)).outcome;
    assert.equal(await dial(`broker-client.${namespace}.svc`, 4222), 'connected', 'the gateway reaches the broker');
    assert.equal(await dial(`core.${namespace}.svc`, 8080), 'connected', 'and core');
    const [database] = await runningPods('database');
    for (const host of [`database-client.${namespace}.svc`, database!.status!.podIP!]) assert.notEqual(await dial(host, 5432), 'connected', `the gateway does not reach the database at ${host}`);

    const deployment = await env.client.get<Deployment>(Kinds.Deployment, 'gateway', namespace);
    const variables = (deployment.spec.template.spec.containers[0]!.env ?? []).map((v) => v.name);
    assert.ok(!variables.includes('IOT_API_TOKEN'), `the gateway holds no api token: ${variables.join(', ')}`);
    assert.ok(variables.includes('IOT_DEVICE_CHECK_TOKEN'), 'it holds the device-check token');
    const checkToken = await secretKey('device-check-token');
    const asGateway: Pick<ServiceAddresses, 'coreUrl' | 'apiToken'> = { coreUrl, apiToken: checkToken };
    const unauthorized = (e: unknown) => e instanceof HttpStatusError && e.status === 401;
    await assert.rejects(registerDevice(asGateway, `by-gateway-${Date.now()}`), unauthorized, 'registering a device');
    const device = await registerDevice({ coreUrl, apiToken: token }, `checked-${Date.now()}`);
    await assert.rejects(readTelemetry(asGateway, device.id, 1), unauthorized, 'reading telemetry');
    const check = await fetch(`${coreUrl}/v1/internal/device-auth`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${checkToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(device),
    });
    assert.deepEqual([check.status, await check.json()], [200, { authenticated: true }], 'the device check is what it may do');
  });

  it('a device reset, then deleted: from at most 5 s after core answered, neither gateway pod admits the old password', async () => {
    const gateways = (await runningPods('gateway')).map((p) => p.status!.podIP!);
    assert.equal(gateways.length, 2);
    const tls = { ca: caCertificate, servername: `gateway.${namespace}.svc` };
    const login = (ip: string, device: DeviceCredentials) => publishMqtt(`mqtts://${ip}:8883`, device, [], undefined, tls);
    const admin = { Authorization: `Bearer ${token}` };
    const device = await registerDevice({ coreUrl, apiToken: token }, `reset-${Date.now()}`);
    for (const ip of gateways) await login(ip, device); // both pods remember the password now

    /** Waits until every gateway pod refuses `credentials`; how long after `since` the last one did. */
    const refusedEverywhere = async (credentials: DeviceCredentials, since: number, what: string) => {
      for (const ip of gateways) {
        await waitFor(`${what}: refused by the gateway pod ${ip}`, async () => {
          const refused = await login(ip, credentials).then(() => false, (e: Error) => /Bad username or password|Not authorized/.test(e.message));
          return { done: refused, value: undefined, seen: { afterMs: Date.now() - since } };
        }, { timeoutMs: Math.max(0, since + 5_000 - Date.now()), intervalMs: 100 });
      }
      return Date.now() - since;
    };

    const reset = await fetch(`${coreUrl}/v1/devices/${device.id}/password`, { method: 'POST', headers: admin });
    const resetAt = Date.now();
    assert.equal(reset.status, 200);
    const fresh = (await reset.json()) as DeviceCredentials;
    assert.equal(fresh.id, device.id);
    assert.notEqual(fresh.password, device.password);
    console.log(`least authority: the old password refused on both gateway pods ${await refusedEverywhere(device, resetAt, 'the old password')} ms after the reset`);
    for (const ip of gateways) await login(ip, fresh);

    const deleted = await fetch(`${coreUrl}/v1/devices/${device.id}`, { method: 'DELETE', headers: admin });
    const deletedAt = Date.now();
    assert.equal(deleted.status, 204);
    console.log(`least authority: the deleted device refused on both gateway pods ${await refusedEverywhere(fresh, deletedAt, 'the deleted device')} ms after the deletion`);
  });

  it('the internal credentials rotated while a device publishes: every key new, every pod replaced, nothing acknowledged lost', async () => {
    const gateway = await serviceIp('gateway');
    const addresses: ServiceAddresses = { coreUrl, apiToken: token, gatewayMqttUrl: `mqtts://${gateway}:8883`, gatewayHttpUrl: `https://${gateway}:8443`, gatewayTls: { ca: caCertificate } };
    const secretBefore = (await env.client.get<Secret>(Kinds.Secret, 'iot-credentials', namespace)).data ?? {};
    const podsBefore = new Set((await runningPods()).map((p) => p.metadata.uid)); // a StatefulSet's new pod keeps its name
    const device = startContinuousDevice(addresses, await registerDevice(addresses, `steady-${Date.now()}`), { intervalMs: 100 });
    try {
      await waitFor('the device to publish', async () => ({ done: device.messages.filter((m) => m.ackedAt).length >= 6, value: undefined, seen: device.messages.length }), { timeoutMs: 30_000 });
      const rotatedAt = Date.now();
      await env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { metadata: { annotations: { [ROTATE]: `r-${rotatedAt}` } } }, 'merge');

      const secretAfter = await waitFor('every key of iot-credentials to be new', async () => {
        const data = (await env.client.get<Secret>(Kinds.Secret, 'iot-credentials', namespace)).data ?? {};
        const kept = Object.keys(secretBefore).filter((key) => data[key] === secretBefore[key]);
        return { done: kept.length === 0, value: data, seen: { kept } };
      }, { timeoutMs: 30_000 });
      assert.deepEqual(Object.keys(secretAfter).sort(), Object.keys(secretBefore).sort(), 'the same keys');
      await waitFor('every pod replaced and running', async () => {
        const pods = await runningPods();
        const old = pods.filter((p) => podsBefore.has(p.metadata.uid));
        return { done: old.length === 0 && pods.length === podsBefore.size, value: undefined, seen: { old: old.map((p) => p.metadata.name), running: pods.length } };
      }, { timeoutMs: 300_000, intervalMs: 1_000 });
      await waitForPhase(env, landscape, NAME, 'Available', 120_000);
      const rolledAt = Date.now();
      console.log(`least authority: rotated and every pod replaced in ${rolledAt - rotatedAt} ms`);
      await waitFor('the device to publish after the rotation', async () => {
        const since = device.messages.filter((m) => m.ackedAt !== undefined && m.ackedAt > rolledAt).length;
        return { done: since >= 6, value: undefined, seen: { since, failures: device.failures.slice(-3) } };
      }, { timeoutMs: 60_000 });
    } finally {
      await device.stop(60_000).catch(() => undefined);
    }
    const acknowledged = new Set(device.messages.filter((m) => m.ackedAt !== undefined).map((m) => m.messageId));
    token = await apiToken(env, namespace); // rotated too: the one before is refused now
    assert.equal((await fetch(`${coreUrl}/v1/devices/${device.deviceId}/telemetry`, { headers: { Authorization: `Bearer ${addresses.apiToken}` } })).status, 401, 'the api token before the rotation is refused');
    const stored = await waitFor(`every acknowledged message of ${device.deviceId} in core`, async () => {
      const records = await readAllTelemetry({ coreUrl, apiToken: token }, device.deviceId);
      const ids = new Set(records.map((r) => r.messageId));
      const missing = [...acknowledged].filter((id) => !ids.has(id));
      return { done: missing.length === 0, value: records, seen: { missing: missing.length, stored: records.length } };
    }, { timeoutMs: 60_000, intervalMs: 1_000 });
    assert.equal(new Set(stored.map((r) => r.messageId)).size, stored.length, 'each stored once');
    console.log(`least authority: ${acknowledged.size} messages acknowledged across the rotation, all stored; ${device.failures.length} attempts failed and were sent again`);
  });
});
