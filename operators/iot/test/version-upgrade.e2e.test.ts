/**
 * The upgrade from the release that knew IoTService v1alpha1 only to the one that stores v1beta1,
 * on the real local cluster (instances on its kwok nodes), as users live it:
 * - IoTServices created by the previous release are stored as v1alpha1 (read from etcd itself);
 * - once the current CRD is installed (conversion served by this process, as the operator's
 *   webhook would) and the operator runs (allowing the taint key `dedicated` and the node label
 *   key `type` the instances use, as their admin would), they become Available, read the same through either
 *   version (each the conversion of the other; scheduling fields under `placement` in v1beta1),
 *   and a write through either version shows up in the other and in the workloads;
 * - the storage migration (every IoTService replaced unchanged through v1beta1 with kubectl, then
 *   the CRD's status.storedVersions set to [v1beta1]) leaves etcd holding v1beta1 only, while no
 *   pod is replaced, no workload rolls and the same operator keeps working;
 * - with the conversion webhook down, v1alpha1 reads fail with the API server's conversion error
 *   while v1beta1 reads (the operator's) still work.
 * The CRD is left as installIoTCrd leaves it. Changing the CRD affects the whole shared cluster:
 * while v1beta1 is withdrawn (the "previous release", seconds) other clients of v1beta1 get 404s.
 */
// run-tests: alone among the IoT files: it installs the previous release's CRD (v1alpha1 only) and takes the conversion webhook down.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ApiError, Kinds, isNotFound, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { convertIoTService } from '../src/api/conversion.ts';
import { IOTSERVICE_CRD_NAME, iotServiceCrd } from '../src/api/crd.ts';
import { defaultTenantPolicy } from '../src/resources/tenant-policy.ts';
import { abandonLandscape, createLandscape, installIoTCrd, iotService, serveIoTConversion, startOperator, stopOperator, testConversion, waitForPhase } from './e2e-support.ts';
import { API_VERSION, IOTSERVICE_API_VERSION } from '../src/api/iotservice.ts';
import { API_VERSION_V1ALPHA1, IOTSERVICE_V1ALPHA1_API_VERSION } from '../src/api/v1alpha1.ts';
import { IoTServiceType, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { iotServiceKey, localEtcd, storedIoTServices, type LocalEtcd } from './etcd-store.ts';
import { rewriteIoTServices, setStoredVersions } from './storage-migration.ts';

type Fields = Record<string, unknown>;
type IoT = KubeObject & { spec: Record<string, Fields | unknown>; status?: { phase?: string; observedGeneration?: number } };
type CrdObject = KubeObject & { spec: { versions: Array<Fields & { name: string }> }; status?: { storedVersions?: string[] } };
type PodTemplate = { spec: { nodeSelector?: Fields; tolerations?: Fields[]; affinity?: Fields } };
type Workload = KubeObject & { spec: { replicas?: number; template: PodTemplate } };

const ALPHA = IOTSERVICE_V1ALPHA1_API_VERSION;
const BETA = IOTSERVICE_API_VERSION;
const kwokOnly = { type: 'kwok' }; // the label of the local cluster's kwok nodes
const dedicated = { key: 'dedicated', operator: 'Equal', value: 'iot', effect: 'NoSchedule' };
const onKwok = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'type', operator: 'In', values: ['kwok'] }] }] } } };

/** The instances the previous release's users created (v1alpha1), by name. */
const instances: Record<string, Fields> = {
  plain: {},
  selected: { gateway: { replicas: 1, nodeSelector: kwokOnly }, database: { nodeSelector: kwokOnly } },
  tolerant: { core: { tolerations: [dedicated] }, broker: { affinity: onKwok } },
  'via-alpha': { gateway: { nodeSelector: kwokOnly } },
  'via-beta': { processing: { affinity: onKwok } },
};
/** The IoTService of a namespace no operator serves. */
const idle: Fields = { gateway: { nodeSelector: {} }, core: { affinity: onKwok, tolerations: [] } };
/** Instances no write of this test touches after they are created, and their pods (replicas: 7 by default, 6 for selected). */
const untouched = ['plain', 'selected', 'tolerant'];
const untouchedPods = 7 + 6 + 7;

const env: TestEnv = await localTestEnv();
const found = localEtcd(env.kubeconfigPath);
const skip = 'reason' in found ? found.reason : false;
const etcd = found as LocalEtcd;

let landscape = '';
let idleNamespace = ''; // a namespace no operator serves: its IoTService is written by nobody until the migration
let mgr: Manager | undefined;

const crd = () => env.client.get<CrdObject>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME);
const patchCrd = (ops: unknown[]) => env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, ops, 'json');
const objects = () => [...Object.keys(instances).map((name) => ({ namespace: landscape, name })), { namespace: idleNamespace, name: 'idle' }];

/** What etcd holds for this test's IoTServices: apiVersion by name. */
async function storedVersionsOfOurs(): Promise<Record<string, string | undefined>> {
  const stored = await storedIoTServices(etcd);
  return Object.fromEntries(objects().map(({ namespace, name }) => [name, stored.get(iotServiceKey(etcd, namespace, name))?.apiVersion]));
}

/** One IoTService read through both versions at the same resourceVersion. */
async function readBoth(namespace: string, name: string): Promise<{ alpha: IoT; beta: IoT }> {
  return waitFor(`${namespace}/${name} read as v1alpha1 and v1beta1 at one resourceVersion`, async () => {
    const alpha = await env.client.get<IoT>(IoTServiceV1alpha1Type, name, namespace);
    const beta = await env.client.get<IoT>(IoTServiceType, name, namespace);
    return { done: alpha.metadata.resourceVersion === beta.metadata.resourceVersion, value: { alpha, beta }, seen: [alpha.metadata.resourceVersion, beta.metadata.resourceVersion] };
  });
}

const component = (iot: IoT, name: string) => (iot.spec[name] ?? {}) as Fields;

async function workload(namespace: string, kind: 'Deployment' | 'StatefulSet', name: string): Promise<Workload> {
  return env.client.get<Workload>(Kinds[kind], name, namespace);
}

/** Pod UIDs and workload generations of the untouched instances. */
async function untouchedState(): Promise<{ pods: Record<string, string>; generations: Record<string, number> }> {
  const pods: Record<string, string> = {};
  const generations: Record<string, number> = {};
  for (const id of untouched) {
    const namespace = `${landscape}-${id}`;
    for (const pod of (await env.client.list(Kinds.Pod, { namespace })).items) pods[`${namespace}/${pod.metadata.name}`] = pod.metadata.uid!;
    for (const kind of ['Deployment', 'StatefulSet'] as const) {
      for (const w of (await env.client.list(Kinds[kind], { namespace })).items) generations[`${namespace}/${kind}/${w.metadata.name}`] = w.metadata.generation!;
    }
  }
  return { pods, generations };
}

/** A port on 127.0.0.1 that nothing listens on. */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The IoTService CRD of the previous release: the current one's v1alpha1, stored, and nothing else
 * (no v1beta1, no conversion). Getting there from the current CRD is a downgrade: every IoTService
 * of the cluster is first stored as v1alpha1, since storedVersions may only list versions the CRD has.
 */
async function installPreviousRelease(): Promise<void> {
  await installIoTCrd(env);
  const versions = (iotServiceCrd() as CrdObject).spec.versions;
  await patchCrd([{ op: 'replace', path: '/spec/versions', value: versions.map((v) => ({ ...v, storage: v.name === API_VERSION_V1ALPHA1 })) }]);
  await waitFor('every IoTService of the cluster stored as v1alpha1', async () => {
    await rewriteIoTServices(env, API_VERSION_V1ALPHA1);
    const left = [...(await storedIoTServices(etcd))].filter(([, o]) => o.apiVersion !== ALPHA).map(([key]) => key);
    return { done: left.length === 0, value: undefined, seen: left };
  });
  await setStoredVersions(env, [API_VERSION_V1ALPHA1]);
  await patchCrd([
    { op: 'replace', path: '/spec/versions', value: versions.filter((v) => v.name === API_VERSION_V1ALPHA1).map((v) => ({ ...v, storage: true })) },
    { op: 'replace', path: '/spec/conversion', value: { strategy: 'None' } },
  ]);
  await waitFor('v1beta1 withdrawn, v1alpha1 served', async () => {
    const beta = await env.client.list(IoTServiceType, { namespace: landscape }).then(() => 'served', (err: unknown) => (isNotFound(err) ? 'withdrawn' : Promise.reject(err)));
    await env.client.list(IoTServiceV1alpha1Type, { namespace: landscape });
    return { done: beta === 'withdrawn', value: undefined, seen: beta };
  });
}

before(async () => {
  if (skip) return;
  landscape = await createLandscape(env);
  idleNamespace = await createLandscape(env);
});

after(async () => {
  if (skip) return;
  await installIoTCrd(env);
  if (mgr) await stopOperator(env, landscape, mgr);
  else if (landscape) await abandonLandscape(env, landscape);
  await env.cleanup();
});

describe('IoTService v1alpha1 -> v1beta1: objects of the previous release through the upgrade and the storage migration', { skip }, () => {
  it('the previous release (v1alpha1 only, no conversion) stores IoTServices as v1alpha1', async () => {
    await installPreviousRelease();
    const current = await crd();
    assert.deepEqual(current.spec.versions.map((v) => [v.name, v.served, v.storage]), [['v1alpha1', true, true]]);
    assert.deepEqual(current.status?.storedVersions, ['v1alpha1']);
    for (const [name, spec] of Object.entries(instances)) await env.client.create(IoTServiceV1alpha1Type, iotService(name, landscape, spec));
    await env.client.create(IoTServiceV1alpha1Type, iotService('idle', idleNamespace, idle));
    assert.deepEqual(await storedVersionsOfOurs(), { plain: ALPHA, selected: ALPHA, tolerant: ALPHA, 'via-alpha': ALPHA, 'via-beta': ALPHA, idle: ALPHA });
  });

  it('upgrade: with the current CRD and the operator started, every instance becomes Available', async () => {
    await installIoTCrd(env);
    const current = await crd();
    assert.deepEqual(current.spec.versions.map((v) => [v.name, v.served, v.storage]), [['v1alpha1', true, false], ['v1beta1', true, true]]);
    assert.deepEqual(current.status?.storedVersions, ['v1alpha1', 'v1beta1'], 'objects of both versions may now be stored');
    const tenancy = defaultTenantPolicy('registry.example.com/iot');
    mgr = await startOperator(env, landscape, { tenancy: { ...tenancy, allowedTolerationKeys: [dedicated.key], allowedNodeLabelKeys: [...tenancy.allowedNodeLabelKeys, 'type'] } });
    for (const name of Object.keys(instances)) await waitForPhase(env, landscape, name, 'Available');
  });

  it('every object reads through v1alpha1 and v1beta1 alike, each the conversion of the other, placement under v1beta1 only', async () => {
    for (const { namespace, name } of objects()) {
      const { alpha, beta } = await readBoth(namespace, name);
      assert.equal(alpha.apiVersion, ALPHA);
      assert.equal(beta.apiVersion, BETA);
      assert.deepEqual(convertIoTService(alpha, BETA), beta, `${name}: v1alpha1 converted is the v1beta1 read`);
      assert.deepEqual(convertIoTService(beta, ALPHA), alpha, `${name}: v1beta1 converted is the v1alpha1 read`);
      const created = name === 'idle' ? idle : instances[name]!;
      for (const [c, fields] of Object.entries(created) as Array<[string, Fields]>) {
        const { replicas, ...scheduling } = fields;
        assert.deepEqual(component(beta, c).placement, scheduling, `${name}: spec.${c}.placement in v1beta1`);
        for (const field of Object.keys(scheduling)) {
          assert.deepEqual(component(alpha, c)[field], scheduling[field], `${name}: spec.${c}.${field} in v1alpha1`);
          assert.equal(component(beta, c)[field], undefined, `${name}: no spec.${c}.${field} beside placement in v1beta1`);
        }
        if (replicas !== undefined) assert.equal(component(beta, c).replicas, replicas);
      }
    }
    const selected = `${landscape}-selected`;
    assert.deepEqual((await workload(selected, 'Deployment', 'gateway')).spec.template.spec.nodeSelector, kwokOnly);
    assert.deepEqual((await workload(selected, 'StatefulSet', 'database')).spec.template.spec.nodeSelector, kwokOnly);
    assert.deepEqual((await workload(`${landscape}-tolerant`, 'Deployment', 'core')).spec.template.spec.tolerations, [dedicated]);
    assert.deepEqual((await workload(`${landscape}-tolerant`, 'StatefulSet', 'broker')).spec.template.spec.affinity, onKwok);
  });

  it('a merge patch through v1alpha1 shows up under placement in v1beta1 and in the pod template', async () => {
    const selector = { type: 'kwok', 'kubernetes.io/os': 'linux' };
    await env.client.patch(IoTServiceV1alpha1Type, 'via-alpha', landscape, { spec: { gateway: { nodeSelector: selector } } }, 'merge');
    const { alpha, beta } = await readBoth(landscape, 'via-alpha');
    assert.deepEqual(component(beta, 'gateway').placement, { nodeSelector: selector });
    assert.deepEqual(component(alpha, 'gateway').nodeSelector, selector);
    await waitForPhase(env, landscape, 'via-alpha', 'Available');
    assert.deepEqual((await workload(`${landscape}-via-alpha`, 'Deployment', 'gateway')).spec.template.spec.nodeSelector, selector);
  });

  it('a merge patch through v1beta1 shows up flat in v1alpha1 and in the pod template', async () => {
    await env.client.patch(IoTServiceType, 'via-beta', landscape, { spec: { core: { placement: { tolerations: [dedicated] } } } }, 'merge');
    const { alpha, beta } = await readBoth(landscape, 'via-beta');
    assert.deepEqual(component(alpha, 'core').tolerations, [dedicated]);
    assert.equal(component(alpha, 'core').placement, undefined);
    assert.deepEqual(component(beta, 'core').placement, { tolerations: [dedicated] });
    assert.deepEqual(component(alpha, 'processing').affinity, onKwok, 'the other component keeps its placement');
    await waitForPhase(env, landscape, 'via-beta', 'Available');
    assert.deepEqual((await workload(`${landscape}-via-beta`, 'Deployment', 'core')).spec.template.spec.tolerations, [dedicated]);
  });

  it('the storage migration leaves etcd holding v1beta1 only; no pod replaced, no rollout, the same operator still at work', async () => {
    const before = await untouchedState();
    assert.equal(Object.keys(before.pods).length, untouchedPods, `the untouched instances' pods: ${Object.keys(before.pods).join(', ')}`);
    const generations = Object.fromEntries(await Promise.all(Object.keys(instances).map(async (name) => [name, (await env.client.get<IoT>(IoTServiceType, name, landscape)).metadata.generation])));
    assert.equal((await storedVersionsOfOurs()).idle, ALPHA, 'an IoTService nobody wrote since the upgrade is still stored as v1alpha1');

    await rewriteIoTServices(env, API_VERSION);
    await setStoredVersions(env, [API_VERSION]);

    assert.deepEqual((await crd()).status?.storedVersions, ['v1beta1']);
    const stored = await storedIoTServices(etcd);
    assert.deepEqual(await storedVersionsOfOurs(), { plain: BETA, selected: BETA, tolerant: BETA, 'via-alpha': BETA, 'via-beta': BETA, idle: BETA });
    assert.deepEqual([...stored].filter(([, o]) => o.apiVersion !== BETA).map(([key]) => key), [], 'no IoTService of the cluster is stored as v1alpha1');

    for (const name of Object.keys(instances)) {
      const iot = await waitForPhase(env, landscape, name, 'Available');
      assert.equal(iot.metadata.generation, generations[name], `${name}: the migration did not change its spec`);
    }
    const afterwards = await untouchedState();
    assert.deepEqual(afterwards.pods, before.pods, 'every pod of the untouched instances is the one from before the migration');
    assert.deepEqual(afterwards.generations, before.generations, 'no Deployment or StatefulSet rolled');

    // the operator started before the migration, never restarted, acts on a change made afterwards
    await env.client.patch(IoTServiceV1alpha1Type, 'plain', landscape, { spec: { gateway: { replicas: 3 } } }, 'merge');
    await waitForPhase(env, landscape, 'plain', 'Available');
    assert.equal((await workload(`${landscape}-plain`, 'Deployment', 'gateway')).spec.replicas, 3);
  });

  it('with the conversion webhook down, a v1alpha1 read fails with the API server’s conversion error and a v1beta1 read still works', async () => {
    const port = await closedPort();
    const served = await testConversion();
    const down = { ...served, webhook: { ...served.webhook, clientConfig: { ...served.webhook.clientConfig, url: `https://127.0.0.1:${port}/convert` } } };
    try {
      await patchCrd([{ op: 'replace', path: '/spec/conversion', value: down }]);
      const error = await waitFor('a v1alpha1 read to fail', async () => {
        const result = await env.client.get(IoTServiceV1alpha1Type, 'tolerant', landscape).then(() => undefined, (err: unknown) => err);
        return { done: result instanceof ApiError, value: result as ApiError, seen: result ?? 'read' };
      });
      assert.equal(error.code, 500);
      assert.match(error.message, new RegExp(`conversion webhook for ${BETA.replace(/[./]/g, '\\$&')}, Kind=IoTService failed: .*127\\.0\\.0\\.1:${port}.*connection refused`));
      const beta = await env.client.get<IoT>(IoTServiceType, 'tolerant', landscape);
      assert.deepEqual(component(beta, 'core').placement, { tolerations: [dedicated] });
      assert.equal(beta.status?.phase, 'Available');
    } finally {
      await serveIoTConversion(env);
    }
    const again = await waitFor('v1alpha1 reads to work again', async () => {
      const result = await env.client.get<IoT>(IoTServiceV1alpha1Type, 'tolerant', landscape).catch(() => undefined);
      return { done: !!result, value: result! };
    });
    assert.deepEqual(component(again, 'core').tolerations, [dedicated]);
  });
});
