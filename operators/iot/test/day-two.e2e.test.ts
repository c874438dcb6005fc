/**
 * Day two on the real node: nothing is lost across pod deletions and a version upgrade.
 *
 * An IoTService of the reference images (built and pushed by scripts/iot-service-images.ts,
 * placed on the real node, broker and database on the default volumes: no storage fields) serves a device simulated on this
 * machine that publishes without pause over MQTT (QoS 1) and HTTP, each message under its own id
 * and sent again until the gateway acknowledged it (simulator `startContinuousDevice`), through
 * the gateway's and core's Services. Meanwhile the database pod is deleted, then the broker pod,
 * then the broker pod again with processing stopped (`spec.processing.replicas` 0, so messages wait
 * in the broker's queue, which must survive on its volume), then a gateway pod — each time the
 * next step waits until the instance is steadily Available again — and then `spec.version` goes
 * from 2.4.1 to 2.5.0. Then it proves what a user relies on:
 * - every message acknowledged to the device is in the database exactly once: the records core
 *   lists for the device (all of them, page by page) carry exactly the acknowledged ids, one record
 *   per id, each holding the payload sent under it;
 * - what was stored before the upgrade is still there after it;
 * - every component reports 2.5.0 (gateway, core and processing on /healthz, every pod's image),
 *   and the database and the broker ran 2.5.0 before any gateway, core or processing pod of 2.5.0
 *   was created (the operator rolls the servers before their clients);
 * - while pods restart the instance is reported Processing, never Failed.
 * How long each pod took to come back, the device's longest wait and gap, the messages in flight
 * at each deletion and where each ended, and how long the upgrade took are printed (figures for
 * docs/in-cluster.md), never asserted. Reported as not run where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, onRealNode, realNode, realNodeContainerd, registryImageId, registryPullSecret } from '@iot-operator/local-cluster';
import {
  inFlightAt,
  longestAckGapMs,
  longestWaitMs,
  readAllTelemetry,
  registerDevice,
  startContinuousDevice,
  type ContinuousDevice,
  type DeviceMessage,
  type ServiceAddresses,
  type StoredTelemetryRecord,
} from '@iot-operator/iot-service/simulator';
import { COMPONENTS, type ComponentName, type IoTServiceStatus } from '../src/api/iotservice.ts';
import { HOST_ON_POD_NETWORK, getIoT, installIoTCrd, iotService, referenceImages, startOperator, stopServedLandscape, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const FROM = '2.4.1';
const TO = '2.5.0';
const INSTANCE = 'plant';
/** The device's pause between two messages of one protocol: about 40 messages a second each, so the 2 cores stay shared. */
const DEVICE_INTERVAL_MS = 20;
/** How long the device runs undisturbed before the first step, and how long the instance must stay Available after each. */
const STEADY_MS = 5_000;

type Pod = KubeObject & {
  spec?: { containers?: Array<{ name: string; image?: string }> };
  status?: { podIP?: string; phase?: string; conditions?: Array<{ type: string; status: string }> };
};

let landscape = '';
let namespace = '';
let mgr: Manager | undefined;
let device: ContinuousDevice | undefined;

const isReady = (p: Pod) => !p.metadata.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function pods(component: ComponentName): Promise<Pod[]> {
  const { items } = await env.client.list<Pod>(Kinds.Pod, { namespace, labelSelector: `app.kubernetes.io/component=${component}` });
  return items;
}

async function clusterIp(service: string): Promise<string> {
  return ((await env.client.get(Kinds.Service, service, namespace)) as KubeObject & { spec: { clusterIP: string } }).spec.clusterIP;
}

async function apiToken(): Promise<string> {
  const secret = (await env.client.get(Kinds.Secret, 'iot-credentials', namespace)) as KubeObject & { data: Record<string, string> };
  return Buffer.from(secret.data['api-token'] ?? '', 'base64').toString('utf8');
}

/**
 * Makes the real node pull `images` again: pods pull with IfNotPresent, and the node may hold an
 * older build under the same tag (every test builds the versions from the working tree).
 */
async function forgetOnRealNode(images: readonly string[]): Promise<void> {
  await run('ctr', ['--address', realNodeContainerd(env), '-n', 'k8s.io', 'images', 'rm', ...images]).catch(() => undefined);
}

/** Every pod of the instance runs `version`, pulled from the registry as it serves that tag now. */
async function assertRunning(version: string): Promise<void> {
  for (const component of COMPONENTS) {
    for (const pod of await pods(component)) {
      if (pod.metadata.deletionTimestamp) continue;
      const image = pod.spec?.containers?.[0]?.image ?? '';
      assert.ok(image.endsWith(`/iot-${component}:${version}`), `${pod.metadata.name} runs ${image}`);
      const status = (pod.status as { containerStatuses?: Array<{ imageID?: string }> } | undefined)?.containerStatuses?.[0];
      assert.equal(status?.imageID, await registryImageId(env, image), `${pod.metadata.name} runs the image just built`);
    }
  }
}

/** What the instance reported while the test ran: each distinct phase and Ready message, with when it was first seen. */
class StatusLog {
  readonly seen: Array<{ at: number; phase: string; reason?: string; message?: string }> = [];
  private readonly stopping = new AbortController();
  private readonly polling: Promise<void>;

  constructor() {
    this.polling = (async () => {
      while (!this.stopping.signal.aborted) {
        const iot = await getIoT(env, landscape, INSTANCE).catch(() => undefined);
        const status = iot?.status as IoTServiceStatus | undefined;
        if (status?.phase) {
          const message = status.conditions?.find((c) => c.type === 'Ready')?.message;
          const last = this.seen.at(-1);
          if (last?.phase !== status.phase || last.message !== message || last.reason !== status.reason) {
            this.seen.push({ at: Date.now(), phase: status.phase, ...(status.reason ? { reason: status.reason } : {}), ...(message ? { message } : {}) });
          }
        }
        await sleep(500, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    })();
  }

  between(from: number, to: number) {
    return this.seen.filter((s) => s.at >= from && s.at <= to);
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.polling;
  }
}

/** One step's figures. */
interface Step {
  name: string;
  startedAt: number;
  /** When the replacement pod was Ready (pod deletions); when the last pod of the new version was (the upgrade). */
  backAt: number;
  /** When the instance was Available again. */
  availableAt: number;
  /** The device's messages sent but not acknowledged when the step began. */
  inFlight: DeviceMessage[];
  note?: string;
}

/**
 * Waits until the instance has been Available (for its current generation) for `STEADY_MS` on
 * end — a component that lost a dependency leaves readiness only some seconds after the pod it
 * depends on came back — and returns when that Available began.
 */
async function availableAgain(timeoutMs = 300_000): Promise<number> {
  let since: number | undefined;
  return waitFor(
    `IoTService ${INSTANCE} to stay Available for ${STEADY_MS} ms`,
    async () => {
      const iot = await getIoT(env, landscape, INSTANCE);
      const available = iot?.status?.phase === 'Available' && iot.status.observedGeneration === iot.metadata.generation;
      if (!available) since = undefined;
      else since ??= Date.now();
      return { done: since !== undefined && Date.now() - since >= STEADY_MS, value: since!, seen: iot?.status };
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/**
 * Deletes pod `name` (the kubelet sends SIGTERM, its controller makes a replacement) and waits
 * until a replacement of `component` is Ready and the instance steadily Available again.
 */
async function deletePod(component: ComponentName, name: string, note?: string): Promise<Step> {
  const before = (await pods(component)).map((p) => p.metadata.uid);
  const startedAt = Date.now();
  const inFlight = inFlightAt(device!.messages, startedAt);
  await env.client.delete(Kinds.Pod, name, namespace);
  const backAt = await waitFor(
    `a new ${component} pod in place of ${name} to be Ready`,
    async () => {
      const now = await pods(component);
      const fresh = now.filter((p) => !before.includes(p.metadata.uid) && isReady(p));
      return { done: fresh.length > 0, value: Date.now(), seen: now.map((p) => [p.metadata.name, p.metadata.uid, p.status?.phase, isReady(p)]) };
    },
    { timeoutMs: 300_000, intervalMs: 200 },
  );
  const availableAt = await availableAgain();
  return { name: `${component} pod ${name} deleted`, startedAt, backAt, availableAt, inFlight, ...(note ? { note } : {}) };
}

/**
 * The gateway pod that holds the device's MQTT connection (made through the gateway Service's
 * ClusterIP): the connection's reply source in this machine's conntrack table.
 */
async function gatewayOfMqttConnection(gatewayIp: string): Promise<string | undefined> {
  const { stdout } = await run('conntrack', ['-L', '-p', 'tcp', '--orig-dst', gatewayIp, '--dport', '1883', '--state', 'ESTABLISHED']).catch(() => ({ stdout: '' }));
  const podIp = /dport=1883 src=([0-9.]+)/.exec(stdout)?.[1];
  return (await pods('gateway')).find((p) => p.status?.podIP === podIp)?.metadata.name;
}

/** When each pod of the instance was created and became Ready, by component and image tag (server times, seconds). */
interface PodLife {
  name: string;
  component: ComponentName;
  tag: string;
  createdAt: number;
  readyAt?: number;
}

async function podLives(): Promise<PodLife[]> {
  const lives: PodLife[] = [];
  for (const component of COMPONENTS) {
    for (const pod of await pods(component)) {
      const ready = pod.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True') as { lastTransitionTime?: string } | undefined;
      lives.push({
        name: pod.metadata.name!,
        component,
        tag: (pod.spec?.containers?.[0]?.image ?? '').split(':').at(-1) ?? '',
        createdAt: Date.parse(pod.metadata.creationTimestamp ?? ''),
        ...(ready?.lastTransitionTime ? { readyAt: Date.parse(ready.lastTransitionTime) } : {}),
      });
    }
  }
  return lives;
}

/** /healthz of a pod of gateway, core or processing: the version it reports. */
async function reportedVersion(pod: Pod): Promise<string> {
  const response = await fetch(`http://${pod.status?.podIP}:8081/healthz`, { signal: AbortSignal.timeout(5_000) });
  return ((await response.json()) as { version: string }).version;
}

/** The step's figures, as printed and put in docs/in-cluster.md. */
function describeStep(step: Step, messages: readonly DeviceMessage[], stored: ReadonlyMap<string, StoredTelemetryRecord>, statuses: StatusLog): string[] {
  const window: [number, number] = [step.startedAt, step.availableAt];
  const storedAt = (m: DeviceMessage) => Date.parse(stored.get(m.messageId)?.storedAt ?? '');
  const after = (at: number) => `${at < step.startedAt ? '-' : '+'}${seconds(Math.abs(at - step.startedAt))}`;
  const lines = [
    `${step.name}${step.note ? ` (${step.note})` : ''}: ${step.name.startsWith('upgrade') ? 'last new pod Ready' : 'replacement Ready'} ${after(step.backAt)}, instance Available ${after(step.availableAt)}; ` +
      `device: longest wait ${seconds(longestWaitMs(messages, ...window))}, longest gap without an acknowledgement ${seconds(longestAckGapMs(messages, ...window))} ` +
      `(MQTT ${seconds(longestAckGapMs(messages, ...window, 'mqtt'))}, HTTP ${seconds(longestAckGapMs(messages, ...window, 'http'))}), ` +
      `${messages.filter((m) => m.firstSentAt <= window[1] && (m.ackedAt ?? Infinity) >= window[0] && m.attempts > 1).length} messages sent more than once`,
    `  in flight at the device: ${step.inFlight.length}` +
      step.inFlight.map((m) => `; ${m.via} ${m.messageId.split('-').at(-1)} acknowledged ${after(m.ackedAt!)} after ${m.attempts} attempt(s), stored ${after(storedAt(m))}`).join(''),
  ];
  // Acknowledged to the device before the step began, stored after: in flight inside the service.
  const inService = messages.filter((m) => m.ackedAt !== undefined && m.ackedAt <= step.startedAt && storedAt(m) > step.startedAt);
  const latest = inService.reduce((max, m) => Math.max(max, storedAt(m)), step.startedAt);
  lines.push(`  in flight inside the service (acknowledged before, stored after): ${inService.length}, all stored once, the last ${after(latest)}`);
  const errors = new Map<string, number>();
  for (const f of device!.failures) {
    if (f.at < window[0] || f.at > window[1]) continue;
    const kind = `${f.via}: ${f.error.replace(/[0-9a-f-]{36}|day-two-\d+-\w+-\d+|\d+(\.\d+)* ms/g, '…')}`;
    errors.set(kind, (errors.get(kind) ?? 0) + 1);
  }
  lines.push(`  failed attempts: ${[...errors].map(([kind, n]) => `${n} × ${kind}`).join('; ') || 'none'}`);
  const reported = statuses.between(step.startedAt, step.availableAt + 1_000).map((s) => `${s.phase}${s.reason ? ` (${s.reason})` : s.message ? ` (${s.message})` : ''}`);
  lines.push(`  reported: ${reported.join(' → ') || 'no change seen'}`);
  return lines;
}

describe('day two on the real node: nothing lost across pod deletions and a version upgrade', { skip }, () => {
  let registry = '';

  before(async () => {
    for (const version of [FROM, TO]) registry = await referenceImages(version);
    await installIoTCrd(env);
    landscape = await env.namespace('ls');
    namespace = `${landscape}-${INSTANCE}`;
    await registryPullSecret(env, landscape, 'image-pull-secret');
    await forgetOnRealNode([FROM, TO].flatMap((version) => COMPONENTS.map((c) => `${registry}/iot-${c}:${version}`)));
    mgr = await startOperator(env, landscape, { defaultRegistry: registry });
  });

  after(async () => {
    await device?.stop(5_000).catch(() => undefined);
    await stopServedLandscape({ env, landscape, mgr });
  });

  it('every acknowledged message is stored exactly once through the deletion of the database, broker and gateway pods and the upgrade 2.4.1 → 2.5.0', { timeout: 40 * 60_000 }, async () => {
    const onNode = { ...onRealNode, replicas: 1 };
    const spec = Object.fromEntries(COMPONENTS.map((c) => [c, onNode]));
    await env.client.create(
      IoTServiceV1alpha1Type,
      iotService(INSTANCE, landscape, {
        ...spec,
        version: FROM,
        gateway: { ...onNode, replicas: 2, protocols: ['mqtt', 'http'], deviceSources: [HOST_ON_POD_NETWORK] },
      } as never),
    );
    await waitForPhase(env, landscape, INSTANCE, 'Available', 600_000);
    await assertRunning(FROM);
    const statuses = new StatusLog();
    try {
      const addresses: ServiceAddresses = {
        coreUrl: `http://${await clusterIp('core')}:8080`,
        gatewayHttpUrl: `http://${await clusterIp('gateway')}:8080`,
        gatewayMqttUrl: `mqtt://${await clusterIp('gateway')}:1883`,
        apiToken: await apiToken(),
      };
      const credentials = await registerDevice(addresses, `day-two-${Date.now()}`);
      const started = Date.now();
      // A refusal retrying cannot fix (wrong credentials, say) ends the device; stop() then rejects with it.
      device = startContinuousDevice(addresses, credentials, { intervalMs: DEVICE_INTERVAL_MS, retryDelayMs: 250, attemptTimeoutMs: 10_000 });
      device.done.catch(() => undefined);
      await sleep(STEADY_MS);

      const steps: Step[] = [];
      steps.push(await deletePod('database', 'database-0'));
      steps.push(await deletePod('broker', 'broker-0'));
      // The broker's queue on its volume: with processing stopped, what the device sends waits at
      // the broker for processing's session; the broker pod is deleted with that queue in it.
      await env.client.patch(IoTServiceV1alpha1Type, INSTANCE, landscape, { spec: { processing: { replicas: 0 } } }, 'merge');
      await waitFor('the processing pod to be gone', async () => ({ done: (await pods('processing')).length === 0, value: undefined }), { timeoutMs: 120_000 });
      await sleep(STEADY_MS);
      const queued = await deletePod('broker', 'broker-0', 'processing stopped: its messages queued at the broker');
      await env.client.patch(IoTServiceV1alpha1Type, INSTANCE, landscape, { spec: { processing: { replicas: 1 } } }, 'merge');
      await waitForPhase(env, landscape, INSTANCE, 'Available', 300_000);
      queued.availableAt = await availableAgain();
      steps.push(queued);
      const holder = await gatewayOfMqttConnection(new URL(addresses.gatewayMqttUrl).hostname);
      const gatewayPod = holder ?? (await pods('gateway')).find(isReady)!.metadata.name!;
      steps.push(await deletePod('gateway', gatewayPod, holder ? "the pod holding the device's MQTT connection" : 'which pod held the MQTT connection was not found'));

      // Everything stored so far must outlive the upgrade as it is.
      const beforeUpgrade = await readAllTelemetry(addresses, credentials.id);
      const upgradeStarted = Date.now();
      const inFlight = inFlightAt(device.messages, upgradeStarted);
      await env.client.patch(IoTServiceV1alpha1Type, INSTANCE, landscape, { spec: { version: TO } }, 'merge');
      await waitForPhase(env, landscape, INSTANCE, 'Available', 900_000);
      const upgradedAt = await availableAgain();
      const lives = await podLives();
      const lastReady = Math.max(...lives.map((l) => l.readyAt ?? 0));
      steps.push({ name: `upgrade ${FROM} → ${TO}`, startedAt: upgradeStarted, backAt: lastReady, availableAt: upgradedAt, inFlight });

      const messages = await device.stop(300_000);
      const stoppedAt = Date.now();

      // Processing may still be writing what the broker holds: read until every acknowledged id is there.
      const acknowledged = new Set(messages.map((m) => m.messageId));
      const records = await waitFor(
        'every acknowledged message to be listed by core',
        async () => {
          const all = await readAllTelemetry(addresses, credentials.id);
          const listed = new Set(all.map((r) => r.messageId));
          const missing = [...acknowledged].filter((id) => !listed.has(id));
          return { done: missing.length === 0, value: all, seen: { listed: all.length, acknowledged: acknowledged.size, missing: missing.slice(0, 20) } };
        },
        { timeoutMs: 300_000, intervalMs: 2_000 },
      );
      await sleep(2_000); // a duplicate written late would be listed now
      const final = await readAllTelemetry(addresses, credentials.id);

      const ids = final.map((r) => r.messageId);
      assert.equal(new Set(ids).size, ids.length, 'core lists each message id once');
      assert.deepEqual([...ids].sort(), [...acknowledged].sort(), 'the stored messages are exactly the acknowledged ones');
      for (const record of final) {
        const sent = messages.find((m) => m.messageId === record.messageId)!;
        assert.deepEqual(
          { via: (record.payload as { via?: string }).via, seq: (record.payload as { seq?: number }).seq },
          { via: sent.via, seq: sent.seq },
          `${record.messageId} holds what was sent under it`,
        );
      }

      const stored = new Map(records.map((r) => [r.messageId, r] as const));
      for (const r of final) stored.set(r.messageId, r);
      const figures = [
        `day two: ${messages.length} messages (${messages.filter((m) => m.via === 'mqtt').length} MQTT, ${messages.filter((m) => m.via === 'http').length} HTTP) in ${seconds(stoppedAt - started)}, ` +
          `${messages.filter((m) => m.attempts > 1).length} sent more than once, ${device.failures.length} failed attempts; all ${final.length} stored once`,
        ...steps.flatMap((step) => describeStep(step, messages, stored, statuses)),
      ];
      for (const line of figures) console.log(line);

      const kept = new Map(final.map((r) => [r.messageId, r] as const));
      for (const record of beforeUpgrade) assert.deepEqual(kept.get(record.messageId), record, `${record.messageId}, stored before the upgrade, is still there as it was`);
      await assertRunning(TO);
      for (const component of ['gateway', 'core', 'processing'] as const) {
        for (const pod of (await pods(component)).filter(isReady)) assert.equal(await reportedVersion(pod), TO, `${pod.metadata.name} reports ${TO}`);
      }
      // The servers before their clients: no gateway, core or processing pod of the new version
      // was created before the database and the broker ran it (server times, whole seconds).
      const statefulReady = Math.max(...lives.filter((l) => l.tag === TO && (l.component === 'broker' || l.component === 'database')).map((l) => l.readyAt ?? Infinity));
      const firstClient = Math.min(...lives.filter((l) => l.tag === TO && l.component !== 'broker' && l.component !== 'database').map((l) => l.createdAt));
      assert.ok(firstClient >= statefulReady, `the Deployments' ${TO} pods were created after database and broker ran ${TO}`);
      console.log(`upgrade: ${lives.map((l) => `${l.name} ${l.tag} created ${seconds(l.createdAt - upgradeStarted)} ready ${l.readyAt ? seconds(l.readyAt - upgradeStarted) : '-'}`).join('; ')}`);
      const failed = statuses.seen.filter((s) => s.phase === 'Failed');
      assert.deepEqual(failed, [], 'the instance was never Failed while pods restarted');
    } finally {
      await statuses.stop();
    }
  });
});
