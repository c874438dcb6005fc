/**
 * The ptemplate operator on the real local cluster. One kwok node is labelled for the test and
 * advertises the pt devices (as the pt device plugin would); the others are not selected.
 *
 * Without the KMM Module CRD the consumer DaemonSet is still created and KMMAvailable=False says
 * KMM is missing; once the test's Module CRD is installed the Module appears. Both children carry
 * the spec's values, consumer pods run only on the selected node and are listed in
 * status.consumers; a spec change corrects the children; an edited or deleted child is put back;
 * a forced resync of an unchanged world writes nothing; the operator process runs as its
 * ServiceAccount with only the committed deploy/ RBAC.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { ifFound, isNotFound, Kinds, type KubeObject, type Manager, type ResourceType } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, spawnOperator, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { PTEMPLATE_CRD_FILE } from '../src/api/crd.ts';
import { Ptemplate, type PtemplateObject, type PtemplateSpec } from '../src/api/ptemplate.ts';
import { createPtemplateOperator } from '../src/operator.ts';
import type { DaemonSetObject } from '../src/resources/daemonset.ts';
import { Module, MODULE_CRD_NAME, type ModuleObject } from '../src/resources/module.ts';
import type { PodObject } from '../src/status.ts';

const crdFile = fileURLToPath(new URL(`../${PTEMPLATE_CRD_FILE}`, import.meta.url));
const moduleCrdFile = fileURLToPath(new URL('fixtures/kmm.sigs.x-k8s.io_modules.yml', import.meta.url));
const deployDir = fileURLToPath(new URL('../deploy/', import.meta.url));
const name = 'consumer-pod';
const DEVICES = 'example.com/ptemplate';
const writeMethods = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

let env: TestEnv;
let ns: string;
let mgr: Manager;
let selectedNode: string;
let otherNodes: string[];
let labelKey: string;

function getOrUndefined<T extends KubeObject>(type: ResourceType, objectName: string): Promise<T | undefined> {
  return ifFound(env.client.get<T>(type, objectName, ns));
}

function ptemplate(objectName: string, spec: Partial<PtemplateSpec> = {}): PtemplateObject {
  return {
    apiVersion: 'pt.example.com/v1alpha1',
    kind: 'Ptemplate',
    metadata: { name: objectName, namespace: ns },
    spec: {
      maxdev: 5,
      defaultmsg: 'hello',
      consumerimage: 'registry.example.com/pt-consumer:1',
      requiredDevices: 2,
      imageRepoSecret: { name: 'pt-pull-secret' },
      selector: { [labelKey]: 'selected' },
      ...spec,
    } as PtemplateSpec, // moduleImage and devicePluginImage are left to the CRD defaults
  };
}

async function condition(objectName: string, type: string) {
  const pt = await env.client.get<PtemplateObject>(Ptemplate, objectName, ns);
  return pt.status?.conditions?.find((c) => c.type === type);
}

/** Live consumer pods of a Ptemplate, with their node. */
async function consumerPods(objectName = name): Promise<PodObject[]> {
  const pods = await env.client.list<PodObject>(Kinds.Pod, { namespace: ns, labelSelector: `pt.example.com/ptemplate=${objectName}` });
  return pods.items.filter((p) => !p.metadata.deletionTimestamp);
}

/** Waits until the consumer pods run (ready) with `image`, and status.consumers names exactly them. */
async function waitForConsumers(image: string, objectName = name): Promise<PodObject[]> {
  return env.waitFor(`running consumer pods of ${image} listed in status.consumers of ${objectName}`, async () => {
    const pods = await consumerPods(objectName);
    const pt = await env.client.get<PtemplateObject>(Ptemplate, objectName, ns);
    const running = pods.filter((p) => p.status?.phase === 'Running' && p.spec?.containers[0]?.image === image && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    const names = pods.map((p) => p.metadata.name).sort();
    const done = pods.length > 0 && running.length === pods.length && JSON.stringify(pt.status?.consumers) === JSON.stringify(names);
    return { done, value: pods, seen: { pods: pods.map((p) => [p.metadata.name, p.spec?.nodeName, p.status?.phase, p.spec?.containers[0]?.image]), consumers: pt.status?.consumers } };
  });
}

async function writeCount(): Promise<number> {
  const { values } = await mgr.metrics.restRequests.get();
  return values.filter((v) => writeMethods.has(String(v.labels.method))).reduce((sum, v) => sum + v.value, 0);
}

async function reconcileCount(): Promise<number> {
  const { values } = await mgr.metrics.reconcileTotal.get();
  return values.filter((v) => v.labels.controller === 'ptemplate').reduce((sum, v) => sum + v.value, 0);
}

async function patchNode(nodeName: string, labels: Record<string, string | null>, devices: string | null): Promise<void> {
  await env.client.patch(Kinds.Node, nodeName, undefined, { metadata: { labels } }, 'merge');
  await env.client.patchStatus(Kinds.Node, nodeName, undefined, { status: { capacity: { [DEVICES]: devices }, allocatable: { [DEVICES]: devices } } }, 'merge');
}

/** Removes the stand-in Module CRD; refuses to touch a Module CRD that is not ours (a real KMM). */
async function uninstallModuleCrd(): Promise<void> {
  const existing = await ifFound(env.client.get(Kinds.CustomResourceDefinition, MODULE_CRD_NAME));
  if (!existing) return;
  if (existing.metadata.labels?.['pt.example.com/kmm-stand-in'] !== 'true') {
    throw new Error(`${MODULE_CRD_NAME} is installed and is not the tests' stand-in (KMM itself?); these tests would delete it, so they do not run here`);
  }
  await env.uninstallCrd(MODULE_CRD_NAME);
  await env.waitFor('the Module CRD to be gone', async () => {
    const gone = await env.client.get(Kinds.CustomResourceDefinition, MODULE_CRD_NAME).then(() => false, (err: unknown) => isNotFound(err));
    return { done: gone, value: undefined };
  });
}

describe('ptemplate operator', () => {
  before(async () => {
    env = await localTestEnv();
    await env.installCrd(crdFile);
    await uninstallModuleCrd();
    ns = await env.namespace('ptemplate');
    labelKey = `pt-e2e.example.com/${ns}`;
    const nodes = await env.client.list(Kinds.Node);
    const kwok = nodes.items.filter((n) => n.metadata.annotations?.['kwok.x-k8s.io/node'] === 'fake').map((n) => n.metadata.name ?? '').sort();
    assert.ok(kwok.length >= 2, `the test needs two kwok nodes, found ${kwok.join(', ')}`);
    selectedNode = kwok.at(-1)!;
    otherNodes = kwok.slice(0, -1);
    await patchNode(selectedNode, { [labelKey]: 'selected' }, '5');
    mgr = await createPtemplateOperator(env.operatorOptions(ns));
    await mgr.start();
  });

  after(async () => {
    await mgr?.stop();
    if (selectedNode) await patchNode(selectedNode, { [labelKey]: null }, null);
    await env?.cleanup();
  });

  test('without the KMM Module CRD the DaemonSet is still created and KMMAvailable=False says KMM is missing', async () => {
    await env.client.create(Ptemplate, ptemplate(name));
    const ds = await env.waitFor('the consumer DaemonSet', async () => {
      const found = await getOrUndefined<DaemonSetObject>(Kinds.DaemonSet, `${name}-consumer`);
      return { done: found !== undefined, value: found! };
    });
    assert.equal(ds.spec?.template.spec?.containers[0]?.image, 'registry.example.com/pt-consumer:1');
    const kmm = await env.waitFor('KMMAvailable=False', async () => {
      const c = await condition(name, 'KMMAvailable');
      return { done: c?.status === 'False', value: c, seen: c };
    });
    assert.equal(kmm?.reason, 'ModuleCRDMissing');
    assert.match(kmm?.message ?? '', /KMM is not installed/);
    await waitForConsumers('registry.example.com/pt-consumer:1');
  });

  test('once the Module CRD is installed the Module is created', async () => {
    await env.installCrd(moduleCrdFile);
    await env.waitFor('the Module (the operator looks again every 10 s)', async () => {
      const found = await getOrUndefined<ModuleObject>(Module, name);
      return { done: found !== undefined, value: found };
    }, { timeoutMs: 30_000 });
    const kmm = await env.waitFor('KMMAvailable=True', async () => {
      const c = await condition(name, 'KMMAvailable');
      return { done: c?.status === 'True', value: c, seen: c };
    });
    assert.equal(kmm?.reason, 'ModuleInPlace');
  });

  test('the Module and the DaemonSet carry the spec; consumers run only on the selected node and fill status.consumers', async () => {
    const pt = await env.client.get<PtemplateObject>(Ptemplate, name, ns);
    const owner = { apiVersion: 'pt.example.com/v1alpha1', kind: 'Ptemplate', name, uid: pt.metadata.uid, controller: true, blockOwnerDeletion: true };
    const module = await env.client.get<ModuleObject>(Module, name, ns);
    assert.deepEqual(module.metadata.ownerReferences, [owner]);
    assert.deepEqual(module.spec, {
      moduleLoader: {
        container: {
          modprobe: { moduleName: 'pt', parameters: ['max_dev=5', 'default_msg=hello'] },
          kernelMappings: [{ regexp: '^.+$', containerImage: 'quay.io/chrisp262/pt-char-dev:${KERNEL_FULL_VERSION}-sb' }],
        },
      },
      devicePlugin: { container: { image: 'quay.io/chrisp262/pt-device-plugin:plugin-latest' } },
      imageRepoSecret: { name: 'pt-pull-secret' },
      selector: { [labelKey]: 'selected' },
    });

    const ds = await env.client.get<DaemonSetObject>(Kinds.DaemonSet, `${name}-consumer`, ns);
    assert.deepEqual(ds.metadata.ownerReferences, [owner]);
    const podSpec = ds.spec?.template.spec;
    assert.deepEqual(podSpec?.nodeSelector, { [labelKey]: 'selected' });
    assert.deepEqual(podSpec?.imagePullSecrets, [{ name: 'pt-pull-secret' }]);
    assert.deepEqual(podSpec?.containers[0]?.resources, { limits: { [DEVICES]: '2' }, requests: { [DEVICES]: '2' } });

    const pods = await waitForConsumers('registry.example.com/pt-consumer:1');
    assert.deepEqual(pods.map((p) => p.spec?.nodeName), [selectedNode], `one consumer, on ${selectedNode} only (not on ${otherNodes.join(', ')})`);
    const ready = await env.waitFor('ConsumersReady=True', async () => {
      const c = await condition(name, 'ConsumersReady');
      return { done: c?.status === 'True', value: c, seen: c };
    });
    assert.equal(ready?.message, '1/1 consumer pods ready');
  });

  test('a spec change corrects both children and the consumers follow', async () => {
    const before = (await consumerPods()).map((p) => p.metadata.name);
    await env.client.patch(Ptemplate, name, ns, { spec: { maxdev: 6, defaultmsg: 'changed', consumerimage: 'registry.example.com/pt-consumer:2', requiredDevices: 1 } }, 'merge');
    await env.waitFor('the Module parameters to follow the spec', async () => {
      const m = await env.client.get<ModuleObject>(Module, name, ns);
      const parameters = m.spec?.moduleLoader.container.modprobe.parameters;
      return { done: JSON.stringify(parameters) === JSON.stringify(['max_dev=6', 'default_msg=changed']), value: parameters, seen: parameters };
    });
    const ds = await env.waitFor('the DaemonSet to follow the spec', async () => {
      const d = await env.client.get<DaemonSetObject>(Kinds.DaemonSet, `${name}-consumer`, ns);
      const container = d.spec?.template.spec?.containers[0];
      return { done: container?.image === 'registry.example.com/pt-consumer:2', value: d, seen: container };
    });
    assert.deepEqual(ds.spec?.template.spec?.containers[0]?.resources, { limits: { [DEVICES]: '1' }, requests: { [DEVICES]: '1' } });
    const pods = await waitForConsumers('registry.example.com/pt-consumer:2');
    assert.equal(pods.length, 1);
    assert.ok(!before.includes(pods[0]!.metadata.name), 'the consumer pod was replaced by one of the new image');
  });

  test('an edited DaemonSet and a deleted Module are put back', async () => {
    await env.client.patch(Kinds.DaemonSet, `${name}-consumer`, ns, { spec: { template: { spec: { containers: [{ name: 'consumer', image: 'tampered:1' }] } } } }, 'strategic');
    await env.client.delete(Module, name, ns);
    await env.waitFor('the DaemonSet image to be restored', async () => {
      const d = await env.client.get<DaemonSetObject>(Kinds.DaemonSet, `${name}-consumer`, ns);
      const image = d.spec?.template.spec?.containers[0]?.image;
      return { done: image === 'registry.example.com/pt-consumer:2', value: image, seen: image };
    });
    await env.waitFor('the Module to be recreated', async () => {
      const m = await getOrUndefined<ModuleObject>(Module, name);
      return { done: m !== undefined && !m.metadata.deletionTimestamp, value: m, seen: m?.metadata };
    });
    await waitForConsumers('registry.example.com/pt-consumer:2');
  });

  test('a forced resync of an unchanged world writes nothing', async () => {
    await env.waitFor('ConsumersReady=True', async () => {
      const c = await condition(name, 'ConsumersReady');
      return { done: c?.status === 'True', value: c, seen: c };
    });
    // Let the last events settle: no write for 2 s.
    let writes = await writeCount();
    for (let quiet = 0; quiet < 8; ) {
      await sleep(250);
      const now = await writeCount();
      quiet = now === writes ? quiet + 1 : 0;
      writes = now;
    }
    const reconciles = await reconcileCount();
    mgr.resyncAll();
    await env.waitFor('the resync to reconcile the Ptemplate', async () => {
      const n = await reconcileCount();
      return { done: n > reconciles, value: n, seen: n };
    });
    await sleep(500);
    assert.equal(await writeCount(), writes, 'no POST, PUT, PATCH or DELETE');
  });

  test('the operator process runs as its ServiceAccount with the deploy/ RBAC, KUBECONFIG and WATCH_NAMESPACE from the environment', async () => {
    await mgr.stop(); // the process alone reconciles from here on
    const kubeconfig = await serviceAccountKubeconfig(env, ns, ['service_account.yml', 'role.yml', 'role_binding.yml'].map((f) => path.join(deployDir, f)));
    await env.client.create(Ptemplate, ptemplate('from-process', { consumerimage: 'registry.example.com/pt-consumer:3', requiredDevices: 0 }));
    const operator = spawnOperator(['--import', 'tsx', 'operators/ptemplate/src/main.ts', '--leader-elect', '--metrics-bind-address', '127.0.0.1:0'], {
      KUBECONFIG: kubeconfig.file,
      WATCH_NAMESPACE: ns,
      LOG_LEVEL: 'warn',
    });
    let code: number | null;
    try {
      const pods = await waitForConsumers('registry.example.com/pt-consumer:3', 'from-process');
      assert.deepEqual(pods.map((p) => p.spec?.nodeName), [selectedNode]);
      await env.waitFor('the Module of from-process', async () => {
        const m = await getOrUndefined<ModuleObject>(Module, 'from-process');
        return { done: m !== undefined, value: m };
      });
      const c = await env.waitFor('KMMAvailable=True on from-process', async () => {
        const found = await condition('from-process', 'KMMAvailable');
        return { done: found?.status === 'True', value: found, seen: found };
      });
      assert.equal(c?.reason, 'ModuleInPlace');
    } finally {
      code = await operator.stop();
      await kubeconfig.cleanup();
    }
    assert.equal(code, 0, `operator exit code (stderr: ${operator.output().slice(-2000)})`);
    assert.doesNotMatch(operator.output(), /Forbidden|forbidden/, 'no request was refused by RBAC');
  });
});
