/**
 * `sharded`: N IoTServices (default 2,000) created at once on S replicas of the IoT operator,
 * each one shard of a ControllerRing (`--shards`, default 3; `--shards 1` is the same operator
 * alone in its ring), with the Kubernetes controller sharder running on the bench cluster.
 *
 * Instances are light (gateway, core and processing at 0 replicas: 2 pods each). A shard caches
 * IoTServices and their children but no pods (it lists an instance's pods when it computes its
 * status), so what the replicas share — IoTServices, children, reconciles, writes — is the whole
 * per-instance work of the operator, while the cluster makes 2 pods per instance instead of 7.
 *
 * Figures: wall time from the first create to the last Available; per replica (by shard name):
 * instances assigned, peak RSS, CPU seconds during the burst, API requests; their sums and the
 * largest replica's peak; per-instance time to Available (p50/p95/p99).
 *
 * Guarantees: every replica has synced its caches and the ring counts them all as available
 * before the clock starts; the landscape and the ring are removed after the run.
 */
import { customResource, shardLabel, type KubeObject } from '@iot-operator/runtime';
import path from 'node:path';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { AvailabilityTracker, IOT_DEFAULT_COMMAND, IoTServiceV1alpha1Type, createInstances, instanceName, startIoTOperator, teardownLandscape } from '../lib/iot.ts';
import { createLandscape, log, now, sleep, uniqueName } from '../lib/kube.ts';
import type { OperatorProcess } from '../lib/operator.ts';
import { MiB } from '../lib/proc.ts';
import { sumBy } from '../lib/prom.ts';
import { round, summarize } from '../lib/stats.ts';

export const PODS_PER_LIGHT_INSTANCE = 2;
const LIGHT_SPEC = { gateway: { replicas: 0 }, core: { replicas: 0 }, processing: { replicas: 0 } };
const ControllerRingType = customResource('sharding.timebertt.dev', 'v1alpha1', 'ControllerRing', 'controllerrings', false);

/** Per replica, what the burst cost it. */
export interface ReplicaFigures {
  instances: number;
  peakRssMiB: number;
  cpuS: number;
  requests: number;
}

/** The replicas' figures summed up: what sharding divides, and what it adds. */
export function shardTotals(replicas: Record<string, ReplicaFigures>): { instances: number; maxPeakRssMiB: number; sumPeakRssMiB: number; cpuS: number; requests: number } {
  const all = Object.values(replicas);
  return {
    instances: all.reduce((s, r) => s + r.instances, 0),
    maxPeakRssMiB: round(Math.max(0, ...all.map((r) => r.peakRssMiB)), 1),
    sumPeakRssMiB: round(all.reduce((s, r) => s + r.peakRssMiB, 0), 1),
    cpuS: round(all.reduce((s, r) => s + r.cpuS, 0), 2),
    requests: all.reduce((s, r) => s + r.requests, 0),
  };
}

export async function runSharded(ctx: BenchContext): Promise<ScenarioOutput> {
  const { n, shards } = ctx.options;
  const landscape = uniqueName('shard');
  await createLandscape(ctx.client, landscape);
  const ring = `iot-${landscape}`;
  await ctx.client.create(ControllerRingType, {
    apiVersion: 'sharding.timebertt.dev/v1alpha1',
    kind: 'ControllerRing',
    metadata: { name: ring },
    spec: { resources: [{ group: 'cp.iotservices.io', resource: 'iotservices' }], namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': landscape } } },
  });
  const command = ctx.options.operatorCmd ?? IOT_DEFAULT_COMMAND;
  const replicas = new Map<string, OperatorProcess>();
  try {
    for (let i = 0; i < shards; i++) {
      const name = `shard-${i}`;
      replicas.set(name, await startIoTOperator({ command: `${command} --shard-ring ${ring} --shard-name ${name}`, kubeconfig: ctx.kubeconfig, landscape, workers: ctx.options.workers, logFile: path.join(ctx.logDir, `operator-${landscape}-${name}.log`) }));
    }
    await Promise.all([...replicas.values()].map((r) => r.waitReady()));
    await waitForRing(ctx, ring, shards);
    const tracker = new AvailabilityTracker(ctx.client, landscape);
    await tracker.start();
    const names = Array.from({ length: n }, (_, i) => instanceName(i));
    for (const name of names) tracker.expect(name, 1);
    const before = new Map(await Promise.all([...replicas].map(async ([name, r]) => [name, { cpuS: (r.sampler.sample(), r.sampler.lastCpuS ?? 0), requests: await requestsOf(r) }] as const)));
    log(`sharded: creating ${n} IoTServices on ${shards} shard(s)`);
    const t0 = now();
    const sentAt = await createInstances(ctx.client, landscape, names, 50, LIGHT_SPEC);
    await tracker.waitAll('sharded', n, t0, ctx.options.timeoutS * 1000);
    const last = Math.max(...tracker.availableAt.values());
    await tracker.stop();
    const held = await instancesByShard(ctx, landscape, ring);
    const perReplica: Record<string, ReplicaFigures> = {};
    for (const [name, r] of replicas) {
      r.sampler.sample();
      perReplica[name] = {
        instances: held.get(name) ?? 0,
        peakRssMiB: round(r.sampler.peakRssBytes / MiB, 1),
        cpuS: round((r.sampler.lastCpuS ?? 0) - before.get(name)!.cpuS, 2),
        requests: (await requestsOf(r)) - before.get(name)!.requests,
      };
    }
    const availableS = names.map((name) => round((tracker.availableAt.get(name)! - sentAt.get(name)!) / 1000));
    const a = summarize(availableS);
    return {
      figures: {
        shards,
        podsPerInstance: PODS_PER_LIGHT_INSTANCE,
        wallS: round((last - t0) / 1000),
        availableP50S: a.p50,
        availableP95S: a.p95,
        availableP99S: a.p99,
        totals: shardTotals(perReplica),
        replicas: perReplica,
      },
      samples: { availableS },
    };
  } finally {
    const [first] = replicas.values();
    await teardownLandscape(ctx.client, landscape, first, ctx.options.timeoutS * 1000).catch((err: unknown) => log(`tear-down: ${String(err)}`));
    for (const r of replicas.values()) await r.stop();
    await ctx.client.delete(ControllerRingType, ring).catch(() => undefined);
  }
}

async function waitForRing(ctx: BenchContext, ring: string, shards: number): Promise<void> {
  const deadline = now() + 60_000;
  for (;;) {
    const current = await ctx.client.get<KubeObject & { status?: { availableShards?: number } }>(ControllerRingType, ring);
    if (current.status?.availableShards === shards) return;
    if (now() > deadline) throw new Error(`ControllerRing ${ring} did not count ${shards} available shards within 60 s: ${JSON.stringify(current.status)}`);
    await sleep(500);
  }
}

async function instancesByShard(ctx: BenchContext, landscape: string, ring: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const i of (await ctx.client.listAll(IoTServiceV1alpha1Type, { namespace: landscape })).items) {
    const shard = i.metadata.labels?.[shardLabel(ring)] ?? '(none)';
    counts.set(shard, (counts.get(shard) ?? 0) + 1);
  }
  return counts;
}

async function requestsOf(replica: OperatorProcess): Promise<number> {
  return sumBy(await replica.metrics(['rest_client_requests_total']), 'rest_client_requests_total')[''] ?? 0;
}
