/**
 * The IoT operator sharded across replicas by the Kubernetes controller sharder (run by
 * cluster up with CLUSTER_SHARDER=1): three operator processes, each one shard of a
 * ControllerRing of this landscape's IoTServices, share 60 instances (SHARDING_TEST_N); one is killed, a fourth
 * joins, all restart one by one. What a user sees is asserted: every instance Available
 * throughout the moves, each replica holding about its share, children following their instance,
 * and no instance worked on by two replicas at once (from the replicas' own logs: the replica
 * giving an instance up logs the drain before the next one touches its children).
 */
// run-tests: alone among the IoT files: its 60 instances keep the kwok nodes busy for minutes; other IoT files' instances would wait behind them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kinds, customResource, shardLabel, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { IoTServiceType, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { abandonLandscape, createLandscape, installIoTCrd, iotService, spawnOperator, type IoTObject } from './e2e-support.ts';

process.env.CLUSTER_SHARDER = '1'; // cluster up (run by localTestEnv) starts the sharder unless it runs

const N = Number(process.env.SHARDING_TEST_N ?? 60);
/**
 * A share of the instances: the sharder's ring (100 tokens a shard) gives each of k shards about
 * N/k; at N = 60 these bounds fail a fair ring about once in a thousand runs (binomial tails).
 */
const FAIR_SHARE = { min: N / 10, max: (3 * N) / 5, fourthShardMin: N / 12 };
/** Two pods per instance (broker and database), without volumes: the moves are what is tested, not pods or storage. */
const LIGHT = { gateway: { replicas: 0 }, core: { replicas: 0 }, processing: { replicas: 0 }, broker: { storage: 'ephemeral' }, database: { storage: 'ephemeral' } };
const ControllerRingType = customResource('sharding.timebertt.dev', 'v1alpha1', 'ControllerRing', 'controllerrings', false);
/** The shard Lease's duration: the sharder takes a silent shard's Lease one duration after it expired. */
const LEASE_DURATION_S = 15;

let env: TestEnv;
let landscape: string;
let ring: string;
const shards = new Map<string, ReturnType<typeof spawnOperator>>();

before(async () => {
  env = await localTestEnv();
  await installIoTCrd(env);
  landscape = await createLandscape(env);
  ring = `iot-${landscape}`;
  await env.client.create(ControllerRingType, {
    apiVersion: 'sharding.timebertt.dev/v1alpha1',
    kind: 'ControllerRing',
    metadata: { name: ring },
    spec: { resources: [{ group: 'cp.iotservices.io', resource: 'iotservices' }], namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': landscape } } },
  });
});

after(async () => {
  for (const shard of shards.values()) shard.kill('SIGKILL');
  await abandonLandscape(env, landscape);
  await env.client.delete(ControllerRingType, ring).catch(() => undefined);
  await env?.cleanup();
});

function startShard(name: string): ReturnType<typeof spawnOperator> {
  const shard = spawnOperator(env, landscape, [`--shard-ring=${ring}`, `--shard-name=${name}`]);
  shards.set(name, shard);
  return shard;
}

/** The shard processes that have ended, each with how and its last log lines (for failure messages: a shard that died explains a share it never took). */
function endedShards(): string {
  const ended = [...shards].filter(([, shard]) => shard.exitCode !== null || shard.signalCode !== null);
  return ended.map(([name, shard]) => `${name} ended (${shard.exitCode ?? shard.signalCode}): ${shard.output().trim().split('\n').slice(-6).join(' | ')}`).join('; ') || 'no shard process ended';
}

/** The lines a shard logged (pino JSON) that concern one IoTService. */
interface LogLine {
  time: number;
  msg: string;
  object?: string;
  /** On 'child differs': which child, and its first field that differs. */
  kind?: string;
  name?: string;
  field?: string;
}
function logLines(name: string): LogLine[] {
  return shards
    .get(name)!
    .output()
    .split('\n')
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as LogLine];
      } catch {
        return [];
      }
    });
}

/** What every shard logged about one instance (for failure messages). */
function logsOf(name: string): string[] {
  return [...shards.keys()].flatMap((shard) => logLines(shard).filter((l) => l.object === `${landscape}/${name}`).map((l) => `${shard} ${l.time} ${l.msg}${l.field ? ` (${l.kind} ${l.name}: ${l.field})` : ''}`));
}

/** The N IoTServices, listed as stored (v1beta1): polled often, they need no conversion that way (only status and labels are read). */
async function instances(): Promise<IoTObject[]> {
  return (await env.client.list<IoTObject>(IoTServiceType, { namespace: landscape })).items;
}

const shardOf = (obj: KubeObject) => obj.metadata.labels?.[shardLabel(ring)];
const available = (i: IoTObject) => i.status?.phase === 'Available' && i.status.observedGeneration === i.metadata.generation;

/** IoTServices per shard. */
function byShard(items: IoTObject[]): Map<string, string[]> {
  const result = new Map<string, string[]>();
  for (const i of items) result.set(shardOf(i) ?? '(none)', [...(result.get(shardOf(i) ?? '(none)') ?? []), i.metadata.name!]);
  return result;
}

/** Every instance's children (its namespace and StatefulSets, checked) carry its shard label: it was reconciled where it lives. */
async function childrenFollowTheirInstance(): Promise<{ done: boolean; seen: unknown }> {
  const items = await instances();
  const shardByInstance = new Map(items.map((i) => [i.metadata.name!, shardOf(i)]));
  const selector = `cp.iotservices.io/landscape=${landscape}`;
  const children = [...(await env.client.list(Kinds.Namespace, { labelSelector: selector })).items, ...(await env.client.list(Kinds.StatefulSet, { labelSelector: selector })).items];
  const astray = children.filter((c) => shardOf(c) !== shardByInstance.get(c.metadata.labels?.['cp.iotservices.io/instance'] ?? ''));
  return { done: astray.length === 0 && children.length === 3 * N, seen: { children: children.length, astray: astray.slice(0, 5).map((c) => `${c.kind} ${c.metadata.namespace ?? ''}/${c.metadata.name} on ${shardOf(c)}`) } };
}

/** The instances that were not Available at some poll while `during` runs (with their status and logs). */
async function availableThroughout(during: () => Promise<void>): Promise<string[]> {
  const lapses = new Set<string>();
  let polling = true;
  const poll = (async () => {
    while (polling) {
      for (const i of await instances()) if (!available(i)) lapses.add(`${i.metadata.name}: ${i.status?.phase} (${JSON.stringify(i.status?.conditions?.find((c) => c.type === 'Ready'))}) ${JSON.stringify(logsOf(i.metadata.name!))}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  try {
    await during();
  } finally {
    polling = false;
    await poll;
  }
  return [...lapses];
}

/** Objects a shard's cache holds per informer, from its /metrics (cache_objects). */
async function cachedObjects(name: string): Promise<Map<string, number>> {
  const address = /serving \/metrics[^\n]*?"address":"(http:\/\/[^"]+)"|"address":"(http:\/\/[^"]+)"[^\n]*serving \/metrics/.exec(shards.get(name)!.output());
  assert.ok(address, `shard ${name} logged its metrics address`);
  const text = await (await fetch(`${address[1] ?? address[2]}/metrics`)).text();
  return new Map([...text.matchAll(/^cache_objects\{informer="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

/**
 * For every instance `from` handed back since `since` (ms): `from` did nothing with it after, and
 * no other shard moved or wrote its children before. Returns how many were handed back.
 */
function handedOverInOrder(from: string, others: string[], since: number): number {
  const drains = logLines(from).filter((l) => l.msg === 'drained: handed back to the sharder' && l.time >= since);
  for (const drain of drains) {
    const lastByFrom = logLines(from).filter((l) => l.object === drain.object && l.msg !== 'drained: handed back to the sharder').at(-1);
    if (lastByFrom) assert.ok(lastByFrom.time <= drain.time, `${from} worked on ${drain.object} after handing it back at ${drain.time}: ${lastByFrom.time} ${lastByFrom.msg}`);
    for (const other of others) {
      const first = logLines(other).find((l) => l.time >= since && l.object === drain.object && /children (moved|written)/.test(l.msg));
      if (first) assert.ok(first.time >= drain.time, `${other} touched ${drain.object}'s children at ${first.time}, before ${from} handed it back at ${drain.time}`);
    }
  }
  return drains.length;
}

describe('the IoT operator sharded across replicas', () => {
  it(`three shards share ${N} instances, each caching about a third, children labelled with their instance's shard`, async () => {
    for (const name of ['shard-a', 'shard-b', 'shard-c']) startShard(name);
    await waitFor('the ring to have 3 available shards', async () => {
      const current = await env.client.get<KubeObject & { status?: { availableShards?: number } }>(ControllerRingType, ring);
      return { done: current.status?.availableShards === 3, value: undefined, seen: current.status };
    }, { timeoutMs: 60_000 });
    for (let i = 0; i < N; i += 25) {
      await Promise.all(Array.from({ length: Math.min(25, N - i) }, (_, k) => env.client.create(IoTServiceV1alpha1Type, iotService(`t-${String(i + k).padStart(3, '0')}`, landscape, LIGHT))));
    }
    await waitFor(`all ${N} instances Available`, async () => {
      const items = await instances();
      return { done: items.filter(available).length === N, value: undefined, seen: { available: items.filter(available).length, byShard: [...byShard(items)].map(([s, l]) => `${s}: ${l.length}`) } };
    }, { timeoutMs: 420_000, intervalMs: 2_000 });

    const assigned = byShard(await instances());
    assert.deepEqual([...assigned.keys()].sort(), ['shard-a', 'shard-b', 'shard-c'], `every instance is assigned to one of the three shards (${endedShards()})`);
    for (const [name, owned] of assigned) {
      assert.ok(owned.length >= FAIR_SHARE.min && owned.length <= FAIR_SHARE.max, `${name} holds ${owned.length} of ${N}: about a third`);
      const cached = await cachedObjects(name);
      const iotInformer = [...cached].find(([informer]) => informer.includes('/IoTService'));
      assert.equal(iotInformer?.[1], owned.length, `${name} caches its own IoTServices only`);
      const namespaces = [...cached].find(([informer]) => informer.startsWith('core/v1/Namespace'));
      assert.equal(namespaces?.[1], owned.length, `${name} caches the namespaces of its own instances only`);
      assert.ok(![...cached.keys()].some((informer) => informer.startsWith('core/v1/Pod')), `${name} caches no pods`);
    }
    await waitFor('every child to carry its instance’s shard label', async () => ({ ...(await childrenFollowTheirInstance()), value: undefined }), { timeoutMs: 10_000 });
  });

  it('a killed shard’s instances go to the others once the sharder takes its Lease, and are re-checked there', async () => {
    const victim = 'shard-a';
    const victims = byShard(await instances()).get(victim)!;
    const killedAt = Date.now();
    shards.get(victim)!.kill('SIGKILL');
    const lapses = await availableThroughout(async () => {
      await waitFor(`${victim}'s ${victims.length} instances to be reassigned and their children relabelled`, async () => {
        const held = byShard(await instances()).get(victim)?.length ?? 0;
        const children = await childrenFollowTheirInstance();
        return { done: held === 0 && children.done, value: undefined, seen: { held, children: children.seen } };
      }, { timeoutMs: (3 * LEASE_DURATION_S + 30) * 1000, intervalMs: 500 });
    });
    const movedAfterS = (Date.now() - killedAt) / 1000;
    console.log(`# ${victims.length} instances of a killed shard moved and re-checked ${movedAfterS.toFixed(1)} s after the kill (lease ${LEASE_DURATION_S} s)`);
    // The sharder takes a Lease over one lease duration after it expired, then moves the objects;
    // the shards that receive them relabel their children (one patch each).
    assert.ok(movedAfterS <= 2 * LEASE_DURATION_S + 30, `moved ${movedAfterS.toFixed(1)} s after the kill: within two lease durations and 30 s`);
    assert.deepEqual(lapses, [], 'no instance stopped being Available');
    const survivors = ['shard-b', 'shard-c'];
    for (const name of survivors) assert.ok(logLines(name).some((l) => l.msg === 'children moved to this shard' && victims.includes(l.object?.split('/')[1] ?? '')), `${name} took some of ${victim}'s instances (${endedShards()})`);
  });

  it('a fourth shard takes its share through drains, never while another shard still works on it; all Available throughout', async () => {
    const since = Date.now();
    startShard('shard-d');
    const lapses = await availableThroughout(async () => {
      await waitFor('shard-d to hold a share and every child to follow', async () => {
        const held = byShard(await instances()).get('shard-d')?.length ?? 0;
        const children = await childrenFollowTheirInstance();
        return { done: held >= FAIR_SHARE.fourthShardMin && children.done, value: undefined, seen: { held, children: children.seen } };
      }, { timeoutMs: 90_000, intervalMs: 1000 });
    });
    assert.deepEqual(lapses, [], 'no instance stopped being Available');
    const drained = handedOverInOrder('shard-b', ['shard-c', 'shard-d'], since) + handedOverInOrder('shard-c', ['shard-b', 'shard-d'], since);
    assert.ok(drained > 0, 'the existing shards handed instances over through drains');
  });

  it('a rolling restart of every shard keeps every instance Available', async () => {
    const lapses = await availableThroughout(async () => {
      for (const name of ['shard-b', 'shard-c', 'shard-d']) {
        assert.equal(await shards.get(name)!.stop(), 0, `${name} stopped cleanly on SIGTERM (${endedShards()})`);
        startShard(name);
        await waitFor(`${name} back in the ring with its share`, async () => {
          const held = byShard(await instances()).get(name)?.length ?? 0;
          const children = await childrenFollowTheirInstance();
          return { done: held >= FAIR_SHARE.fourthShardMin && children.done, value: undefined, seen: { held, children: children.seen } };
        }, { timeoutMs: 90_000, intervalMs: 1000 });
      }
    });
    assert.deepEqual(lapses, [], 'no instance stopped being Available');
  });
});
