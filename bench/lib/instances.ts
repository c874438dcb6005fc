/**
 * Instances rendered without the operator (the physical floor) and a watch-driven record of
 * what exists and what is ready, per instance.
 *
 * Guarantees:
 * - `renderInstance` produces exactly the children the IoT operator would apply for an
 *   IoTService with the same landscape, name and spec: it calls the operator's own pure
 *   `resolveInstance` and `desiredChildren`, with the operator's default registry, as the
 *   operator's package exports them to its users (`@iot-operator/iot`), not its internals.
 * - `createRendered` creates the namespace first and then every other child at once, as fast as
 *   the API server accepts them (plain creates; no server-side apply, no reads).
 * - `InstanceTracker` watches this landscape's children (by the landscape label selector the
 *   operator itself uses) and records, per instance, the first moment all expected children
 *   exist, all workloads are rolled out and ready (`workloadReady`, the operator's own rule) and
 *   all pods are Ready. Only the kinds asked for are watched, to keep the benchmark's own load on
 *   the API server small.
 */
import { Kinds, type KubeClient, type KubeObject } from '@iot-operator/runtime';
import { CHILD_TYPES, INSTANCE_LABEL, desiredChildren, generateCredentials, landscapeSelector, resolveInstance, type IoTService } from '@iot-operator/iot';
import type { V1Secret } from '@kubernetes/client-node';
import { log, now, watchObjects } from './kube.ts';
import { podReady, workloadReady, type PodLike, type WorkloadLike } from './readiness.ts';

export const DEFAULT_REGISTRY = 'registry.example.com/iot';

export interface RenderedInstance {
  id: string;
  namespace: string;
  /** Namespace first, then every other child in apply order. */
  children: KubeObject[];
  /** `Kind/name` of every child (the namespace as `Namespace/<name>`). */
  childKeys: string[];
  workloads: string[];
  pods: number;
}

export function renderInstance(landscape: string, id: string, pullSecret: KubeObject, version = '2.4.1'): RenderedInstance {
  const resolved = resolveInstance(
    { metadata: { name: id, namespace: landscape, generation: 1 }, spec: { version } } as unknown as Pick<IoTService, 'metadata' | 'spec'>,
    { operatorName: landscape, defaultRegistry: DEFAULT_REGISTRY },
  );
  if (!resolved.ok) throw new Error(`cannot render ${landscape}/${id}: ${resolved.failure.message}`);
  const { children } = desiredChildren(resolved.instance, { imagePullSecret: pullSecret as unknown as V1Secret, credentials: generateCredentials(), keptEmptyDirs: new Set() });
  const objects = children.map((c) => c.object as unknown as KubeObject);
  const workloads = objects.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');
  return {
    id,
    namespace: resolved.instance.namespace,
    children: objects,
    childKeys: objects.map((o) => `${o.kind}/${o.metadata.name}`),
    workloads: workloads.map((o) => `${o.kind}/${o.metadata.name}`),
    pods: workloads.reduce((s, o) => s + (((o.spec as { replicas?: number } | undefined)?.replicas) ?? 1), 0),
  };
}

/** Creates the namespace, then all other children concurrently. */
export async function createRendered(client: KubeClient, r: RenderedInstance): Promise<void> {
  const [ns, ...rest] = r.children;
  await client.create(Kinds.Namespace, ns!);
  await Promise.all(rest.map((o) => client.create(CHILD_TYPES[o.kind!]!, o)));
}

interface PerInstance {
  expected: RenderedInstance;
  seen: Set<string>;
  readyWorkloads: Set<string>;
  readyPods: Set<string>;
}

export type Milestone = 'children' | 'workloads' | 'pods';

export class InstanceTracker {
  readonly at: Record<Milestone, Map<string, number>> = { children: new Map(), workloads: new Map(), pods: new Map() };
  private readonly instances = new Map<string, PerInstance>();
  private readonly abort = new AbortController();
  private readonly running: Promise<void>[] = [];

  constructor(
    private readonly client: KubeClient,
    readonly landscape: string,
    private readonly track: readonly Milestone[],
  ) {}

  async start(): Promise<void> {
    const kinds = new Set<string>();
    if (this.track.includes('children')) for (const k of Object.keys(CHILD_TYPES)) kinds.add(k);
    if (this.track.includes('workloads')) ['Deployment', 'StatefulSet'].forEach((k) => kinds.add(k));
    const types = [...kinds].map((k) => CHILD_TYPES[k]!);
    if (this.track.includes('pods')) types.push(Kinds.Pod);
    const selector = landscapeSelector(this.landscape);
    await Promise.all(
      types.map(async (type) => {
        const { running } = await watchObjects(this.client, type, { labelSelector: selector }, (event, obj, at) => this.onEvent(event, obj, at), this.abort.signal);
        this.running.push(running);
      }),
    );
  }

  expect(r: RenderedInstance): void {
    this.instances.set(r.id, { expected: r, seen: new Set(), readyWorkloads: new Set(), readyPods: new Set() });
  }

  private onEvent(event: string, obj: KubeObject, at: number): void {
    const id = obj.metadata.labels?.[INSTANCE_LABEL];
    const inst = id ? this.instances.get(id) : undefined;
    if (!inst || !id) return;
    const key = `${obj.kind}/${obj.metadata.name}`;
    const deleted = event === 'DELETED';
    if (obj.kind === 'Pod') {
      if (!deleted && podReady(obj as PodLike)) inst.readyPods.add(key);
      else inst.readyPods.delete(key);
      if (inst.readyPods.size >= inst.expected.pods) this.mark('pods', id, at);
      return;
    }
    if (deleted) inst.seen.delete(key);
    else inst.seen.add(key);
    if (this.track.includes('children') && inst.expected.childKeys.every((k) => inst.seen.has(k))) this.mark('children', id, at);
    if (obj.kind === 'Deployment' || obj.kind === 'StatefulSet') {
      if (!deleted && workloadReady(obj as WorkloadLike)) inst.readyWorkloads.add(key);
      else inst.readyWorkloads.delete(key);
      if (inst.expected.workloads.every((k) => inst.readyWorkloads.has(k))) this.mark('workloads', id, at);
    }
  }

  private mark(m: Milestone, id: string, at: number): void {
    if (!this.at[m].has(id)) this.at[m].set(id, at);
  }

  /** Waits until every expected instance reached each milestone in `milestones`. */
  async waitAll(label: string, milestones: readonly Milestone[], startedAt: number, timeoutMs: number, progressMs = 2000): Promise<void> {
    const deadline = now() + timeoutMs;
    let lastPrint = now();
    const total = this.instances.size;
    const done = () => Math.min(...milestones.map((m) => [...this.instances.keys()].filter((id) => this.at[m].has(id)).length));
    while (done() < total) {
      if (now() > deadline) throw new Error(`${label}: only ${done()} of ${total} instances ready after ${Math.round(timeoutMs / 1000)} s`);
      await new Promise((r) => setTimeout(r, 100));
      if (now() - lastPrint >= progressMs) {
        lastPrint = now();
        const counts = milestones.map((m) => `${m} ${[...this.instances.keys()].filter((id) => this.at[m].has(id)).length}/${total}`).join(', ');
        log(`${label}: ${counts}, ${((now() - startedAt) / 1000).toFixed(1)} s`);
      }
    }
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.running.map((r) => r.catch(() => undefined)));
  }
}
