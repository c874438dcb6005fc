/**
 * A database of three replicas fails over by itself, on the real node with the reference images:
 * one instance with `database.replicas: 3` (Patroni, Kubernetes as its store) and
 * `broker.replicas: 3`, a device publishing over MQTT and HTTP as fast as it is acknowledged,
 * through the gateway's and core's Services. In this order:
 *   - Patroni makes one primary and two standbys, one of them synchronous; database-client leads
 *     to the primary alone; the count cannot be changed afterwards;
 *   - a planned switchover (patronictl, to the synchronous standby), from a cluster whose standbys
 *     both stream, pauses writes (printed) and loses nothing;
 *   - the primary's container SIGKILLed through the node's containerd (PostgreSQL and Patroni with
 *     it, as an OOM kill would): Patroni restores a primary — a standby promoted once the lock
 *     lapses, or the restarted pod itself while it still holds the lock (which one is printed) —,
 *     writes resume (the longest pause between stored rows is printed), every
 *     acknowledged message is stored exactly once, and a gateway pod is Ready throughout (devices
 *     are not refused a connection while core waits for the database);
 *   - a version upgrade (`spec.version` 2.4.1 → 2.5.0: the working tree's images built and pushed
 *     under both tags, each reporting its own) rolls every pod onto the new images: the database's as the operator does it
 *     (database-roll.ts) — both standbys replaced before the primary, which is replaced only once
 *     Patroni switched over and labels it a standby —, the three brokers one at a time (never two
 *     of them away or not ready at once); writes resume, nothing lost;
 *   - a drain's evictions: the database's PodDisruptionBudget refuses a second eviction while the
 *     first pod is away; writes resume, nothing lost.
 * Before the events it prints the memory of the instance and of one like it with one broker and
 * one database (created beside it, deleted before the events). Reported as not run where the
 * cluster has no real node.
 */
// run-tests: alone among the IoT files: it bounds the service's pauses, which another instance's load on the real node would stretch.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiError, Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, podPeakMemoryBytes, realNode } from '@iot-operator/local-cluster';
import { longestAckGapMs, registerDevice, startContinuousDevice, type DeviceMessage, type DeviceProtocol, type ServiceAddresses, type StoredTelemetryRecord } from '@iot-operator/iot-service/simulator';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { PRIMARY_ROLE, ROLE_LABEL } from '../src/resources/index.ts';
import { COMPONENTS } from '../src/api/iotservice.ts';
import {
  assertStoredExactlyOnce,
  deviceServiceAddresses,
  execInPod,
  iotService,
  realNodeSpec,
  referenceImages,
  sigkillContainer,
  startReferenceLandscape,
  stopServedLandscape,
  waitForPhase,
} from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const FROM = '2.4.1';
const TO = '2.5.0';
/**
 * The longest pause of writes each event may cause (each pause is printed): the issue's targets,
 * 10 s for the planned events — a switchover, a version upgrade that rolls every pod of the
 * instance, brokers included, and a drain's evictions — and 30 s for the primary's SIGKILL.
 */
const PLANNED_PAUSE_MS = 10_000;
const SIGKILL_PAUSE_MS = 30_000;
const NAME = 'failover';
/** An instance of one broker and one database, for the memory `NAME`'s three of each cost. */
const SINGLE = 'single';

let landscape = '';
let namespace = '';
let mgr: Manager | undefined;
let addresses: ServiceAddresses;

type Pod = KubeObject & { spec?: { containers?: Array<{ image?: string }> }; status?: { containerStatuses?: Array<{ containerID?: string; ready?: boolean; restartCount?: number }> } };

/** The database's pods, those being deleted too. */
async function allDatabasePods(): Promise<Pod[]> {
  return (await env.client.list<Pod>(Kinds.Pod, { namespace, labelSelector: 'app.kubernetes.io/component=database' })).items;
}

async function databasePods(): Promise<Pod[]> {
  return (await allDatabasePods()).filter((p) => !p.metadata.deletionTimestamp);
}

const restarts = (pod: Pod) => pod.status?.containerStatuses?.[0]?.restartCount ?? 0;

/** The one ready pod labelled primary, once there is exactly one and it is not `former` as it was (another pod, or it restarted since). */
async function primary(former?: Pod): Promise<Pod> {
  return waitFor(`one ready primary${former ? ` other than ${former.metadata.name} as it was` : ''}`, async () => {
    const pods = await databasePods();
    const primaries = pods.filter((p) => p.metadata.labels?.[ROLE_LABEL] === PRIMARY_ROLE && p.status?.containerStatuses?.[0]?.ready);
    const next = primaries[0];
    const done = primaries.length === 1 && (!former || next!.metadata.name !== former.metadata.name || restarts(next!) > restarts(former));
    return { done, value: primaries[0]!, seen: pods.map((p) => `${p.metadata.name} ${p.metadata.labels?.[ROLE_LABEL]} ready=${p.status?.containerStatuses?.[0]?.ready}`) };
  }, { timeoutMs: 120_000, intervalMs: 250 });
}

function patronictl(pod: string, args: string[]): Promise<string> {
  return execInPod(env, namespace, pod, ['patronictl', '-c', '/tmp/patroni/patroni.yml', ...args], 60_000);
}

/** Both standbys streaming from `leader`, one of them synchronous, as Patroni lists them. */
async function standbysStreaming(leader: Pod): Promise<void> {
  await waitFor('both standbys streaming, one synchronous', async () => {
    const members = await patronictl(leader.metadata.name!, ['list']);
    const streaming = members.match(/\|\s*streaming\s*\|/g)?.length ?? 0;
    return { done: /Sync Standby\s*\|\s*streaming/.test(members) && streaming === 2, value: undefined, seen: members };
  }, { timeoutMs: 120_000, intervalMs: 1000 });
}

/**
 * Each component's memory high-water mark (its pods' cgroups on the real node, so far: here, their
 * start) in `ns`, summed over its pods, and the total, in MiB.
 */
async function startMemory(ns: string): Promise<string> {
  const pods = (await env.client.list<Pod>(Kinds.Pod, { namespace: ns })).items;
  const byComponent = new Map<string, number>();
  for (const pod of pods) {
    const component = pod.metadata.labels?.['app.kubernetes.io/component'] ?? pod.metadata.name!;
    byComponent.set(component, (byComponent.get(component) ?? 0) + podPeakMemoryBytes(pod.metadata.uid!) / 2 ** 20);
  }
  const total = [...byComponent.values()].reduce((a, b) => a + b, 0);
  return `${[...byComponent].sort().map(([component, mib]) => `${component} ${mib.toFixed(0)}`).join(', ')}; ${total.toFixed(0)} MiB in all (peak of each pod, summed)`;
}

/**
 * While `disrupt` runs and after it, a device publishes; afterwards every acknowledged message is
 * stored once. Returns the longest pause (ms) between consecutive stored rows of the device: how
 * long writes stopped.
 */
async function writesThrough(label: string, disrupt: () => Promise<void>): Promise<number> {
  // From an instance whole again after the disruption before: every pod ready, not only writes
  // resumed (after a primary's SIGKILL, core's and the gateway's Services once refused connections
  // for a moment after writes had resumed); the registration is tried again as a device would.
  await waitForPhase(env, landscape, NAME, 'Available', 120_000);
  const deviceId = `${label.replace(/\W+/g, '-')}-${Date.now()}`;
  const device = await waitFor(`device ${deviceId} registered`, async () => ({ done: true, value: await registerDevice(addresses, deviceId) }), { timeoutMs: 60_000, intervalMs: 1000 });
  const running = startContinuousDevice(addresses, device, { attemptTimeoutMs: 5_000, retryDelayMs: 200 });
  const acked = () => running.messages.filter((m) => m.ackedAt !== undefined).length;
  const progress = async (what: string) => {
    const before = acked();
    await waitFor(what, async () => ({ done: acked() >= before + 50, value: undefined, seen: acked() }), { timeoutMs: 120_000, intervalMs: 200 });
  };
  const started = Date.now();
  try {
    await progress(`messages acknowledged before the ${label}`);
    await disrupt();
    await waitForPhase(env, landscape, NAME, 'Available', 300_000);
    await progress(`acknowledgements going on after the ${label}`);
  } catch (error) {
    // What Patroni saw, for whoever reads the failure.
    const member = (await databasePods()).find((p) => p.status?.containerStatuses?.[0]?.ready);
    if (member) console.log(await patronictl(member.metadata.name!, ['list']).catch((e: unknown) => String(e)));
    await running.stop();
    throw error;
  }
  const messages = await running.stop();
  const stored = await assertStoredExactlyOnce(addresses, device.id, messages);
  const times = stored.map((r) => Date.parse(r.storedAt)).filter((t) => t >= started).sort((a, b) => a - b);
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  const pause = Math.max(0, ...gaps);
  const from = times[gaps.indexOf(pause)];
  console.log(
    `database failover: ${label}: writes paused for at most ${(pause / 1000).toFixed(1)} s${from === undefined ? '' : ` (from ${new Date(from).toISOString()})`}; ${messages.length} messages acknowledged, all stored once (${running.failures.length} attempts sent again)`,
  );
  if (from !== undefined) console.log(`database failover: ${label}: ${pauseSegments(messages, stored, from, pause)}`);
  for (const f of running.failures) console.log(`database failover: ${new Date(f.at).toISOString()} ${f.via} attempt failed: ${f.error}`);
  // Past the 10 s target: what the instance did meanwhile.
  if (pause > 10_000) await printInstanceLogs(new Date(started));
  return pause;
}

/**
 * Where a pause of `pauseMs` from `from` went, in seconds after `from`: how long the device went
 * without an acknowledgement within it (per protocol), and for each protocol the first message
 * stored after `from` — when the device first sent it, after how many attempts the gateway
 * acknowledged it, when the gateway received the copy stored and when processing stored it. A
 * message acknowledged early and stored late waited in the broker or processing; one acknowledged
 * late waited on the way from the device to the broker's stream.
 */
function pauseSegments(messages: readonly DeviceMessage[], stored: readonly StoredTelemetryRecord[], from: number, pauseMs: number): string {
  const at = (t: number | undefined) => (t === undefined ? '-' : `${((t - from) / 1000).toFixed(1)}`);
  const byId = new Map(messages.map((m) => [m.messageId, m]));
  const after = stored.filter((r) => Date.parse(r.storedAt) > from).sort((a, b) => Date.parse(a.storedAt) - Date.parse(b.storedAt));
  const firsts = (['mqtt', 'http'] as const).map((via) => {
    const row = after.find((r) => byId.get(r.messageId)?.via === via);
    const m = row && byId.get(row.messageId);
    return !row || !m ? `${via}: none` : `${via} ${m.seq}: sent ${at(m.firstSentAt)}, ${m.attempts} attempt(s), acknowledged ${at(m.ackedAt)}, received ${at(Date.parse(row.receivedAt))}, stored ${at(Date.parse(row.storedAt))}`;
  });
  const to = from + pauseMs;
  const gap = (via?: DeviceProtocol) => (longestAckGapMs(messages, from, to, via) / 1000).toFixed(1);
  return `in the pause the device went at most ${gap()} s without an acknowledgement (MQTT ${gap('mqtt')}, HTTP ${gap('http')}); first stored after its start (s after it): ${firsts.join('; ')}`;
}

/**
 * What each pod of the instance logged since `since` (Patroni's, PostgreSQL's and the components'
 * lines) — and, for a container that restarted, its previous run's last lines — for whoever reads
 * a long pause.
 */
async function printInstanceLogs(since: Date): Promise<void> {
  type PodSpec = KubeObject & { spec?: { containers?: Array<{ name: string }> }; status?: { containerStatuses?: Array<{ name: string; restartCount?: number }> } };
  const read = (pod: string, query: Record<string, string | number | boolean>) =>
    env.client
      .raw<unknown>({ method: 'GET', path: `/api/v1/namespaces/${namespace}/pods/${pod}/log`, query })
      .then((log) => (typeof log === 'string' ? log : JSON.stringify(log)))
      .catch((err: unknown) => String(err));
  for (const pod of (await env.client.list<PodSpec>(Kinds.Pod, { namespace })).items) {
    for (const container of pod.spec?.containers ?? []) {
      const restarts = pod.status?.containerStatuses?.find((c) => c.name === container.name)?.restartCount ?? 0;
      if (restarts > 0) console.log(`--- ${pod.metadata.name}/${container.name} before its last restart (${restarts} in all)\n${await read(pod.metadata.name!, { container: container.name, previous: true, tailLines: 40, timestamps: true })}`);
      console.log(`--- ${pod.metadata.name}/${container.name} since ${since.toISOString()}\n${await read(pod.metadata.name!, { container: container.name, sinceTime: since.toISOString(), timestamps: true })}`);
    }
  }
}

describe('a database of three replicas fails over by itself', { skip }, () => {
  before(async () => {
    ({ landscape, mgr } = await startReferenceLandscape(env, FROM));
    await referenceImages(TO); // the upgrade's images: the same build (cached layers), stamped and tagged 2.5.0
    namespace = `${landscape}-${NAME}`;
    const gateway = { protocols: ['mqtt', 'http'] };
    await env.client.create(IoTServiceV1alpha1Type, iotService(NAME, landscape, { ...realNodeSpec({ gateway, broker: { replicas: 3 }, database: { replicas: 3 } }), version: FROM }));
    // Beside it for its memory alone, gone before the events: the same instance with one broker and one database.
    await env.client.create(IoTServiceV1alpha1Type, iotService(SINGLE, landscape, { ...realNodeSpec({ gateway }), version: FROM }));
    await waitForPhase(env, landscape, NAME, 'Available', 420_000);
    await waitForPhase(env, landscape, SINGLE, 'Available', 420_000);
    for (const name of [NAME, SINGLE]) console.log(`database failover: memory of ${name} once Available: ${await startMemory(`${landscape}-${name}`)}`);
    await env.client.delete(IoTServiceV1alpha1Type, SINGLE, landscape);
    await waitFor(`${SINGLE}'s pods gone`, async () => {
      const left = (await env.client.list<Pod>(Kinds.Pod, { namespace: `${landscape}-${SINGLE}` }).catch(() => ({ items: [] }))).items;
      return { done: left.length === 0, value: undefined, seen: left.map((p) => p.metadata.name) };
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    addresses = await deviceServiceAddresses(env, namespace);
  });

  after(() => stopServedLandscape({ env, landscape, mgr }));

  it('runs a primary and two standbys, one synchronous, database-client leading to the primary alone; the count is fixed', async () => {
    const leader = await primary();
    // A standby's Patroni labels its pod on its first round, which may come after the pod is ready.
    await waitFor('three members labelled, one primary', async () => {
      const roles = (await databasePods()).map((p) => p.metadata.labels?.[ROLE_LABEL]).sort();
      return { done: roles.join() === [PRIMARY_ROLE, 'replica', 'replica'].join(), value: undefined, seen: roles };
    }, { timeoutMs: 60_000, intervalMs: 500 });
    const members = await patronictl(leader.metadata.name!, ['list']);
    console.log(members);
    assert.match(members, /Sync Standby/, 'a synchronous standby');
    type Slice = KubeObject & { endpoints?: Array<{ targetRef?: { name?: string } }> };
    const slices = await env.client.list<Slice>(Kinds.EndpointSlice, { namespace, labelSelector: 'kubernetes.io/service-name=database-client' });
    assert.deepEqual(slices.items.flatMap((s) => s.endpoints ?? []).map((e) => e.targetRef?.name), [leader.metadata.name]);
    await assert.rejects(
      env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { database: { replicas: 1 } } }, 'merge'),
      /database\.replicas cannot be changed after creation/,
    );
  });

  it('a planned switchover pauses writes briefly and loses nothing', async () => {
    const pause = await writesThrough('switchover', async () => {
      // With synchronous_mode Patroni hands over to the synchronous standby alone: it picks it, and
      // refuses while there is none (as after the failover above, until the standbys follow the
      // new timeline).
      const leader = await primary();
      await standbysStreaming(leader);
      console.log(await patronictl(leader.metadata.name!, ['switchover', '--leader', leader.metadata.name!, '--force']));
      assert.notEqual((await primary(leader)).metadata.name, leader.metadata.name, 'a standby promoted');
    });
    assert.ok(pause <= PLANNED_PAUSE_MS, `writes paused ${pause} ms`);
  });

  it('the primary SIGKILLed: Patroni restores a primary, writes resume, every acknowledged message stored once; the gateway stays Ready throughout', async () => {
    // The gateway's readiness does not follow core's (which follows the database's): devices are
    // never refused a connection because the database fails over.
    const gatewayUnready: string[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const gateways = (await env.client.list<Pod & { status?: { conditions?: Array<{ type: string; status: string }> } }>(Kinds.Pod, { namespace, labelSelector: 'app.kubernetes.io/component=gateway' })).items;
        if (!gateways.some((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))) gatewayUnready.push(new Date().toISOString());
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    })();
    let pause: number;
    try {
      pause = await writesThrough('primary SIGKILLed', async () => {
        const leader = await primary();
        await sigkillContainer(env, leader);
        const next = await primary(leader);
        const how = next.metadata.name === leader.metadata.name ? 'restarted and still holding the leader lock, it is primary again' : `${next.metadata.name} promoted`;
        console.log(`database failover: ${leader.metadata.name} SIGKILLed; ${how}`);
      });
    } finally {
      sampling = false;
      await sampler;
    }
    assert.ok(pause <= SIGKILL_PAUSE_MS, `writes paused ${pause} ms`);
    assert.deepEqual(gatewayUnready, [], 'no gateway pod Ready at these moments');
  });

  it('a version upgrade replaces the database standbys first, then the primary after a switchover, and the brokers one at a time; writes resume, nothing lost', async () => {
    /** Each original database pod (by UID) once seen deleted: the order they went in, and which pod was labelled primary then. */
    const replaced: Array<{ name: string; wasPrimary: boolean; primaryThen: string | undefined }> = [];
    /** The most brokers seen away or not ready at once. */
    let brokersDown = 0;
    /** Each pod's image tag, readiness and deletion as they changed. */
    const states = new Map<string, string>();
    const timeline: string[] = [];
    const pause = await writesThrough(`upgrade ${FROM} → ${TO}`, async () => {
      const leader = await primary();
      const original = new Map((await databasePods()).map((p) => [p.metadata.uid!, p]));
      const started = Date.now();
      await env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { version: TO } }, 'merge');
      await waitFor(`every pod on ${TO} and ready`, async () => {
        const all = (await env.client.list<Pod>(Kinds.Pod, { namespace })).items;
        const pods = all.filter((p) => p.metadata.labels?.['app.kubernetes.io/component'] === 'database');
        const primaryThen = pods.find((p) => !p.metadata.deletionTimestamp && p.metadata.labels?.[ROLE_LABEL] === PRIMARY_ROLE)?.metadata.name;
        for (const [uid, pod] of original) {
          if (pods.some((p) => p.metadata.uid === uid && !p.metadata.deletionTimestamp)) continue;
          replaced.push({ name: pod.metadata.name!, wasPrimary: uid === leader.metadata.uid, primaryThen });
          original.delete(uid);
        }
        for (const p of all) {
          const state = `${p.spec?.containers?.[0]?.image?.split(':').at(-1)}${p.status?.containerStatuses?.every((c) => c.ready) ? ' ready' : ''}${p.metadata.deletionTimestamp ? ' deleting' : ''}`;
          if (states.get(p.metadata.name!) !== state) timeline.push(`${new Date().toISOString().slice(11, 23)} ${p.metadata.name} ${state}`);
          states.set(p.metadata.name!, state);
        }
        for (const name of states.keys()) {
          if (all.some((p) => p.metadata.name === name)) continue;
          timeline.push(`${new Date().toISOString().slice(11, 23)} ${name} gone`);
          states.delete(name);
        }
        const live = all.filter((p) => !p.metadata.deletionTimestamp && p.status?.containerStatuses?.every((c) => c.ready));
        brokersDown = Math.max(brokersDown, 3 - live.filter((p) => p.metadata.labels?.['app.kubernetes.io/component'] === 'broker').length);
        const upgraded = COMPONENTS.map((c) => live.filter((p) => p.metadata.labels?.['app.kubernetes.io/component'] === c && p.spec?.containers?.[0]?.image?.endsWith(`/iot-${c}:${TO}`)).length);
        const expected: number[] = COMPONENTS.map((c) => (c === 'broker' || c === 'database' ? 3 : 1));
        const count = expected.reduce((a, b) => a + b);
        return { done: original.size === 0 && upgraded.join() === expected.join() && live.length === count && all.length === count, value: undefined, seen: all.map((p) => `${p.metadata.name} ${p.spec?.containers?.[0]?.image?.split(':').at(-1)} ${p.metadata.labels?.[ROLE_LABEL] ?? ''} ready=${p.status?.containerStatuses?.every((c) => c.ready)}${p.metadata.deletionTimestamp ? ' deleting' : ''}`) };
      }, { timeoutMs: 600_000, intervalMs: 250 });
      console.log(`database failover: the upgrade's pods as seen every 250 ms: ${timeline.join(', ')}`);
      console.log(`database failover: upgraded to ${TO} in ${((Date.now() - started) / 1000).toFixed(0)} s; the database rolled in this order: ${replaced.map((r) => `${r.name} (${r.wasPrimary ? 'the primary' : 'a standby'}; ${r.primaryThen} primary when it was deleted)`).join(', ')}; at most ${brokersDown} broker(s) away at once`);
    });
    assert.deepEqual(replaced.map((r) => r.wasPrimary), [false, false, true], 'both standbys replaced before the primary');
    const former = replaced[2]!;
    assert.ok(former.primaryThen && former.primaryThen !== former.name, `another pod was primary when ${former.name} was deleted (${former.primaryThen}): Patroni had switched over`);
    assert.equal(brokersDown, 1, 'the brokers replaced one at a time');
    assert.ok(pause <= PLANNED_PAUSE_MS, `writes paused ${pause} ms`);
  });

  it("a drain's evictions take one database pod at a time (its PodDisruptionBudget refuses a second meanwhile); writes resume, nothing lost", async () => {
    const evict = (pod: Pod) =>
      env.client.raw({
        method: 'POST',
        path: `/api/v1/namespaces/${namespace}/pods/${pod.metadata.name}/eviction`,
        body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod.metadata.name, namespace } },
      });
    const pause = await writesThrough('evictions', async () => {
      // As from a healthy cluster: a drain waits for the budget only, this also for replication.
      const leader = await primary();
      await standbysStreaming(leader);
      const standby = (await databasePods()).find((p) => p.metadata.name !== leader.metadata.name)!;
      console.log(`database failover: ${new Date().toISOString()} evicting the primary ${leader.metadata.name}`);
      await evict(leader);
      await assert.rejects(evict(standby), (err: unknown) => {
        assert.ok(err instanceof ApiError && err.code === 429, `a second eviction refused with 429: ${String(err)}`);
        assert.match(err.message, /disruption budget/);
        return true;
      });
      // The evicted pod back and ready: the budget lets the next eviction through.
      await waitFor('three ready database pods again', async () => {
        const pods = await databasePods();
        return { done: pods.length === 3 && pods.every((p) => p.status?.containerStatuses?.[0]?.ready), value: undefined, seen: pods.map((p) => p.metadata.name) };
      }, { timeoutMs: 180_000, intervalMs: 500 });
      await standbysStreaming(await primary());
      await waitFor('the budget to allow a disruption again', async () => {
        try {
          await evict(standby);
          console.log(`database failover: ${new Date().toISOString()} evicted the standby ${standby.metadata.name}`);
          return { done: true, value: undefined };
        } catch (err) {
          if (err instanceof ApiError && err.code === 429) return { done: false, value: undefined, seen: err.message };
          throw err;
        }
      }, { timeoutMs: 60_000, intervalMs: 1000 });
      await primary();
    });
    assert.ok(pause <= PLANNED_PAUSE_MS, `writes paused ${pause} ms`);
  });
});
