/**
 * The IoT operator's chart as users install it, for end-to-end tests on the real node: a landscape
 * namespace enforcing the Pod Security Standard `restricted` whose image-pull-secret holds the
 * cluster registry's credentials, a release name of its own, helm run against the test cluster,
 * and values that pull the operator's image (built and pushed for this commit) with
 * `pullPolicy=Always` onto the real node. The release's pods are found by the chart's labels.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { onRealNode, operatorImage, registryPullSecret, repoRoot } from '@iot-operator/local-cluster';
import { installIoTCrd } from '../testing/conversion-server.ts';

const run = promisify(execFile);

export const chart = path.join(repoRoot, 'operators/iot/chart/iot-operator');

/** A pod as these tests read it. */
export type Pod = KubeObject & {
  spec: { nodeName?: string; containers?: Array<{ lifecycle?: { preStop?: { sleep?: { seconds: number } } } }> };
  status?: { phase?: string; conditions?: Array<{ type: string; status: string }>; containerStatuses?: Array<{ restartCount: number; imageID: string; lastState?: { terminated?: { reason?: string } } }> };
};

/** How long the pod's container pauses (preStop) before it is sent SIGTERM, in seconds. */
export const preStopPauseSeconds = (p: Pod): number => p.spec.containers?.[0]?.lifecycle?.preStop?.sleep?.seconds ?? 0;

/** Ready, and not on its way out. */
export const isReady = (p: Pod): boolean =>
  p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !p.metadata.deletionTimestamp;

export interface ChartRelease {
  landscape: string;
  release: string;
  /** The operator image the values install (`<repository>:<tag>` in the cluster registry). */
  imageRef: string;
  /** Runs helm against the test cluster; its stdout. */
  helm(...args: string[]): Promise<string>;
  /** The values that install this commit's operator image on the real node, one replica (tests count the release's pods), then `extra`. */
  values(extra?: string[]): string[];
  /** The release's operator pods, terminating ones included. */
  operatorPods(): Promise<Pod[]>;
  /** Waits until the release has exactly `count` pods, all Ready; those pods. */
  waitForReadyPods(count: number, timeoutMs?: number): Promise<Pod[]>;
}

/** A landscape (`<prefix>-…`) prepared for `helm install <release> <chart>`; nothing installed yet. */
export async function prepareChartRelease(env: TestEnv, prefix: string): Promise<ChartRelease> {
  await installIoTCrd(env); // converted by this test process: the release leaves a CRD naming a URL alone
  const helmBinary = (await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
  const imageRef = await operatorImage('iot');
  const landscape = await env.namespace(prefix, { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' });
  await registryPullSecret(env, landscape, 'image-pull-secret');
  const release = `iot-${landscape.slice(-6)}`;
  const operatorPods = async () =>
    (await env.client.list(Kinds.Pod, { namespace: landscape, labelSelector: `app.kubernetes.io/name=iot-operator,app.kubernetes.io/instance=${release}` })).items as Pod[];
  const at = imageRef.lastIndexOf(':');
  return {
    landscape,
    release,
    imageRef,
    helm: async (...args) => (await run(helmBinary, ['--kubeconfig', env.kubeconfigPath, ...args], { maxBuffer: 16 * 1024 * 1024, timeout: 300_000 })).stdout,
    values: (extra = []) => [
      '--set', `image.repository=${imageRef.slice(0, at)}`, '--set', `image.tag=${imageRef.slice(at + 1)}`, '--set', 'image.pullPolicy=Always',
      '--set-json', `nodeSelector=${JSON.stringify(onRealNode.nodeSelector)}`,
      '--set-json', `tolerations=${JSON.stringify(onRealNode.tolerations)}`,
      '--set', 'replicas=1',
      ...extra,
    ],
    operatorPods,
    waitForReadyPods: (count, timeoutMs = 120_000) =>
      waitFor(`${count} Ready operator pod(s) on the real node`, async () => {
        const pods = await operatorPods();
        const ready = pods.filter(isReady);
        return { done: ready.length === count && pods.length === count, value: ready, seen: pods.map((p) => ({ name: p.metadata.name, node: p.spec.nodeName, phase: p.status?.phase, ready: isReady(p) })) };
      }, { timeoutMs }),
  };
}
