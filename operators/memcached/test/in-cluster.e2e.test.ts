/**
 * The memcached operator as seed 002 deploys it, in a real pod on the local cluster's real node:
 * its image (operators/memcached/Dockerfile, built and pushed to the cluster's private registry by
 * `npm run image:build`), the seed's manifests (ServiceAccount, Role, RoleBinding, operator.yaml
 * with REPLACE_IMAGE replaced, `imagePullPolicy: Always` as written), then the OLM lifecycle with
 * the CSV's Deployment really running: 0.0.1, then 0.0.2 replacing its pod while the Memcached
 * objects keep working. The memcached Deployments it creates stay on the kwok nodes.
 *
 * Pulling: the ServiceAccount gets the registry's pull secret in its imagePullSecrets (what a user
 * does for a private registry), and each operator pod's container reports the imageID of the
 * registry's digest: the kubelet pulled it with that secret. The CSVs name the image in the
 * cluster's registry (`<registry>/iot-operator/memcached-operator:v0.0.1` and `:v0.0.2`, the same
 * image pushed under both tags) instead of registry.example.com, as a bundle built for a user's
 * registry does.
 *
 * Placement: the seed's operator.yaml (and the CSV's Deployment) get the node selector and
 * toleration of `onRealNode` — what a kustomize patch, or a Subscription's `config` with OLM's
 * catalog operator, adds in a user's cluster.
 * Reported as not run, with the reason, where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { customResource, isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { deletePodAwaitingHandover, localRegistry, localTestEnv, onRealNode, operatorImage, pushUnderTag, realNode, REAL_NODE_NAME, registryImageId, registryPullSecret } from '@iot-operator/local-cluster';

process.env.CLUSTER_OLM = '1'; // cluster up (run by localTestEnv) starts OLM unless it runs
const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const manifest = (file: string) => parse(readFileSync(path.join(operatorDir, file), 'utf8')) as KubeObject & Record<string, any>;

const Memcached = customResource('cache.example.com', 'v1alpha1', 'Memcached', 'memcacheds');
const ClusterServiceVersion = customResource('operators.coreos.com', 'v1alpha1', 'ClusterServiceVersion', 'clusterserviceversions');
const OperatorGroup = customResource('operators.coreos.com', 'v1', 'OperatorGroup', 'operatorgroups');

type Pod = KubeObject & { spec: { nodeName?: string; containers: Array<{ image: string; imagePullPolicy?: string }> }; status?: { conditions?: Array<{ type: string; status: string }>; containerStatuses?: Array<{ restartCount: number; imageID: string }> } };
type MemcachedObject = KubeObject & { spec: { size: number }; status?: { nodes?: string[] } };

/** Puts a pod template on the real node. */
function placeOnRealNode(podSpec: Record<string, any>): void {
  podSpec.nodeSelector = onRealNode.nodeSelector;
  podSpec.tolerations = onRealNode.tolerations;
}

/** The pod runs `image` as the manifests say (pulled Always), pulled by the kubelet from the cluster's registry. */
async function assertPulledFromRegistry(pod: Pod, image: string): Promise<void> {
  assert.equal(pod.spec.containers[0]!.image, image);
  assert.equal(pod.spec.containers[0]!.imagePullPolicy, 'Always');
  assert.equal(pod.status?.containerStatuses?.[0]?.imageID, await registryImageId(env, image));
}

const isReady = (p: Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !p.metadata.deletionTimestamp;

async function operatorPods(namespace: string): Promise<Pod[]> {
  return ((await env.client.list(Kinds.Pod, { namespace, labelSelector: 'app.kubernetes.io/name=memcached-operator' })).items as Pod[]).filter((p) => !p.metadata.deletionTimestamp);
}

async function readyOperatorPod(namespace: string, image?: string): Promise<Pod> {
  return waitFor(`a Ready memcached-operator pod on the real node${image ? ` running ${image}` : ''}`, async () => {
    const pods = await operatorPods(namespace);
    const pod = pods.find((p) => isReady(p) && (!image || p.spec.containers[0]!.image === image));
    return { done: pods.length === 1 && pod !== undefined, value: pod!, seen: pods.map((p) => ({ name: p.metadata.name, node: p.spec.nodeName, image: p.spec.containers[0]!.image, ready: isReady(p) })) };
  }, { timeoutMs: 120_000 });
}

/** A Memcached reconciled by the operator in the pod: its Deployment has `size` ready replicas and status.nodes names them. */
async function memcachedServed(namespace: string, name: string, size: number): Promise<MemcachedObject> {
  return waitFor(`Memcached ${name} served with ${size} pods`, async () => {
    const m = (await env.client.get(Memcached, name, namespace)) as MemcachedObject;
    const d = await env.client.get(Kinds.Deployment, name, namespace).catch(() => undefined) as (KubeObject & { status?: { readyReplicas?: number } }) | undefined;
    return { done: d?.status?.readyReplicas === size && m.status?.nodes?.length === size, value: m, seen: { ready: d?.status?.readyReplicas, nodes: m.status?.nodes } };
  }, { timeoutMs: 90_000 });
}

/** The seed's ServiceAccount, Role and RoleBinding; the ServiceAccount pulls with the registry's pull secret. */
async function applyRbac(namespace: string): Promise<void> {
  const pullSecret = await registryPullSecret(env, namespace);
  for (const file of ['service_account.yaml', 'role.yaml', 'role_binding.yaml']) {
    const object = manifest(path.join('deploy', file));
    object.metadata.namespace = namespace;
    for (const subject of object['subjects'] ?? []) subject.namespace = namespace;
    if (object.kind === 'ServiceAccount') object['imagePullSecrets'] = [{ name: pullSecret }];
    await env.client.create(typeOf(object.kind!), object);
  }
}

function typeOf(kind: string) {
  const types: Record<string, (typeof Kinds)[keyof typeof Kinds]> = { ServiceAccount: Kinds.ServiceAccount, Role: Kinds.Role, RoleBinding: Kinds.RoleBinding, Deployment: Kinds.Deployment };
  return types[kind]!;
}

let image = '';
before(async () => {
  if (skip) return;
  image = await operatorImage('memcached');
  await run('bash', ['-c', `"$(bash cluster/engines/build.sh control-plane | tail -n 1)/kubectl" --kubeconfig "$KUBECONFIG" apply --server-side -f operators/memcached/deploy/crds/cache_v1alpha1_memcached_crd.yaml`], {
    cwd: path.resolve(operatorDir, '../..'),
    env: { ...process.env, KUBECONFIG: env.kubeconfigPath },
  });
});
after(() => env.cleanup());

describe('the memcached operator in a real pod', { skip }, () => {
  let ns = '';

  test('seed deploy path: ServiceAccount, Role, RoleBinding, operator.yaml with the image; the pod reconciles a Memcached', async () => {
    ns = await env.namespace('memcached-pod');
    await applyRbac(ns);
    const deployment = parse(readFileSync(path.join(operatorDir, 'deploy/operator.yaml'), 'utf8').replaceAll('REPLACE_IMAGE', image)) as KubeObject & { spec: { template: { spec: Record<string, any> } } };
    deployment.metadata.namespace = ns;
    placeOnRealNode(deployment.spec.template.spec);
    await env.client.create(Kinds.Deployment, deployment);
    const pod = await readyOperatorPod(ns);
    assert.equal(pod.spec.nodeName, REAL_NODE_NAME);
    await assertPulledFromRegistry(pod, image);
    await env.client.create(Memcached, { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name: 'example-memcached', namespace: ns }, spec: { size: 3 } });
    const served = await memcachedServed(ns, 'example-memcached', 3);
    assert.equal(served.status?.nodes?.length, 3);
    await env.client.patch(Memcached, 'example-memcached', ns, { spec: { size: 4 } });
    await memcachedServed(ns, 'example-memcached', 4);
  });

  test('SIGTERM: deleting the operator pod ends it within its grace period and releases its Lease', async () => {
    const [pod] = await operatorPods(ns);
    const { goneSeconds, handoverSeconds } = await deletePodAwaitingHandover(env, { name: pod!.metadata.name!, namespace: ns }, ns);
    console.log(`# memcached operator pod deleted: gone after ${goneSeconds.toFixed(1)} s, Lease held by the next pod after ${handoverSeconds.toFixed(1)} s`);
    assert.ok(goneSeconds < 40, `exited within its 45 s grace period, not killed at its end (${goneSeconds} s)`);
    await readyOperatorPod(ns);
    await env.client.patch(Memcached, 'example-memcached', ns, { spec: { size: 2 } });
    await memcachedServed(ns, 'example-memcached', 2);
  });

  test('OLM: CSV 0.0.1 runs the operator on the real node, 0.0.2 replaces its pod, the Memcached keeps working', async () => {
    const olmNs = await env.namespace('memcached-olm');
    const bundleImage = (version: string) => `${localRegistry(env).address}/iot-operator/memcached-operator:v${version}`;
    for (const version of ['0.0.1', '0.0.2']) await pushUnderTag(env, image, bundleImage(version));
    await env.client.create(OperatorGroup, { metadata: { name: 'memcached-operator-group', namespace: olmNs }, spec: { targetNamespaces: [olmNs] } });
    await applyRbac(olmNs);
    const csv = (version: string) => {
      const object = manifest(`bundle/${version}/manifests/memcachedoperator.clusterserviceversion.yaml`);
      object.metadata = { name: `memcachedoperator.v${version}`, namespace: olmNs };
      const podSpec = object['spec'].install.spec.deployments[0].spec.template.spec;
      assert.equal(podSpec.containers[0].image, `registry.example.com/memcached-operator:v${version}`);
      podSpec.containers[0].image = bundleImage(version);
      placeOnRealNode(podSpec);
      return object;
    };
    await env.client.create(ClusterServiceVersion, csv('0.0.1'));
    const first = await readyOperatorPod(olmNs, bundleImage('0.0.1'));
    assert.equal(first.spec.nodeName, REAL_NODE_NAME);
    await assertPulledFromRegistry(first, bundleImage('0.0.1'));
    await env.client.create(Memcached, { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name: 'memcached-for-wordpress', namespace: olmNs }, spec: { size: 3 } });
    const before = await memcachedServed(olmNs, 'memcached-for-wordpress', 3);
    const deploymentUid = (await env.client.get(Kinds.Deployment, 'memcached-for-wordpress', olmNs)).metadata.uid;

    await env.client.create(ClusterServiceVersion, csv('0.0.2'));
    const second = await readyOperatorPod(olmNs, bundleImage('0.0.2'));
    assert.notEqual(second.metadata.name, first.metadata.name);
    assert.equal(second.spec.nodeName, REAL_NODE_NAME);
    await assertPulledFromRegistry(second, bundleImage('0.0.2'));
    await waitFor('CSV 0.0.1 to be replaced', async () => {
      const old = await env.client.get(ClusterServiceVersion, 'memcachedoperator.v0.0.1', olmNs).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
      return { done: old === undefined, value: undefined, seen: (old as { status?: { phase?: string } } | undefined)?.status?.phase };
    }, { timeoutMs: 120_000 });
    await env.client.patch(Memcached, 'memcached-for-wordpress', olmNs, { spec: { size: 4 } });
    const after = await memcachedServed(olmNs, 'memcached-for-wordpress', 4);
    assert.equal(after.metadata.uid, before.metadata.uid);
    assert.equal((await env.client.get(Kinds.Deployment, 'memcached-for-wordpress', olmNs)).metadata.uid, deploymentUid);
  });
});
