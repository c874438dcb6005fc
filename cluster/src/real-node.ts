/**
 * End-to-end tests of operators running as images in real pods: the local cluster's real node
 * (lib/real-node.sh) and the operators' images built and loaded onto it.
 *
 * Guarantees:
 * - `realNode(env)` says whether the cluster has a Ready real node, and when it has none, why:
 *   the reason `cluster up` recorded (what this machine lacks), or that the cluster was started
 *   without one. Tests pass that reason to node:test's `skip`, so they are reported as not run,
 *   never silently passed; `scripts/run-tests.mjs` repeats it on the last lines of the run.
 * - `onRealNode` is the scheduling a pod needs to land there (node selector and toleration of the
 *   node's taint); charts and manifests take it through their usual values.
 * - `tagOnRealNode` gives an image loaded onto the real node another reference.
 * - `deletePodAwaitingHandover` deletes an operator's pod (SIGTERM) and measures when it is gone
 *   and when another pod holds its Lease.
 * - `podPeakMemoryBytes(uid)` reads a real pod's memory high-water mark from its cgroup.
 * - `operatorImage(name)` builds `operators/<name>/Dockerfile` with `npm run image:build` once per
 *   test process and returns its reference: with a real node, in the cluster's private registry
 *   (pushed there, nothing loaded onto the node): a pod pulls it with a pull secret.
 *   `pushUnderTag` pushes such an image under another reference (the tags a CSV names);
 *   `registryImageId(env, image)` is the imageID a container reports when the kubelet pulled that
 *   reference from the registry (`<repository>@<digest the registry serves>`).
 * - `localRegistry(env)` reads where the cluster's registry is and its credentials (registry.ts
 *   `registryAccess` of the cluster's workdir, with its user and password); `registryPullSecret` makes a
 *   `kubernetes.io/dockerconfigjson` Secret of them in a namespace; `pushTestImage` pushes a
 *   busybox image holding a file of the caller's content there (a new digest per content).
 * - `engineImage(env, engine, name)` is an image of one binary engines/build.sh builds (Prometheus,
 *   SeaweedFS), loaded into the real node's containerd once; `readyPodIP` waits for a test pod.
 * - `busyboxImage(env)` is a small image made here from Debian's busybox-static, every applet
 *   installed (sh, wget, nc, nslookup, httpd, ...), loaded into the real node's containerd once:
 *   what test pods run to listen, dial and resolve.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { registryAccess, servedDigest, type RegistryAccess } from './registry.ts';
import { clusterDir, repoRoot } from './up.ts';

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

/** Builds operators/<operator>/Dockerfile, pushed to the cluster's registry when it has one (once per process); its reference. */
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

/** The cluster's registry as registry.ts reaches it, with its user and password. */
export interface LocalRegistry extends RegistryAccess {
  user: string;
  password: string;
}

const REGISTRY_USER = 'iot-operator';

function registryFiles(workdir: string): LocalRegistry {
  return { ...registryAccess(workdir), user: REGISTRY_USER, password: readFileSync(path.join(workdir, 'registry/auth/password'), 'utf8').trim() };
}

/** The local cluster's registry and its current credentials (read anew at each call: the password can be rotated). */
export function localRegistry(env: Pick<TestEnv, 'kubeconfigPath'>): LocalRegistry {
  return registryFiles(path.dirname(env.kubeconfigPath));
}

/** The `.dockerconfigjson` of a pull secret for `address` (what `kubectl create secret docker-registry` writes). */
export function dockerConfigJson(address: string, user: string, password: string): string {
  return JSON.stringify({ auths: { [address]: { username: user, password, auth: Buffer.from(`${user}:${password}`).toString('base64') } } });
}

/**
 * Creates (or updates) a `kubernetes.io/dockerconfigjson` Secret in `namespace` holding the
 * registry's credentials — or `password` instead of the current one; returns its name.
 */
export async function registryPullSecret(env: Pick<TestEnv, 'client' | 'kubeconfigPath'>, namespace: string, name = 'registry-pull-secret', password?: string): Promise<string> {
  const registry = localRegistry(env);
  const secret = {
    metadata: { name, namespace },
    type: 'kubernetes.io/dockerconfigjson',
    data: { '.dockerconfigjson': Buffer.from(dockerConfigJson(registry.address, registry.user, password ?? registry.password)).toString('base64') },
  };
  const existing = await env.client.get(Kinds.Secret, name, namespace).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
  if (existing) await env.client.replace(Kinds.Secret, { ...secret, metadata: { ...secret.metadata, resourceVersion: existing.metadata.resourceVersion } });
  else await env.client.create(Kinds.Secret, secret);
  return name;
}

/**
 * Pushes `<registry>/<repository>` (e.g. `iot-operator-test/app:1`): busybox-static with every
 * applet under /bin and a file /content holding `content`, so each content has its own digest.
 * Returns the reference and the pushed manifest's digest.
 */
export async function pushTestImage(env: TestEnv, repository: string, content: string): Promise<{ image: string; digest: string }> {
  if (!existsSync('/bin/busybox')) throw new Error('/bin/busybox is missing: install Debian package busybox-static (.ci/run does)');
  const registry = localRegistry(env);
  const image = `${registry.address}/${repository}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'test-image-'));
  try {
    writeFileSync(path.join(dir, 'content'), content);
    const container = (await run('buildah', ['from', 'scratch'])).stdout.trim();
    await run('buildah', ['copy', container, '/bin/busybox', '/bin/busybox']);
    await run('buildah', ['run', '--isolation', 'chroot', container, '/bin/busybox', '--install', '-s', '/bin']);
    await run('buildah', ['copy', container, path.join(dir, 'content'), '/content']);
    await run('buildah', ['commit', '-q', '--rm', container, image]);
    await run('buildah', ['push', '-q', '--authfile', registry.authFile, '--cert-dir', registry.certDir, '--digestfile', path.join(dir, 'digest'), image, `docker://${image}`]);
    await run('buildah', ['rmi', image]);
    return { image, digest: readFileSync(path.join(dir, 'digest'), 'utf8').trim() };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Pushes `image` (built here, as `operatorImage` builds) to the cluster's registry under the reference `target` too. */
export async function pushUnderTag(env: TestEnv, image: string, target: string): Promise<void> {
  const registry = localRegistry(env);
  if (!target.startsWith(`${registry.address}/`)) throw new Error(`${target} is not in the cluster's registry ${registry.address}`);
  await run('buildah', ['push', '-q', '--authfile', registry.authFile, '--cert-dir', registry.certDir, image, `docker://${target}`], { maxBuffer: 16 * 1024 * 1024 });
}

/**
 * What a container's `status.imageID` says when the kubelet pulled `image` (a tag in the cluster's
 * registry) from the registry: `<registry>/<repository>@<digest>`, the digest the registry serves
 * for the tag now (registry.ts `servedDigest`). An image imported into containerd instead reports
 * its config's `sha256:` ID.
 */
export async function registryImageId(env: TestEnv, image: string): Promise<string> {
  const digest = await servedDigest(localRegistry(env), image);
  return `${image.slice(0, image.lastIndexOf(':'))}@${digest}`;
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
  if (await realNodeHasImage(env, BUSYBOX_IMAGE)) return BUSYBOX_IMAGE;
  if (!existsSync('/bin/busybox')) throw new Error('/bin/busybox is missing: install Debian package busybox-static (.ci/run does)');
  await importScratchImage(env, BUSYBOX_IMAGE, async (container) => {
    await run('buildah', ['copy', container, '/bin/busybox', '/bin/busybox']);
    await run('buildah', ['run', '--isolation', 'chroot', container, '/bin/busybox', '--install', '-s', '/bin']);
  });
  return BUSYBOX_IMAGE;
}

/** Whether the real node's containerd holds an image under this reference. */
export async function realNodeHasImage(env: TestEnv, reference: string): Promise<boolean> {
  return (await run('ctr', ['--address', realNodeContainerd(env), '-n', 'k8s.io', 'images', 'ls', '-q'])).stdout.split('\n').includes(reference);
}

/**
 * Builds an image from scratch with buildah (`build` fills the working container: copy, run,
 * config), commits it as `reference` and imports it into the real node's containerd under that
 * name, replacing an image of that name. An import that containerd fails with a missing blob is
 * built and imported again, up to three times in all.
 */
export async function importScratchImage(env: TestEnv, reference: string, build: (container: string) => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await buildAndImport(env, reference, build);
    } catch (err) {
      // containerd 1.6's import now and then reports a blob of the archive as missing while it
      // writes it (`ctr: content digest sha256:…: not found`); a fresh build and import succeeds.
      if (attempt === 3 || !(err instanceof Error && /content digest sha256:[0-9a-f]+: not found/.test(err.message))) throw err;
      console.log(`# importing ${reference} into the real node's containerd failed (${err.message.trim().split('\n').at(-1)}); building it again`);
    }
  }
}

async function buildAndImport(env: TestEnv, reference: string, build: (container: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'real-node-image-'));
  try {
    const container = (await run('buildah', ['from', 'scratch'])).stdout.trim();
    await build(container);
    await run('buildah', ['commit', '-q', '--rm', container, reference]);
    await run('buildah', ['push', '-q', reference, `oci-archive:${dir}/image.tar:${reference}`]);
    await run('ctr', ['--address', realNodeContainerd(env), '-n', 'k8s.io', 'images', 'import', '--index-name', reference, `${dir}/image.tar`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const engineImages = new Map<string, Promise<string>>();

/**
 * The image of the binary `engines/build.sh <engine>` builds, alone at `/bin/<name>` and run as
 * uid 65534, loaded into the real node's containerd once per test process (and kept there: its
 * tag names the build); its reference, `localhost/iot-operator/<engine>:<build>`.
 */
export function engineImage(env: TestEnv, engine: string, name: string): Promise<string> {
  let image = engineImages.get(engine);
  if (!image) {
    image = loadEngineImage(env, engine, name).catch((e: unknown) => {
      engineImages.delete(engine);
      throw e;
    });
    engineImages.set(engine, image);
  }
  return image;
}

async function loadEngineImage(env: TestEnv, engine: string, name: string): Promise<string> {
  const built = await run('bash', [path.join(clusterDir, 'engines', 'build.sh'), engine], { maxBuffer: 16 * 1024 * 1024, timeout: 40 * 60 * 1000 });
  const binary = built.stdout.trim().split('\n').at(-1)!;
  const reference = `localhost/iot-operator/${engine}:${path.basename(path.dirname(binary)).replace(`${engine}-`, '')}`;
  if (await realNodeHasImage(env, reference)) return reference;
  await importScratchImage(env, reference, async (container) => {
    await run('buildah', ['copy', container, binary, `/bin/${name}`]);
    await run('buildah', ['config', '--user', '65534:65534', '--entrypoint', `["/bin/${name}"]`, container]);
  });
  return reference;
}

/** Waits until pod `name` of `namespace` is Ready with an address (what `what` names in the error); its IP. */
export function readyPodIP(env: TestEnv, namespace: string, name: string, what: string, timeoutMs = 120_000): Promise<string> {
  type PodStatus = KubeObject & { status?: { podIP?: string; conditions?: Array<{ type: string; status: string }>; containerStatuses?: unknown } };
  return waitFor(`${what}'s pod in ${namespace} to be Ready`, async () => {
    const pod = (await env.client.get(Kinds.Pod, name, namespace)) as PodStatus;
    const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
    return { done: ready && !!pod.status?.podIP, value: pod.status?.podIP ?? '', seen: pod.status?.containerStatuses ?? pod.status };
  }, { timeoutMs, intervalMs: 500 });
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
