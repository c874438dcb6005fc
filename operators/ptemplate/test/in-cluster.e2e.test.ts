/**
 * The ptemplate operator as seed 003 deploys it, in a real pod on the local cluster's real node:
 * `make docker-build` then `make deploy IMG=<image>` (config/default with kubectl's kustomize);
 * the pod, running as the Deployment's ServiceAccount with only config/ RBAC, serves the seed's
 * example.yaml (its DaemonSet stays on the kwok nodes), exits on SIGTERM within its grace period
 * releasing its Lease, and `make undeploy` removes it.
 *
 * How the pod is placed on the real node: after `make deploy`, a strategic merge patch adds the
 * node selector and toleration of `onRealNode` to the Deployment (what a kustomize patch in
 * config/ does in a user's cluster); the Deployment rolls its pod there.
 *
 * Pulling: the image is pushed to the cluster's private registry; before that patch the deployed
 * ServiceAccount gets a pull secret with the registry's credentials in its imagePullSecrets (what
 * a user does for a private registry), and the patch sets `imagePullPolicy: Always` (the tag is
 * the commit's version: a rebuild reuses it), so the kubelet resolves the tag in the registry with
 * that secret on every pod start. The pod's imageID is the registry's digest.
 * Reported as not run, with the reason, where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { deletePodAwaitingHandover, localTestEnv, onRealNode, operatorImage, realNode, REAL_NODE_NAME, registryImageId, registryPullSecret, repoRoot } from '@iot-operator/local-cluster';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const SYSTEM_NS = 'ptemplate-operator-system';
const DEPLOYMENT = 'ptemplate-operator-controller-manager';
const SERVICE_ACCOUNT = 'ptemplate-operator-controller-manager';

type Pod = KubeObject & { spec: { nodeName?: string }; status?: { conditions?: Array<{ type: string; status: string }>; containerStatuses?: Array<{ imageID: string }> } };

let kubectl = '';
let image = '';

async function make(target: string, ...vars: string[]): Promise<string> {
  return (await run('make', ['--no-print-directory', '-C', operatorDir, target, `KUBECTL=${kubectl}`, ...vars], { env: { ...process.env, KUBECONFIG: env.kubeconfigPath }, timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 })).stdout;
}

const isReady = (p: Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !p.metadata.deletionTimestamp;

async function podOnRealNode(): Promise<Pod> {
  return waitFor('a Ready operator pod on the real node, alone', async () => {
    const pods = ((await env.client.list(Kinds.Pod, { namespace: SYSTEM_NS, labelSelector: 'control-plane=controller-manager' })).items as Pod[]);
    const pod = pods.find((p) => p.spec.nodeName === REAL_NODE_NAME && isReady(p));
    return { done: pods.length === 1 && pod !== undefined, value: pod!, seen: pods.map((p) => ({ name: p.metadata.name, node: p.spec.nodeName, ready: isReady(p) })) };
  }, { timeoutMs: 120_000 });
}

before(async () => {
  if (skip) return;
  kubectl = path.join((await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
  await make('undeploy'); // a clean start even after an interrupted run
  image = await operatorImage('ptemplate');
});
after(async () => {
  if (kubectl) await make('undeploy').catch(() => undefined);
  await env.cleanup();
});

describe('the ptemplate operator in a real pod (make deploy)', { skip }, () => {
  test('make deploy IMG=<image>: the pod, pulled from the registry with the ServiceAccount’s pull secret, runs on the real node as that ServiceAccount and serves example.yaml', async () => {
    await make('install');
    await make('deploy', `IMG=${image}`);
    const pullSecret = await registryPullSecret(env, SYSTEM_NS);
    await env.client.patch(Kinds.ServiceAccount, SERVICE_ACCOUNT, SYSTEM_NS, { imagePullSecrets: [{ name: pullSecret }] }, 'strategic');
    await env.client.patch(Kinds.Deployment, DEPLOYMENT, SYSTEM_NS, { spec: { template: { spec: { ...onRealNode, containers: [{ name: 'manager', imagePullPolicy: 'Always' }] } } } }, 'strategic');
    const pod = await podOnRealNode();
    assert.equal(pod.status?.containerStatuses?.[0]?.imageID, await registryImageId(env, image));
    const ns = await env.namespace('pt-pod');
    await run(kubectl, ['--kubeconfig', env.kubeconfigPath, 'apply', '-n', ns, '-f', path.join(operatorDir, 'deploy/crds/pt_v1alpha1_ptemplate_cr.yml')]);
    const daemonSet = await waitFor('DaemonSet consumer-pod-consumer made by the operator in the pod', async () => {
      const d = await env.client.get(Kinds.DaemonSet, 'consumer-pod-consumer', ns).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
      return { done: d !== undefined, value: d as KubeObject & { spec: { template: { spec: { containers: Array<{ image: string }> } } } }, seen: 'not yet' };
    }, { timeoutMs: 90_000 });
    assert.equal(daemonSet.spec.template.spec.containers[0]!.image, 'quay.io/chrisp262/pt-device-plugin:consumer-latest');
  });

  test('SIGTERM: deleting the pod ends it within its grace period, releasing its Lease to the next pod', async () => {
    const pod = await podOnRealNode();
    const { goneSeconds, handoverSeconds } = await deletePodAwaitingHandover(env, { name: pod.metadata.name!, namespace: SYSTEM_NS }, SYSTEM_NS, 'ptemplate-operator-leader');
    console.log(`# ptemplate operator pod deleted: gone after ${goneSeconds.toFixed(1)} s, Lease held by the next pod after ${handoverSeconds.toFixed(1)} s`);
    assert.ok(goneSeconds < 40, `exited within its 45 s grace period (${goneSeconds} s)`);
    await podOnRealNode();
  });

  test('make undeploy removes the operator', async () => {
    await make('undeploy');
    await waitFor(`namespace ${SYSTEM_NS} gone`, async () => {
      const n = await env.client.get(Kinds.Namespace, SYSTEM_NS).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
      return { done: n === undefined, value: undefined };
    }, { timeoutMs: 120_000 });
    await make('uninstall');
  });
});
