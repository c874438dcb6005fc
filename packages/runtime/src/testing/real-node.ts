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
 * - `deletePodAwaitingHandover` deletes an operator's pod (SIGTERM) and measures when it is gone
 *   and when another pod holds its Lease.
 * - `podPeakMemoryBytes(uid)` reads a real pod's memory high-water mark from its cgroup.
 * - `operatorImage(name)` builds `operators/<name>/Dockerfile` with `npm run image:build` (which
 *   loads it into the real node's containerd) once per test process and returns its reference.
 * - `busyboxImage(env)` is a small image made here from Debian's busybox-static, every applet
 *   installed (sh, wget, nc, nslookup, httpd, ...), loaded into the real node's containerd once:
 *   what test pods run to listen, dial and resolve.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { isNotFound } from '../client/errors.ts';
import { Kinds, type KubeObject } from '../client/resource.ts';
import { repoRoot, waitFor, type TestEnv } from './env.ts';

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

/** The socket of the real node's containerd (namespace k8s.io holds the kubelet's images). */
export function realNodeContainerd(env: TestEnv): string {
  return path.join(path.dirname(env.kubeconfigPath), 'real-node/containerd/containerd.sock');
}

export const BUSYBOX_IMAGE = 'localhost/iot-operator-test/busybox:2';
let busybox: Promise<string> | undefined;

/** The test image of busybox-static (every applet under /bin), loaded into the real node's containerd; its reference. */
export function busyboxImage(env: TestEnv): Promise<string> {
  busybox ??= loadBusybox(env).catch((e: unknown) => {
    busybox = undefined;
    throw e;
  });
  return busybox;
}

async function loadBusybox(env: TestEnv): Promise<string> {
  const ctr = ['--address', realNodeContainerd(env), '-n', 'k8s.io'];
  if ((await run('ctr', [...ctr, 'images', 'ls', '-q'])).stdout.split('\n').includes(BUSYBOX_IMAGE)) return BUSYBOX_IMAGE;
  if (!existsSync('/bin/busybox')) throw new Error('/bin/busybox is missing: install Debian package busybox-static (.ci/run does)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'busybox-image-'));
  try {
    const container = (await run('buildah', ['from', 'scratch'])).stdout.trim();
    await run('buildah', ['copy', container, '/bin/busybox', '/bin/busybox']);
    await run('buildah', ['run', '--isolation', 'chroot', container, '/bin/busybox', '--install', '-s', '/bin']);
    await run('buildah', ['commit', '-q', '--rm', container, BUSYBOX_IMAGE]);
    await run('buildah', ['push', '-q', BUSYBOX_IMAGE, `oci-archive:${dir}/image.tar:${BUSYBOX_IMAGE}`]);
    await run('ctr', [...ctr, 'images', 'import', '--index-name', BUSYBOX_IMAGE, `${dir}/image.tar`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return BUSYBOX_IMAGE;
}

/** Gives an image loaded onto the real node a second reference (as a registry would serve it under another tag). */
export async function tagOnRealNode(env: TestEnv, source: string, target: string): Promise<void> {
  await run('ctr', ['--address', realNodeContainerd(env), '-n', 'k8s.io', 'images', 'tag', '--force', source, target]);
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

export interface Handover {
  /** Seconds from the delete request until the pod object is gone (its containers exited). */
  goneSeconds: number;
  /** Seconds from the delete request until another holder has the Lease the pod held. */
  handoverSeconds: number;
  newHolder: string;
}

/**
 * Deletes an operator's pod — the kubelet sends its containers SIGTERM — and measures when it is
 * gone and when another pod holds the Lease it held (named, or found in `leaseNamespace` by its
 * holder). Fails when either takes longer than `timeoutMs`.
 */
export async function deletePodAwaitingHandover(env: TestEnv, pod: { name: string; namespace: string }, leaseNamespace: string, leaseName?: string, timeoutMs = 60_000): Promise<Handover> {
  type Lease = KubeObject & { spec: { holderIdentity?: string } };
  const heldByPod = (l: Lease) => l.spec.holderIdentity?.startsWith(pod.name) === true;
  const leases = leaseName ? [(await env.client.get(Kinds.Lease, leaseName, leaseNamespace)) as Lease] : ((await env.client.list(Kinds.Lease, { namespace: leaseNamespace })).items as Lease[]);
  const lease = leases.find(heldByPod);
  if (!lease) throw new Error(`no Lease in ${leaseNamespace} is held by pod ${pod.name}: ${JSON.stringify(leases.map((l) => [l.metadata.name, l.spec.holderIdentity]))}`);
  const deleted = Date.now();
  await env.client.delete(Kinds.Pod, pod.name, pod.namespace);
  const seconds = () => (Date.now() - deleted) / 1000;
  const [goneSeconds, handover] = await Promise.all([
    waitFor(`pod ${pod.name} to be gone`, async () => {
      const p = await env.client.get(Kinds.Pod, pod.name, pod.namespace).then((o) => o, (e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
      return { done: p === undefined, value: seconds(), seen: p?.metadata.deletionTimestamp };
    }, { timeoutMs, intervalMs: 100 }),
    waitFor(`another holder of Lease ${lease.metadata.name}`, async () => {
      const l = (await env.client.get(Kinds.Lease, lease.metadata.name!, leaseNamespace)) as Lease;
      const holder = l.spec.holderIdentity ?? '';
      return { done: holder !== '' && !heldByPod(l), value: { handoverSeconds: seconds(), newHolder: holder }, seen: l.spec };
    }, { timeoutMs, intervalMs: 100 }),
  ]);
  return { goneSeconds, ...handover };
}
