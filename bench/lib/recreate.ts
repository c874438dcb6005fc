/**
 * Tear-down by recreating the runner's own bench cluster. Deleting a landscape through the API
 * waits for the namespace controller, which removes about 3 namespaces a second: ≈10 minutes for
 * the 1,000 instance namespaces of `scale`, twice per run. Deleting the cluster (cluster down)
 * and making it again (cluster up) takes seconds.
 *
 * Guarantees:
 * - `recreatableShape` describes the cluster as it runs (kwok nodes and the pods each takes, the
 *   controller-manager's and scheduler's client QPS, whether it has the controller sharder), or
 *   returns undefined, and then the caller tears down through the API as before: always for a
 *   cluster given with --kubeconfig / BENCH_KUBECONFIG (`BenchContext.benchCluster` unset), and
 *   for one with OLM or a real node, which are not made again here, or whose kwok nodes it cannot
 *   tell (the log says so).
 * - `recreateBenchCluster` deletes the cluster and makes it again with that shape. When it
 *   returns, cluster up has checked the new cluster (API server ready, every node Ready, the
 *   controller-manager working), the IoTService CRD is installed and `ctx.client` is a new client
 *   (the new cluster has a new CA, certificates and port, in a kubeconfig at the same path; the
 *   old client is closed). Nothing of the old cluster survives: no namespaces, pods, IoTServices,
 *   no etcd history.
 * - The caller first stops everything that still talks to the old cluster (the operator, its own
 *   watches): their connections would fail, not resume.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import type { BenchContext } from './context.ts';
import { installIoTCrd } from './iot.ts';
import { clusterDown, clusterUp, connect, log, now, wholeQuantity } from './kube.ts';
import { componentFlag } from './proc.ts';

export interface ClusterShape {
  name: string;
  /** kwok (fake) nodes, and the pods each takes. */
  nodes: number;
  podsPerNode: number;
  /** `--kube-api-qps` of the controller-manager and the scheduler; undefined = the component's default. */
  controllerManagerQps?: string;
  schedulerQps?: string;
  sharder: boolean;
}

/** How many of `nodes` are kwok's (annotation kwok.x-k8s.io/node=fake), and the most pods one of them takes. */
export function kwokNodes(nodes: readonly KubeObject[]): { nodes: number; podsPerNode: number } {
  const kwok = nodes.filter((n) => n.metadata.annotations?.['kwok.x-k8s.io/node'] === 'fake');
  const pods = kwok.map((n) => wholeQuantity((n.status as { allocatable?: { pods?: string } } | undefined)?.allocatable?.pods ?? '0'));
  return { nodes: kwok.length, podsPerNode: Math.max(0, ...pods.filter((p) => !Number.isNaN(p))) };
}

/** cluster up's environment for a cluster of this shape (no OLM, no real node). */
export function upEnvironment(shape: ClusterShape): Record<string, string> {
  return {
    CLUSTER_NAME: shape.name,
    CLUSTER_NODES: String(shape.nodes),
    CLUSTER_NODE_PODS: String(shape.podsPerNode),
    // Empty: cluster up leaves the flag out and the component keeps its default.
    CLUSTER_CONTROLLER_MANAGER_QPS: shape.controllerManagerQps ?? '',
    CLUSTER_SCHEDULER_QPS: shape.schedulerQps ?? '',
    CLUSTER_SHARDER: shape.sharder ? '1' : '0',
    CLUSTER_OLM: '0',
    CLUSTER_REAL_NODE: '0',
  };
}

/** The shape of the runner's own cluster, to make it again; undefined if it must not be recreated. */
export async function recreatableShape(ctx: BenchContext): Promise<ClusterShape | undefined> {
  if (!ctx.benchCluster) return undefined;
  const has = (file: string) => existsSync(path.join(ctx.clusterDir, file));
  if (has('olm-dir') || has('real-node/enabled')) {
    log(`cluster '${ctx.benchCluster}' has OLM or a real node, which recreating it would not bring back: tearing down through the API`);
    return undefined;
  }
  const nodes = kwokNodes((await ctx.client.listAll(Kinds.Node)).items);
  if (nodes.nodes === 0 || nodes.podsPerNode === 0) {
    log(`cluster '${ctx.benchCluster}': could not tell its kwok nodes (${nodes.nodes}, ${nodes.podsPerNode} pods each): tearing down through the API`);
    return undefined;
  }
  return {
    name: ctx.benchCluster,
    ...nodes,
    controllerManagerQps: componentFlag(ctx.clusterDir, 'kube-controller-manager', 'kube-api-qps'),
    schedulerQps: componentFlag(ctx.clusterDir, 'kube-scheduler', 'kube-api-qps'),
    sharder: has('sharder-binary') || has('sharder-dir'),
  };
}

/** Replaces the cluster (and everything in it: `what`, for the log) with a new one of the same shape. */
export async function recreateBenchCluster(ctx: BenchContext, shape: ClusterShape, what: string): Promise<void> {
  const t0 = now();
  ctx.client.close();
  const env = upEnvironment(shape);
  await clusterDown(env);
  ctx.kubeconfig = await clusterUp(env);
  ctx.client = await connect(ctx.kubeconfig);
  await installIoTCrd(ctx.kubeconfig, ctx.client);
  log(`${what} removed by recreating cluster '${shape.name}' (${((now() - t0) / 1000).toFixed(1)} s)`);
}
