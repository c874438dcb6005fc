/**
 * End-to-end tests of the Kubernetes controller sharder run by the local cluster
 * (cluster up with CLUSTER_SHARDER=1, which localTestEnv's up starts unless it runs), speaking
 * the sharding protocol to it with plain objects, as a shard written in any language would
 * (docs/implement-sharding.md upstream): a ControllerRing of ConfigMaps in a namespace of this
 * run, and shard Leases renewed by the test.
 *
 * - ConfigMaps get their shard's label at creation (the sharder's webhook, called by our API
 *   server at https://127.0.0.1:<port> with the CA bundle made by cluster/parts/sharder);
 * - a second shard: the sharder puts the drain label on part of the first shard's objects;
 *   removing drain and shard labels in one patch has the webhook assign the new shard;
 * - a shard whose Lease is not renewed: the sharder takes the Lease over one lease duration
 *   after it expired and moves its objects back to the remaining shard;
 * - deleting the ControllerRing removes its MutatingWebhookConfiguration.
 * Then, on a cluster of its own (CLUSTER_NAME=sharder-e2e, created and deleted here): a killed
 * sharder is started again by a plain up on the same ports, ports differ from the default
 * cluster's sharder, and down leaves no sharder process.
 *
 *   node --import tsx --test cluster/test/sharder.e2e.test.ts
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { customResource, isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '../src/index.ts';

process.env.CLUSTER_SHARDER = '1'; // cluster up (run by localTestEnv) starts the sharder unless it runs

const run = promisify(execFile);
const clusterDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const kwokWorkdir = process.env.KWOK_WORKDIR ?? path.join(os.homedir(), '.kwok');

const ControllerRingType = customResource('sharding.timebertt.dev', 'v1alpha1', 'ControllerRing', 'controllerrings', false);
const WebhookConfigType = customResource('admissionregistration.k8s.io', 'v1', 'MutatingWebhookConfiguration', 'mutatingwebhookconfigurations', false);
const RING_LABEL = 'alpha.sharding.timebertt.dev/controllerring';
const STATE_LABEL = 'alpha.sharding.timebertt.dev/state';
/** The shard Leases' durations: shard-a as a real shard would; shard-b short, to see it expire. */
const DURATION_A = 15;
const DURATION_B = 6;
const OBJECTS = 16;

/** A Lease's microtime (six fractional digits, as the API server writes them). */
const microNow = (): string => new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

interface Labelled extends KubeObject {
  metadata: KubeObject['metadata'] & { labels?: Record<string, string> };
}

let env: TestEnv;
let ns: string;
let ring: string;
let shardLabel: string;
let drainLabel: string;
const renewers = new Map<string, ReturnType<typeof setInterval>>();
const lastRenew = new Map<string, number>();

async function renew(name: string): Promise<void> {
  await env.client.patch(Kinds.Lease, name, ns, { spec: { renewTime: microNow() } });
  lastRenew.set(name, Date.now());
}

/** Creates a shard Lease of the ring held by itself and renews it every 2 s until stopRenewing. */
async function startShard(name: string, durationSeconds: number): Promise<void> {
  const now = microNow();
  await env.client.create(Kinds.Lease, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace: ns, labels: { [RING_LABEL]: ring } },
    spec: { holderIdentity: name, leaseDurationSeconds: durationSeconds, acquireTime: now, renewTime: now },
  });
  lastRenew.set(name, Date.now());
  renewers.set(
    name,
    setInterval(() => void renew(name).catch(() => undefined), 2_000),
  );
}

function stopRenewing(name: string): void {
  clearInterval(renewers.get(name));
  renewers.delete(name);
}

async function lease(name: string): Promise<Labelled & { spec: { holderIdentity?: string; leaseDurationSeconds?: number } }> {
  return env.client.get(Kinds.Lease, name, ns);
}

async function objects(): Promise<Labelled[]> {
  return (await env.client.list<Labelled>(Kinds.ConfigMap, { namespace: ns, labelSelector: 'sharder-e2e=object' })).items;
}

const shardOf = (o: Labelled): string | undefined => o.metadata.labels?.[shardLabel];
const drained = (o: Labelled): boolean => o.metadata.labels?.[drainLabel] !== undefined;
const summary = (items: Labelled[]): string[] => items.map((o) => `${o.metadata.name}=${shardOf(o) ?? '-'}${drained(o) ? '/drain' : ''}`);

async function ringStatus(): Promise<{ shards?: number; availableShards?: number; conditions?: Array<{ type: string; status: string }> }> {
  return ((await env.client.get(ControllerRingType, ring)) as KubeObject & { status?: object }).status ?? {};
}

describe('the controller sharder on the local cluster', () => {
  before(async () => {
    env = await localTestEnv();
    ns = await env.namespace('sharder-e2e');
    ring = `e2e-${randomBytes(3).toString('hex')}`;
    shardLabel = `shard.alpha.sharding.timebertt.dev/${ring}`;
    drainLabel = `drain.alpha.sharding.timebertt.dev/${ring}`;
    await env.client.create(ControllerRingType, {
      apiVersion: 'sharding.timebertt.dev/v1alpha1',
      kind: 'ControllerRing',
      metadata: { name: ring },
      spec: { resources: [{ group: '', resource: 'configmaps' }], namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } },
    });
  });

  after(async () => {
    for (const name of [...renewers.keys()]) stopRenewing(name);
    await env?.client.delete(ControllerRingType, ring).catch(() => undefined);
    await env?.cleanup();
  });

  test('the ring gets a webhook on 127.0.0.1 with our CA; new objects get the shard label at creation', async () => {
    const webhook = await waitFor(`the MutatingWebhookConfiguration of ring ${ring}`, async () => {
      const mwc = (await env.client.get(WebhookConfigType, `controllerring-${ring}`)) as KubeObject & { webhooks: Array<{ clientConfig: { url?: string; caBundle?: string }; failurePolicy: string }> };
      return { done: true, value: mwc.webhooks[0]! };
    }, { timeoutMs: 15_000 });
    assert.match(webhook.clientConfig.url ?? '', new RegExp(`^https://127\\.0\\.0\\.1:\\d+/webhooks/sharder/controllerring/${ring}$`));
    assert.ok(webhook.clientConfig.caBundle, 'the webhook carries a CA bundle');

    await startShard('shard-a', DURATION_A);
    await waitFor('shard-a to be ready in the ring', async () => {
      const [l, status] = [await lease('shard-a'), await ringStatus()];
      return { done: l.metadata.labels?.[STATE_LABEL] === 'ready' && status.availableShards === 1, value: null, seen: { state: l.metadata.labels?.[STATE_LABEL], status } };
    }, { timeoutMs: 15_000 });

    for (let i = 0; i < OBJECTS; i++) {
      const created = await env.client.create<Labelled>(Kinds.ConfigMap, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: ns, labels: { 'sharder-e2e': 'object' } }, data: { i: String(i) } });
      assert.equal(shardOf(created), 'shard-a', `cm-${i} is labelled in the create response itself (admission), not later`);
    }
    const status = await ringStatus();
    assert.equal(status.conditions?.find((c) => c.type === 'Ready')?.status, 'True', JSON.stringify(status));
  });

  test('a second shard: part of shard-a’s objects get the drain label; dropping drain and shard labels gets shard-b from the webhook', async () => {
    const t0 = Date.now();
    await startShard('shard-b', DURATION_B);
    // The sharder drains all it moves in one pass: wait until the set has stayed the same for 1 s.
    let previous = '';
    let stableSince = 0;
    const toMove = await waitFor('the sharder to drain part of shard-a’s objects', async () => {
      const items = await objects();
      const now = summary(items).join(' ');
      if (now !== previous) [previous, stableSince] = [now, Date.now()];
      const draining = items.filter(drained);
      return { done: draining.length > 0 && Date.now() - stableSince >= 1_000, value: draining, seen: summary(items) };
    }, { timeoutMs: 15_000, intervalMs: 200 });
    const firstDrainMs = stableSince - t0;
    assert.ok(toMove.length >= 1 && toMove.length < OBJECTS, `some but not all of ${OBJECTS} objects are drained (${toMove.length}, within ${firstDrainMs} ms)`);
    for (const o of toMove) assert.equal(shardOf(o), 'shard-a', `${o.metadata.name} keeps its shard label while draining`);
    assert.equal((await ringStatus()).availableShards, 2);

    // What shard-a does for each drained object: both labels off in one patch.
    for (const o of toMove) {
      const patched = await env.client.patch<Labelled>(Kinds.ConfigMap, o.metadata.name!, ns, { metadata: { labels: { [drainLabel]: null, [shardLabel]: null } } });
      assert.equal(shardOf(patched), 'shard-b', `${o.metadata.name}: the webhook assigns the new shard in the same request`);
      assert.equal(drained(patched), false);
    }
    const items = await objects();
    assert.equal(items.filter((o) => shardOf(o) === 'shard-b').length, toMove.length, summary(items).join(' '));
    assert.equal(items.filter((o) => shardOf(o) === 'shard-a').length, OBJECTS - toMove.length, summary(items).join(' '));
    assert.equal(items.filter(drained).length, 0, 'nothing else is drained');
  });

  test('shard-b stops renewing: the sharder takes its Lease one duration after expiry and moves its objects back to shard-a', async () => {
    stopRenewing('shard-b');
    const movedBack = await waitFor('shard-b’s objects to be back on shard-a', async () => {
      const items = await objects();
      return { done: items.every((o) => shardOf(o) === 'shard-a' && !drained(o)), value: Date.now(), seen: summary(items) };
    }, { timeoutMs: (3 * DURATION_B + 10) * 1000, intervalMs: 200 });
    const afterRenew = (movedBack - lastRenew.get('shard-b')!) / 1000;
    // Dead = not renewed for two durations (expired, then a duration more); a little margin for polling.
    assert.ok(afterRenew >= 2 * DURATION_B - 1, `objects moved ${afterRenew.toFixed(1)} s after the last renewal: not before the shard was dead`);
    const l = await lease('shard-b');
    assert.equal(l.metadata.labels?.[STATE_LABEL], 'dead');
    assert.notEqual(l.spec.holderIdentity, 'shard-b', 'the sharder holds the dead shard’s Lease');
    assert.equal((await ringStatus()).availableShards, 1);
    assert.equal((await lease('shard-a')).metadata.labels?.[STATE_LABEL], 'ready');
  });

  test('deleting the ControllerRing removes its webhook configuration', async () => {
    stopRenewing('shard-a');
    await env.client.delete(ControllerRingType, ring);
    await waitFor(`MutatingWebhookConfiguration controllerring-${ring} to be gone`, async () => {
      try {
        await env.client.get(WebhookConfigType, `controllerring-${ring}`);
        return { done: false, value: null, seen: 'still there' };
      } catch (err) {
        if (isNotFound(err)) return { done: true, value: null };
        throw err;
      }
    }, { timeoutMs: 20_000 });
  });
});

describe('the sharder as a process of a cluster of its own', () => {
  const clusterName = 'sharder-e2e';
  const workdir = path.join(kwokWorkdir, 'clusters', clusterName);
  const pidFile = path.join(workdir, 'pids', 'sharder.pid');

  async function cluster(command: string, args: string[] = []): Promise<{ stdout: string; stderr: string; code: number }> {
    try {
      const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', path.join(clusterDir, 'cli', 'cluster.ts'), command, ...args], {
        env: { ...process.env, CLUSTER_NAME: clusterName, CLUSTER_SHARDER: '', CLUSTER_OLM: '', CLUSTER_REAL_NODE: '0' },
        maxBuffer: 16 * 1024 * 1024,
        timeout: 10 * 60_000,
      });
      return { stdout, stderr, code: 0 };
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; code?: number };
      return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: typeof e.code === 'number' ? e.code : -1 };
    }
  }
  const pid = (): number => Number(readFileSync(pidFile, 'utf8').trim());
  const ports = (dir: string): string => readFileSync(path.join(dir, 'sharder', 'ports'), 'utf8');

  after(async () => {
    await cluster('down');
  });

  test('up --sharder runs it on ports of its own; a killed sharder is started again by a plain up; down leaves none', async () => {
    const up = await cluster('up', ['--sharder']);
    assert.equal(up.code, 0, up.stderr.slice(-2000));
    const first = pid();
    assert.ok(alive(first), `the sharder (pid ${first}) runs`);
    const own = ports(workdir);
    assert.match(own, /^webhook=\d+\nhealth=\d+\nmetrics=\d+\n$/);
    const defaultDir = path.join(kwokWorkdir, 'clusters', process.env.CLUSTER_NAME ?? 'iot-operator');
    if (existsSync(path.join(defaultDir, 'sharder', 'ports'))) {
      const other = new Set(ports(defaultDir).match(/\d+/g));
      for (const p of own.match(/\d+/g)!) assert.ok(!other.has(p), `port ${p} is not the default cluster's sharder's too`);
    }
    const status = await cluster('status');
    assert.equal(status.code, 0, status.stdout);
    assert.match(status.stdout, new RegExp(`^  sharder +pid ${first} .*webhook https://127\\.0\\.0\\.1:${/webhook=(\d+)/.exec(own)![1]}, `, 'm'));

    process.kill(first, 'SIGKILL');
    await until(() => !alive(first), 'the killed sharder to be gone');
    const unhealthy = await cluster('status');
    assert.equal(unhealthy.code, 1, 'unhealthy while the sharder should run and does not');
    assert.match(unhealthy.stdout, /^  sharder +NOT RUNNING$/m);
    const again = await cluster('up'); // no --sharder: the cluster remembers it has one
    assert.equal(again.code, 0, again.stderr.slice(-2000));
    const second = pid();
    assert.notEqual(second, first);
    assert.ok(alive(second), 'a new sharder runs');
    assert.equal(ports(workdir), own, 'on the same ports');
    assert.ok(existsSync(path.join(workdir, 'logs', 'sharder.previous.log')), 'the previous log is kept');

    const down = await cluster('down');
    assert.equal(down.code, 0, down.stderr.slice(-2000));
    await until(() => !alive(second), `the sharder (pid ${second}) to be stopped`);
    assert.equal(existsSync(workdir), false, 'the cluster’s directory is gone');
  });
});

/** True while the process exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
