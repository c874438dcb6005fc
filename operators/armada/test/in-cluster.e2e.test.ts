/**
 * The Armada operator as users run it: its image (Node.js, the bundled operator, the pinned helm
 * and git, the example charts at /opt/armada/helm-charts), installed with its Helm chart, in a real
 * pod on the local cluster's real node (in a namespace of its own, watching another) with a read-only root file system (helm's cache, config
 * and fetched charts in the /tmp emptyDir). helm inside the image installs, upgrades and
 * uninstalls a release; deleting the pod ends it within its grace period and releases its Lease.
 * Pulling: the image is pushed to the cluster's private registry and the chart's
 * `imagePullSecrets` names a Secret with the registry's credentials; `image.pullPolicy=Always`
 * (the tag is the commit's version: a rebuild reuses it) makes the kubelet resolve the tag in the
 * registry with it on every pod start. The pod's imageID is the registry's digest.
 * Reported as not run, with the reason, where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { deletePodAwaitingHandover, localTestEnv, onRealNode, operatorImage, realNode, REAL_NODE_NAME, registryImageId, registryPullSecret, repoRoot } from '@iot-operator/local-cluster';
import { ArmadaChart } from '../src/api/armada.ts';
import { helm, helmHistory, helmList, installArmadaCrds, waitForChartState } from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const chart = path.join(repoRoot, 'operators/armada/chart/armada-operator');

type Pod = KubeObject & { spec: { nodeName?: string }; status?: { conditions?: Array<{ type: string; status: string }>; containerStatuses?: Array<{ restartCount: number; imageID: string }> } };

let image = '';
let operatorNs = '';
let ns = '';
const isReady = (p: Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !p.metadata.deletionTimestamp;

async function operatorPod(): Promise<Pod> {
  return waitFor('a Ready armada-operator pod on the real node, alone', async () => {
    const pods = ((await env.client.list(Kinds.Pod, { namespace: operatorNs, labelSelector: 'app.kubernetes.io/name=armada-operator' })).items as Pod[]);
    const pod = pods.find((p) => p.spec.nodeName === REAL_NODE_NAME && isReady(p));
    return { done: pods.length === 1 && pod !== undefined, value: pod!, seen: pods.map((p) => ({ name: p.metadata.name, node: p.spec.nodeName, ready: isReady(p) })) };
  }, { timeoutMs: 120_000 });
}

/** The example chart inside the image (a relative location resolves from /opt/armada). */
function exampleChart(values: Record<string, unknown>): KubeObject & Record<string, unknown> {
  return {
    apiVersion: 'armada.airshipit.org/v1alpha1',
    kind: 'ArmadaChart',
    metadata: { name: 'blog-1', namespace: ns },
    spec: { chart_name: 'blog-1', release: 'blog-1', source: { type: 'local', location: 'helm-charts/testchart' }, values, dependencies: [], target_state: 'deployed', wait: { timeout: 120 } },
  };
}

before(async () => {
  if (skip) return;
  image = await operatorImage('armada');
  await installArmadaCrds(env);
  operatorNs = await env.namespace('armada-operator');
  ns = await env.namespace('armada-charts');
  const pullSecret = await registryPullSecret(env, operatorNs, 'image-pull-secret');
  const [repository, tag] = [image.slice(0, image.lastIndexOf(':')), image.slice(image.lastIndexOf(':') + 1)];
  await helm(env, 'install', 'armada-operator', chart, '-n', operatorNs, '--skip-crds', '--set', `image.repository=${repository}`, '--set', `image.tag=${tag}`, '--set', 'image.pullPolicy=Always',
    '--set-json', `imagePullSecrets=${JSON.stringify([{ name: pullSecret }])}`, '--set', `watchNamespace=${ns}`,
    '--set-json', `nodeSelector=${JSON.stringify(onRealNode.nodeSelector)}`, '--set-json', `tolerations=${JSON.stringify(onRealNode.tolerations)}`);
});
after(async () => {
  if (operatorNs) await helm(env, 'uninstall', 'armada-operator', '-n', operatorNs).catch(() => undefined);
  await env.cleanup();
});

describe('the Armada operator in a real pod', { skip }, () => {
  test('the pod runs the image the kubelet pulled from the registry with the chart’s imagePullSecrets', async () => {
    const pod = await operatorPod();
    assert.equal(pod.status?.containerStatuses?.[0]?.imageID, await registryImageId(env, image));
  });

  test('helm inside the image installs, upgrades and uninstalls a release, on a read-only root file system', async () => {
    await operatorPod();
    await env.client.create(ArmadaChart, exampleChart({ conf: { foo1: 'bar1' } }));
    await waitForChartState(env, ns, 'blog-1', 'deployed', 180_000);
    assert.deepEqual((await helmList(env, ns)).map((r) => [r.name, r.status, r.chart]), [['blog-1', 'deployed', 'testchart-0.1.0']]);

    await env.client.patch(ArmadaChart, 'blog-1', ns, { spec: { values: { conf: { foo1: 'changed' } } } });
    await waitFor('revision 2 of blog-1', async () => {
      const history = await helmHistory(env, ns, 'blog-1');
      return { done: history.some((h) => h.revision === 2 && h.status === 'deployed'), value: history, seen: history };
    }, { timeoutMs: 180_000 });

    await env.client.delete(ArmadaChart, 'blog-1', ns);
    await waitFor('release blog-1 uninstalled by the operator', async () => {
      const releases = await helmList(env, ns);
      return { done: releases.length === 0, value: releases, seen: releases };
    }, { timeoutMs: 120_000 });
    const [pod] = ((await env.client.list(Kinds.Pod, { namespace: operatorNs, labelSelector: 'app.kubernetes.io/name=armada-operator' })).items as Pod[]);
    assert.equal(pod!.status?.containerStatuses?.[0]?.restartCount, 0);
  });

  test('SIGTERM: deleting the pod ends it within its grace period, releasing its Lease to the next pod', async () => {
    const pod = await operatorPod();
    // The Lease lives in the watched namespace (POD_NAMESPACE's only when every namespace is watched).
    const { goneSeconds, handoverSeconds } = await deletePodAwaitingHandover(env, { name: pod.metadata.name!, namespace: operatorNs }, ns);
    console.log(`# armada operator pod deleted: gone after ${goneSeconds.toFixed(1)} s, Lease held by the next pod after ${handoverSeconds.toFixed(1)} s`);
    assert.ok(goneSeconds < 28, `exited within its 30 s grace period (${goneSeconds} s)`);
    await operatorPod();
  });
});
