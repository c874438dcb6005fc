import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { CHILD_TYPES, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { IMAGE_PULL_SECRET_NAME } from '../src/resources/index.ts';
import { iotService, iotTestLandscape, metricsPort, spawnOperator, stopOperator, type IoTObject } from './e2e-support.ts';

const instances = Array.from({ length: 20 }, (_, i) => `crash-${String(i).padStart(2, '0')}`);

let env: TestEnv;
let landscape: string;
let operator: ReturnType<typeof spawnOperator> | undefined;

before(async () => ({ env, landscape } = await iotTestLandscape()));

after(async () => {
  await stopOperator(env, landscape, operator);
  await env?.cleanup();
});

async function credentialsByNamespace(): Promise<Map<string, string>> {
  const { items } = await env.client.list<KubeObject & { data?: Record<string, string> }>(Kinds.Secret, {
    labelSelector: `cp.iotservices.io/landscape=${landscape}`,
    fieldSelector: 'metadata.name=iot-credentials',
  });
  return new Map(items.map((s) => [s.metadata.namespace!, JSON.stringify(s.data)]));
}

describe('the operator SIGKILLed during a rollout', () => {
  it('converges after a restart: all Available, no duplicate objects, credentials unchanged', async () => {
    operator = spawnOperator(env, landscape);
    await waitFor('the operator to start', async () => ({ done: /controller started/.test(operator!.output()), value: undefined, seen: operator!.output().slice(-500) }));
    await Promise.all(instances.map((name) => env.client.create(IoTServiceV1alpha1Type, iotService(name, landscape))));
    await waitFor('the rollout to be under way', async () => {
      const creds = await credentialsByNamespace();
      return { done: creds.size >= 3, value: undefined, seen: `${creds.size} instances with credentials` };
    }, { intervalMs: 50 });
    operator.kill('SIGKILL');
    await new Promise((resolve) => operator!.once('exit', resolve));
    const credentialsAtKill = await credentialsByNamespace();
    const availableAtKill = (await env.client.list<IoTObject>(IoTServiceV1alpha1Type, { namespace: landscape })).items.filter((i) => i.status?.phase === 'Available').length;
    assert.ok(availableAtKill < instances.length, `the kill happened mid-rollout (${availableAtKill} of ${instances.length} Available)`);

    operator = spawnOperator(env, landscape);
    await waitFor('all 20 instances to be Available', async () => {
      const { items } = await env.client.list<IoTObject>(IoTServiceV1alpha1Type, { namespace: landscape });
      const available = items.filter((i) => i.status?.phase === 'Available' && i.status.observedGeneration === i.metadata.generation);
      const others = items.filter((i) => !available.includes(i)).map((i) => ({ name: i.metadata.name, generation: i.metadata.generation, status: i.status }));
      return { done: available.length === instances.length, value: undefined, seen: { available: available.length, others } };
    }, { timeoutMs: 240_000, intervalMs: 1000 });

    const credentialsAfter = await credentialsByNamespace();
    for (const [namespace, data] of credentialsAtKill) assert.equal(credentialsAfter.get(namespace), data, `credentials of ${namespace} unchanged`);
    assert.equal(credentialsAfter.size, instances.length);

    for (const name of instances) {
      const ns = `${landscape}-${name}`;
      const count = async (type: typeof Kinds.Pod) => (await env.client.list(type, { namespace: ns })).items.filter((o) => !o.metadata.deletionTimestamp).length;
      assert.equal(await count(Kinds.Deployment), 3, `${ns}: Deployments`);
      assert.equal(await count(Kinds.StatefulSet), 2, `${ns}: StatefulSets`);
      assert.equal(await count(Kinds.ReplicaSet), 3, `${ns}: one ReplicaSet per Deployment (no spurious rollout)`);
      assert.equal(await count(Kinds.Service), 6, `${ns}: Services (gateway, core, broker and database, broker-client and database-client)`);
      assert.equal(await count(Kinds.Secret), 4, `${ns}: Secrets (image-pull-secret, iot-credentials, gateway-ca, gateway-tls)`);
      assert.equal(await count(Kinds.ConfigMap), 3, `${ns}: ConfigMaps (iot-config, gateway-ca and kube-root-ca.crt)`);
      assert.equal(await count(CHILD_TYPES.PodDisruptionBudget!), 5, `${ns}: PodDisruptionBudgets, one per component`);
      assert.equal(await count(Kinds.NetworkPolicy), 10, `${ns}: NetworkPolicies (isolation, gateway devices, core applications, egress, operator monitoring, one per component)`);
      assert.equal(await count(Kinds.Pod), 7, `${ns}: Pods`);
    }
  });

  it('restarted after a ConfigMap and a Secret were edited while it was down: both repaired, no other written, bodies not got one by one', async () => {
    operator!.kill('SIGKILL');
    await new Promise((resolve) => operator!.once('exit', resolve));
    type WithData = KubeObject & { data: Record<string, string> };
    const configOf = (name: string) => env.client.get<WithData>(Kinds.ConfigMap, 'iot-config', `${landscape}-${name}`);
    const secretOf = (name: string) => env.client.get<WithData>(Kinds.Secret, IMAGE_PULL_SECRET_NAME, `${landscape}-${name}`);
    const [configEdited, secretEdited, ...untouched] = instances as [string, string, ...string[]];
    const config = await configOf(configEdited);
    const secret = await secretOf(secretEdited);
    await env.client.replace(Kinds.ConfigMap, { ...config, data: Object.fromEntries(Object.keys(config.data).map((k) => [k, 'edited'])) });
    await env.client.replace(Kinds.Secret, { ...secret, data: { ...secret.data, '.dockerconfigjson': Buffer.from('{"auths":{}}').toString('base64') } });
    const versions = async () => (await Promise.all(untouched.flatMap((name) => [configOf(name), secretOf(name)]))).map((o) => `${o.metadata.namespace}/${o.kind}/${o.metadata.resourceVersion}`);
    const untouchedBefore = await versions();

    operator = spawnOperator(env, landscape);
    const port = await metricsPort(operator!);
    const metrics = await waitFor('every instance reconciled once, both edits repaired', async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      // A reconcile of an instance serving TLS ends with a requeue at its certificate's renewal time.
      const reconciled = [...text.matchAll(/controller_runtime_reconcile_total\{(?=[^}]*controller="iotservice")(?=[^}]*result="(?:success|requeue_after)")[^}]*\} (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
      const repaired = isDeepStrictEqual((await configOf(configEdited)).data, config.data) && isDeepStrictEqual((await secretOf(secretEdited)).data, secret.data);
      return { done: reconciled >= instances.length && repaired, value: text, seen: { reconciled, repaired } };
    }, { timeoutMs: 60_000, intervalMs: 500 });
    assert.deepEqual(await versions(), untouchedBefore, 'the ConfigMaps and Secrets of the other instances were not written');
    const gets = [...metrics.matchAll(/rest_client_requests_total\{[^}]*method="GET"[^}]*\} (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    // Lists count as GETs too: the caches' own, and those of the bodies. Each instance has five
    // bodies to compare: Secrets image-pull-secret, gateway-ca and gateway-tls, ConfigMaps iot-config and gateway-ca.
    const bodies = 5 * instances.length;
    assert.ok(gets < bodies, `${gets} GETs after the restart, for ${bodies} bodies compared: they were not got one by one`);
  });
});
