/**
 * The memcached operator on the real local cluster, following the walkthrough: a Memcached of
 * size 3 gets a Deployment of 3 running pods and `status.nodes` naming them; size 4 scales it;
 * a deleted Deployment comes back; deleting the Memcached garbage-collects the Deployment; the
 * API server rejects a negative size; the operator process runs from its entry point with
 * KUBECONFIG and WATCH_NAMESPACE from the environment, as its ServiceAccount with only the
 * committed deploy/ RBAC.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiError, ifFound, Kinds, type Manager } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, spawnOperator, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { MEMCACHED_CRD_FILE } from '../src/api/crd.ts';
import { Memcached, type MemcachedObject } from '../src/api/memcached.ts';
import { createMemcachedOperator } from '../src/operator.ts';
import type { DeploymentObject } from '../src/resources/deployment.ts';
import type { PodObject } from '../src/status.ts';

const crdFile = fileURLToPath(new URL(`../${MEMCACHED_CRD_FILE}`, import.meta.url));
const deployDir = fileURLToPath(new URL('../deploy/', import.meta.url));
const name = 'example-memcached';

let env: TestEnv;
let ns: string;
let mgr: Manager;

function memcached(size: number, objectName = name): MemcachedObject {
  return { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name: objectName, namespace: ns }, spec: { size } };
}

function deployment(objectName = name): Promise<DeploymentObject | undefined> {
  return ifFound(env.client.get<DeploymentObject>(Kinds.Deployment, objectName, ns));
}

/** Names of the instance's pods that are Running and Ready and not being deleted, sorted. */
async function runningPods(objectName = name): Promise<string[]> {
  const pods = await env.client.list<PodObject>(Kinds.Pod, { namespace: ns, labelSelector: `app=memcached,memcached_cr=${objectName}` });
  return pods.items
    .filter((p) => !p.metadata.deletionTimestamp && p.status?.phase === 'Running' && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
    .map((p) => p.metadata.name ?? '')
    .sort();
}

/** Waits until `size` pods run and status.nodes lists exactly them; returns the names. */
async function waitForPodsAndStatus(size: number, objectName = name): Promise<string[]> {
  return env.waitFor(
    `${size} running memcached pods listed in status.nodes of ${objectName}`,
    async () => {
      const running = await runningPods(objectName);
      const current = await env.client.get<MemcachedObject>(Memcached, objectName, ns);
      const nodes = current.status?.nodes ?? [];
      const done = running.length === size && JSON.stringify(nodes) === JSON.stringify(running);
      return { done, value: nodes, seen: { running, nodes } };
    },
    { timeoutMs: 60_000 },
  );
}

describe('memcached operator', () => {
  before(async () => {
    env = await localTestEnv();
    await env.installCrd(crdFile);
    ns = await env.namespace('memcached');
    mgr = await createMemcachedOperator(env.operatorOptions(ns));
    await mgr.start();
  });

  after(async () => {
    await mgr?.stop();
    await env?.cleanup();
  });

  test('size 3 gives a Deployment of 3 memcached pods, all listed in status.nodes', async () => {
    const created = await env.client.create(Memcached, memcached(3));
    const d = await env.waitFor('the Deployment example-memcached', async () => {
      const found = await deployment();
      return { done: found !== undefined, value: found! };
    });
    assert.equal(d.spec?.replicas, 3);
    const container = d.spec?.template.spec?.containers[0];
    assert.equal(container?.image, 'memcached:1.6-alpine');
    assert.deepEqual(container?.command, ['memcached', '-m=64', '-o', 'modern', '-v']);
    assert.equal(container?.ports?.[0]?.containerPort, 11211);
    const owner = d.metadata.ownerReferences?.find((ref) => ref.controller);
    assert.deepEqual({ kind: owner?.kind, name: owner?.name, uid: owner?.uid }, { kind: 'Memcached', name, uid: created.metadata.uid });

    const nodes = await waitForPodsAndStatus(3);
    assert.equal(nodes.length, 3);
    assert.ok(nodes.every((n) => n.startsWith(`${name}-`)), `pod names come from the Deployment: ${nodes.join(', ')}`);
  });

  test('size 4 scales the Deployment and status.nodes follows', async () => {
    const before = await waitForPodsAndStatus(3);
    await env.client.patch(Memcached, name, ns, { spec: { size: 4 } }, 'merge');
    await env.waitFor('the Deployment to want 4 replicas', async () => {
      const d = await deployment();
      return { done: d?.spec?.replicas === 4, value: d, seen: d?.spec?.replicas };
    });
    const nodes = await waitForPodsAndStatus(4);
    assert.ok(before.every((n) => nodes.includes(n)), 'scaling up keeps the existing pods');
  });

  test('a deleted Deployment is recreated', async () => {
    const old = await deployment();
    assert.ok(old?.metadata.uid);
    const oldPods = await waitForPodsAndStatus(4);
    await env.client.delete(Kinds.Deployment, name, ns, { propagationPolicy: 'Background' });
    const fresh = await env.waitFor('a new Deployment example-memcached', async () => {
      const d = await deployment();
      return { done: d !== undefined && d.metadata.uid !== old.metadata.uid && !d.metadata.deletionTimestamp, value: d!, seen: d?.metadata };
    });
    assert.equal(fresh.spec?.replicas, 4);
    // The old pods go with the old Deployment; status.nodes ends up naming only the new ones.
    await env.waitFor('status.nodes to list 4 pods of the new Deployment only', async () => {
      const nodes = await waitForPodsAndStatus(4);
      return { done: nodes.every((n) => !oldPods.includes(n)), value: nodes, seen: { nodes, oldPods } };
    });
  });

  test('deleting the Memcached garbage-collects its Deployment', async () => {
    await env.client.delete(Memcached, name, ns);
    await env.waitFor('the Deployment to be garbage-collected', async () => {
      const d = await deployment();
      return { done: d === undefined, value: undefined, seen: d?.metadata };
    });
  });

  test('the API server rejects a negative size', async () => {
    await assert.rejects(env.client.create(Memcached, memcached(-1, 'negative')), (err: unknown) => {
      assert.ok(err instanceof ApiError, `expected an ApiError, got ${String(err)}`);
      assert.equal(err.reason, 'Invalid');
      assert.equal(err.code, 422);
      assert.match(err.message, /spec\.size: Invalid value: -1: spec\.size in body should be greater than or equal to 0/);
      return true;
    });
    assert.equal(await deployment('negative'), undefined);
  });

  test('the operator process runs as its ServiceAccount with the deploy/ RBAC, KUBECONFIG and WATCH_NAMESPACE from the environment', async () => {
    await mgr.stop(); // the process alone reconciles from here on
    const kubeconfig = await serviceAccountKubeconfig(env, ns, ['service_account.yaml', 'role.yaml', 'role_binding.yaml'].map((f) => path.join(deployDir, f)));
    await env.client.create(Memcached, memcached(2, 'from-process'));
    const operator = spawnOperator(['--import', 'tsx', 'operators/memcached/src/main.ts', '--leader-elect', '--metrics-bind-address', '127.0.0.1:0'], {
      KUBECONFIG: kubeconfig.file,
      WATCH_NAMESPACE: ns,
      LOG_LEVEL: 'warn',
    });
    let code: number | null;
    try {
      const nodes = await waitForPodsAndStatus(2, 'from-process');
      assert.equal(nodes.length, 2);
      const lease = await env.client.get(Kinds.Lease, 'memcached-operator-leader', ns);
      assert.ok(lease.metadata.uid, 'the operator holds its leader-election Lease');
    } finally {
      code = await operator.stop();
      await kubeconfig.cleanup();
    }
    assert.equal(code, 0, `operator exit code (stderr: ${operator.output().slice(-2000)})`);
    assert.doesNotMatch(operator.output(), /Forbidden|forbidden/, 'no request was refused by RBAC');
  });
});
