/**
 * End-to-end tests of operators running as images in real pods: the local cluster's real node
 * (cluster/lib/real-node.sh) and the operators' images built and loaded onto it.
 *
 * Guarantees:
 * - `realNode(env)` says whether the cluster has a Ready real node, and when it has none, why:
 *   the reason `cluster/up.sh` recorded (what this machine lacks), or that the cluster was started
 *   without one. Tests pass that reason to node:test's `skip`, so they are reported as not run,
 *   never silently passed; `scripts/run-tests.mjs` repeats it on the last lines of the run.
 * - `onRealNode` is the scheduling a pod needs to land there (node selector and toleration of the
 *   node's taint); charts and manifests take it through their usual values.
 * - `tagOnRealNode` gives such an image another reference (the tags a CSV or a manifest names).
 * - `podPeakMemoryBytes(uid)` reads a real pod's memory high-water mark from its cgroup.
 * - `operatorImage(name)` builds `operators/<name>/Dockerfile` with `npm run image:build` (which
 *   loads it into the real node's containerd) once per test process and returns its reference.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Kinds, type KubeObject } from '../client/resource.ts';
import { repoRoot, type TestEnv } from './env.ts';

const run = promisify(execFile);

export const REAL_NODE_NAME = 'real-node-0';
export const REAL_NODE_LABEL = 'node.iot-operator.dev/real';

/** Node selector and toleration that put a pod on the real node. */
export const onRealNode = {
  nodeSelector: { [REAL_NODE_LABEL]: 'true' },
  tolerations: [{ key: REAL_NODE_LABEL, operator: 'Equal', value: 'true', effect: 'NoSchedule' }],
};

export type RealNode = { available: true; name: string } | { available: false; reason: string };

interface NodeStatus {
  status?: { conditions?: Array<{ type: string; status: string }> };
}

/** Whether the test cluster has a Ready real node, or why not. */
export async function realNode(env: TestEnv): Promise<RealNode> {
  const node = (await env.client.get(Kinds.Node, REAL_NODE_NAME).catch(() => undefined)) as (KubeObject & NodeStatus) | undefined;
  const ready = node?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  if (ready) return { available: true, name: REAL_NODE_NAME };
  const clusterDir = path.dirname(env.kubeconfigPath);
  let recorded = '';
  try {
    recorded = readFileSync(path.join(clusterDir, 'real-node-unavailable'), 'utf8').trim();
  } catch {
    // nothing recorded: the cluster was started without a real node, or it is not Ready
  }
  if (recorded) return { available: false, reason: `no real node on this machine: ${recorded}` };
  return {
    available: false,
    reason: node
      ? `real node ${REAL_NODE_NAME} is not Ready (logs: ${path.join(clusterDir, 'real-node/logs')})`
      : 'the test cluster has no real node (start it with `npm run cluster:up -- --real-node`, or run `npm test`)',
  };
}

const images = new Map<string, Promise<string>>();

/** Builds operators/<operator>/Dockerfile and loads it onto the real node (once per process); its reference. */
export function operatorImage(operator: string): Promise<string> {
  let image = images.get(operator);
  if (!image) {
    image = run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'scripts/image.ts'), 'build', operator], {
      cwd: repoRoot,
      maxBuffer: 64 * 1024 * 1024,
      timeout: 30 * 60 * 1000,
    }).then(({ stdout }) => stdout.trim().split('\n').at(-1)!);
    images.set(operator, image);
  }
  return image;
}

/** Gives an image loaded onto the real node a second reference (as a registry would serve it under another tag). */
export async function tagOnRealNode(env: TestEnv, source: string, target: string): Promise<void> {
  const socket = path.join(path.dirname(env.kubeconfigPath), 'real-node/containerd/containerd.sock');
  await run('ctr', ['--address', socket, '-n', 'k8s.io', 'images', 'tag', '--force', source, target]);
}

/** The most memory a pod of the real node has used (its cgroup's high-water mark, cgroup v1), in bytes. */
export function podPeakMemoryBytes(podUid: string): number {
  const kubepods = '/sys/fs/cgroup/memory/iot-operator-real-node/kubepods';
  for (const qos of ['', 'burstable', 'besteffort']) {
    try {
      return Number(readFileSync(path.join(kubepods, qos, `pod${podUid}`, 'memory.max_usage_in_bytes'), 'utf8').trim());
    } catch {
      // not in this QoS class
    }
  }
  throw new Error(`no memory cgroup for pod ${podUid} under ${kubepods}`);
}
