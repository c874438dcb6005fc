/**
 * The benchmark's side of the cluster: the separate bench cluster, landscapes, object watches,
 * API server metrics and clean-up.
 *
 * Guarantees:
 * - `ensureBenchCluster` uses `--kubeconfig`/BENCH_KUBECONFIG when given, else starts or reuses
 *   the dedicated cluster `iot-bench` (never the default test cluster) with enough kwok nodes for
 *   the pods the scenario needs (110 pods per node), and returns its kubeconfig path.
 * - `watchObjects` lists, then watches from the list's resourceVersion, so no event after the
 *   list is missed; it resumes after a dropped stream and relists after 410 Gone (reporting every
 *   listed object again as MODIFIED). Every event carries the monotonic time it was received.
 * - Clean-up helpers delete and then wait until the objects are really gone (or the timeout
 *   passes, reported as an error naming what is left), so one run does not disturb the next.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Kinds, KubeClient, RuntimeMetrics, isApiError, isNotFound, type KubeObject, type ResourceType } from '@iot-operator/runtime';
import { TestEnv } from '@iot-operator/runtime/testing';
import { parseMetrics, type Sample } from './prom.ts';

const run = promisify(execFile);
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BENCH_CLUSTER = 'iot-bench';
export const PODS_PER_NODE = 110;
export const BENCH_LABEL = 'iot-operator.bench/run';

export const log = (msg: string): void => {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
};

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
export const now = (): number => performance.now();

/** kwok nodes needed for `pods` pods, with one node of headroom; at least 2. */
export function nodesFor(pods: number): number {
  return Math.max(2, Math.ceil(pods / PODS_PER_NODE) + 1);
}

export async function ensureBenchCluster(kubeconfig: string | undefined, pods: number): Promise<string> {
  if (kubeconfig) return kubeconfig;
  const nodes = nodesFor(pods);
  log(`starting or reusing cluster '${BENCH_CLUSTER}' with at least ${nodes} kwok nodes (cluster up)`);
  return clusterUp({ CLUSTER_NAME: BENCH_CLUSTER, CLUSTER_NODES: String(nodes) });
}

/** Runs cluster up with `env` added to this process's environment; returns the kubeconfig path it prints last. */
export async function clusterUp(env: Record<string, string>): Promise<string> {
  const stdout = await clusterCommand('up', env);
  const last = stdout.trim().split('\n').at(-1) ?? '';
  if (!last.startsWith('KUBECONFIG=')) throw new Error(`cluster up did not print KUBECONFIG=...; last line: ${last}`);
  return last.slice('KUBECONFIG='.length);
}

/** Runs cluster down (stops the cluster named by env.CLUSTER_NAME and removes all its state). */
export async function clusterDown(env: Record<string, string>): Promise<void> {
  await clusterCommand('down', env);
}

async function clusterCommand(command: string, env: Record<string, string>): Promise<string> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cluster/cli/cluster.ts'), command], {
    env: { ...process.env, ...env },
    maxBuffer: 16 * 1024 * 1024,
    timeout: 60 * 60 * 1000,
  });
  return stdout;
}

/** The kwokctl cluster directory holding `pids/<component>.pid`, when the kubeconfig lives in one. */
export function clusterDirOf(kubeconfig: string): string {
  return path.dirname(kubeconfig);
}

export async function connect(kubeconfigPath: string): Promise<KubeClient> {
  return KubeClient.fromKubeconfig({ kubeconfigPath });
}

/** Pods the cluster's nodes take in all (their allocatable pods; a count that is not a whole quantity counts 0). */
export async function podCapacity(client: KubeClient): Promise<number> {
  const nodes = await client.list<KubeObject & { status?: { allocatable?: Record<string, string> } }>(Kinds.Node);
  return nodes.items.reduce((sum, n) => sum + (wholeQuantity(n.status?.allocatable?.pods ?? '0') || 0), 0);
}

/** A whole number written as a Kubernetes quantity ("110", "1k": node allocatable pods); NaN for any other form. */
export function wholeQuantity(quantity: string): number {
  const match = /^([0-9]+)([kMGTPE]?)$/.exec(quantity);
  if (!match) return Number.NaN;
  return Number(match[1]) * 1000 ** (match[2] ? 'kMGTPE'.indexOf(match[2]) + 1 : 0);
}

export async function kubernetesVersion(client: KubeClient): Promise<string> {
  const v = await client.raw<{ gitVersion?: string }>({ method: 'GET', path: '/version' });
  return v?.gitVersion ?? 'unknown';
}

export async function installCrd(kubeconfigPath: string, client: KubeClient, file: string): Promise<void> {
  await new TestEnv(kubeconfigPath, client, new RuntimeMetrics()).installCrd(path.resolve(repoRoot, file), { timeoutMs: 60_000 });
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`;
}

export async function createNamespace(client: KubeClient, name: string, labels: Record<string, string> = {}): Promise<void> {
  await client.create(Kinds.Namespace, { metadata: { name, labels: { [BENCH_LABEL]: 'true', ...labels } } });
}

export const pullSecretData = { '.dockerconfigjson': Buffer.from('{"auths":{"registry.example.com":{"auth":"YmVuY2g6YmVuY2g="}}}').toString('base64') };

/** A landscape namespace with its image-pull-secret; returns the Secret as stored. */
export async function createLandscape(client: KubeClient, name: string): Promise<KubeObject> {
  await createNamespace(client, name);
  return client.create(Kinds.Secret, {
    metadata: { name: 'image-pull-secret', namespace: name },
    type: 'kubernetes.io/dockerconfigjson',
    data: pullSecretData,
  });
}

/** Scrapes the API server's /metrics and keeps `apiserver_request_total` and `apiserver_terminated_watchers_total`. */
export async function scrapeApiserver(client: KubeClient): Promise<Sample[]> {
  const text = await client.raw<string>({ method: 'GET', path: '/metrics', timeoutMs: 60_000 });
  return parseMetrics(typeof text === 'string' ? text : '', ['apiserver_request_total', 'apiserver_terminated_watchers_total']);
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export type WatchHandler = (type: WatchEventType, obj: KubeObject, at: number) => void;

export interface Selection {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/**
 * Lists `type` (reporting every item as ADDED), then keeps watching until `signal` aborts.
 * Resolves once the list is done; the returned promise `running` settles when the watch stops.
 */
export async function watchObjects(client: KubeClient, type: ResourceType, selection: Selection, handler: WatchHandler, signal: AbortSignal): Promise<{ running: Promise<void> }> {
  const first = await client.listAll(type, selection);
  const at = now();
  for (const item of first.items) handler('ADDED', withKind(type, item), at);
  let rv = first.metadata.resourceVersion ?? '';
  const loop = async (): Promise<void> => {
    while (!signal.aborted) {
      try {
        const stream = await client.watch(type, { ...selection, resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: 600, signal });
        let relist = false;
        for await (const line of stream.lines) {
          const received = now();
          const event = JSON.parse(line) as { type: string; object: KubeObject & { code?: number } };
          if (event.type === 'ERROR') {
            if (event.object.code === 410) {
              relist = true;
              break;
            }
            throw new Error(`watch ERROR: ${JSON.stringify(event.object).slice(0, 300)}`);
          }
          rv = event.object.metadata?.resourceVersion ?? rv;
          if (event.type === 'BOOKMARK') continue;
          handler(event.type as WatchEventType, withKind(type, event.object), received);
        }
        stream.close();
        if (relist) {
          const again = await client.listAll(type, selection);
          const t = now();
          for (const item of again.items) handler('MODIFIED', withKind(type, item), t);
          rv = again.metadata.resourceVersion ?? '';
        }
      } catch (err) {
        if (signal.aborted) return;
        if (isApiError(err, 'Gone') || isApiError(err, 'Expired')) {
          const again = await client.listAll(type, selection).catch(() => undefined);
          if (again) rv = again.metadata.resourceVersion ?? rv;
        } else {
          log(`watch of ${type.kind} failed (${err instanceof Error ? err.message : String(err)}); resuming`);
        }
        await sleep(500);
      }
    }
  };
  return { running: loop() };
}

function withKind(type: ResourceType, obj: KubeObject): KubeObject {
  return obj.kind ? obj : { ...obj, kind: type.kind };
}

async function waitUntil(what: string, check: () => Promise<{ done: boolean; left?: string }>, timeoutMs: number, intervalMs = 1000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let left = '';
  for (;;) {
    const r = await check();
    if (r.done) return;
    left = r.left ?? '';
    if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}; left: ${left}`);
    await sleep(intervalMs);
  }
}

/** Deletes every namespace matching `labelSelector` and waits until all are gone. */
export async function deleteNamespacesBySelector(client: KubeClient, labelSelector: string, timeoutMs = 600_000): Promise<void> {
  const list = await client.listAll(Kinds.Namespace, { labelSelector });
  await mapLimit(list.items, 50, (ns) => client.delete(Kinds.Namespace, ns.metadata.name!).catch(ignoreNotFound));
  await waitUntil(
    `namespaces ${labelSelector} to be gone`,
    async () => {
      const left = await client.listAll(Kinds.Namespace, { labelSelector });
      return { done: left.items.length === 0, left: `${left.items.length} namespaces` };
    },
    timeoutMs,
    2000,
  );
}

export async function deleteNamespaceAndWait(client: KubeClient, name: string, timeoutMs = 300_000): Promise<void> {
  await client.delete(Kinds.Namespace, name).catch(ignoreNotFound);
  await waitUntil(
    `namespace ${name} to be gone`,
    async () => {
      try {
        await client.get(Kinds.Namespace, name);
        return { done: false, left: name };
      } catch (err) {
        if (isNotFound(err)) return { done: true };
        throw err;
      }
    },
    timeoutMs,
    1000,
  );
}

/** Deletes every object of a namespaced custom type in `namespace` and waits until they are gone (finalizers run). */
export async function deleteAllAndWait(client: KubeClient, type: ResourceType, namespace: string, timeoutMs: number): Promise<void> {
  const list = await client.listAll(type, { namespace });
  await mapLimit(list.items, 50, (o) => client.delete(type, o.metadata.name!, namespace).catch(ignoreNotFound));
  await waitUntil(
    `every ${type.kind} in ${namespace} to be gone`,
    async () => {
      const left = await client.listAll(type, { namespace });
      return { done: left.items.length === 0, left: `${left.items.length} ${type.kind}` };
    },
    timeoutMs,
    2000,
  );
}

/** Removes the finalizers of every object of `type` in `namespace` (clean-up after a broken operator). */
export async function stripFinalizers(client: KubeClient, type: ResourceType, namespace: string): Promise<void> {
  const list = await client.listAll(type, { namespace });
  await mapLimit(list.items, 50, (o) => client.patch(type, o.metadata.name!, namespace, { metadata: { finalizers: null } }, 'merge').catch(ignoreNotFound));
}

export function ignoreNotFound(err: unknown): undefined {
  if (isNotFound(err)) return undefined;
  throw err;
}

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(workers);
  return results;
}
