/**
 * What a device was told is stored is stored, on the real node with the reference images: one
 * instance created without storage fields (broker and database on volumes of the default
 * StorageClass, condition PersistentStorage True), a device publishing over MQTT (QoS 1) and HTTP as
 * fast as it is acknowledged.
 *   - poison: a payload with a NUL character or an unpaired surrogate is refused at the door with
 *     its reason over both protocols; a message that reaches the stream all the same (published
 *     into it directly, as only a component could) is set aside in the database's dead-letter
 *     table — counted in the operator's metric and a DeadLetters Event on the IoTService — and
 *     another device's messages are all stored meanwhile;
 *   - crashes: the processes of broker, processing and database are SIGKILLed through the node's
 *     containerd (as an OOM kill would), one after the other, while the device publishes:
 *     afterwards every acknowledged message is stored exactly once;
 *   - routine changes: a `spec.config` change rolls gateway, core and processing but leaves the
 *     broker's and the database's pods running; the registry and all telemetry are still there;
 *   - back-pressure: with processing scaled to 0 and a 1Mi backlog, the gateway answers 503 with
 *     Retry-After once the backlog is full; the status reports StorageFull, then IngestionStalled
 *     (the operator's stall window shortened to 40 s),
 *     and a real Prometheus fires IoTServiceIngestionStalled from the operator's metrics; all of
 *     it clears once processing is back, and every acknowledged message is stored once;
 *   - with `broker.replicas: 3`, a broker's process SIGKILLed and another broker's pod deleted
 *     under load lose nothing acknowledged; then, on the same instance, a `broker.resources`
 *     change rolls the three brokers one at a time, the next only once the one replaced before
 *     is current (asked every 500 ms: never two brokers at once taken down by the roll and not yet
 *     current again, by nats-server's /healthz on the broker's monitor port or the pod's Ready,
 *     which is that /healthz), and nothing acknowledged meanwhile is lost;
 *   - retention: with `spec.retention` shortened, what is older is deleted and what is newer kept;
 *   - a `database.replicas` or a `broker.replicas` other than 1 or 3, and a change of
 *     `broker.replicas`, are refused with the reason.
 * Reported as not run where the cluster has no real node.
 */
// run-tests: alone among the IoT files: it bounds the brokers' lag while they roll, which another instance's load on the real node would stretch.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { deployPrometheus, localTestEnv, onRealNode, realNode, registryPullSecret, repoRoot } from '@iot-operator/local-cluster';
import {
  HttpStatusError,
  postHttp,
  readAllTelemetry,
  registerDevice,
  startContinuousDevice,
  type ServiceAddresses,
} from '@iot-operator/iot-service/simulator';
import { COMPONENTS, type ComponentName } from '../src/api/iotservice.ts';
import { HOST_ON_POD_NETWORK, assertStoredExactlyOnce, componentPod, sigkillContainer, deviceAddresses, execInPod, getIoT, installIoTCrd, iotService, referenceImages, startOperator, stopServedLandscape, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { PORTS } from '../src/resources/ports.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const VERSION = '2.4.1';
/** This machine's address on the pod network: where the operator serves /metrics to Prometheus and the test. */
const HOST_ADDRESS = HOST_ON_POD_NETWORK.replace('/32', '');
const NAME = 'ingest';

let landscape = '';
let namespace = '';
let mgr: Manager | undefined;
let addresses: ServiceAddresses;
/** The device of the crash test: its messages are minutes old when retention is tried. */
let crashDevice = '';
/** The instance with three brokers, and its namespace and addresses once made. */
const R3 = 'ingest-r3';
let r3 = '';
let r3Addresses: ServiceAddresses;

type Pod = KubeObject & {
  status?: { phase?: string; podIP?: string; conditions?: Array<{ type: string; status: string }>; containerStatuses?: Array<{ containerID?: string; restartCount?: number; ready?: boolean }> };
};

async function runningPod(component: ComponentName): Promise<Pod> {
  const { name } = await componentPod(env, namespace, component);
  return (await env.client.get(Kinds.Pod, name, namespace)) as Pod;
}

/** SIGKILLs the process of `component`'s container through the node's containerd (the pod stays; the kubelet restarts the container). */
async function killProcess(component: ComponentName): Promise<void> {
  const pod = await runningPod(component);
  await sigkillContainer(env, pod);
  await waitFor(`${component}'s container restarted and ready`, async () => {
    const now = (await env.client.get(Kinds.Pod, pod.metadata.name!, namespace)) as Pod;
    const status = now.status?.containerStatuses?.[0];
    const restarted = (status?.restartCount ?? 0) > (pod.status?.containerStatuses?.[0]?.restartCount ?? 0);
    return { done: restarted && status?.ready === true, value: undefined, seen: status };
  }, { timeoutMs: 120_000, intervalMs: 500 });
}

/** The operator's `iotservice_ingestion_dead_letters_total` of this instance; undefined before its first reading. */
async function deadLettersMetric(): Promise<number | undefined> {
  const text = await (await fetch(`http://${HOST_ADDRESS}:${mgr!.httpPort}/metrics`)).text();
  const match = new RegExp(`^iotservice_ingestion_dead_letters_total\\{[^}]*name="${NAME}"[^}]*\\} (\\d+)`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
}

async function sql(query: string): Promise<string> {
  const { name } = await componentPod(env, namespace, 'database');
  return (await execInPod(env, namespace, name, ['psql', '-h', '/tmp', '-U', 'iot', '-d', 'iot', '-tAc', query])).trim();
}

/** An instance of the reference images on the real node, without storage fields (so on the default volumes), admitting this machine as a device; resolves once it is Available. */
async function createInstance(name: string, brokers: 1 | 3): Promise<void> {
  const spec = Object.fromEntries(COMPONENTS.map((c) => [c, { ...onRealNode, replicas: 1 }]));
  await env.client.create(
    IoTServiceV1alpha1Type,
    iotService(name, landscape, {
      ...spec,
      gateway: { ...spec.gateway, protocols: ['mqtt', 'http'], deviceSources: [HOST_ON_POD_NETWORK] },
      broker: { ...spec.broker, replicas: brokers },
    } as never),
  );
  await waitForPhase(env, landscape, name, 'Available', 300_000);
}

/** Posts until the gateway acknowledges: 503 is the gateway's "send it again" (the database just came back, say). */
async function postUntilAccepted(device: Awaited<ReturnType<typeof registerDevice>>, payload: unknown, messageId: string): Promise<void> {
  await waitFor(`message ${messageId} acknowledged`, async () => {
    try {
      await postHttp(addresses.gatewayHttpUrl, device, payload, messageId);
      return { done: true, value: undefined };
    } catch (error) {
      if (error instanceof HttpStatusError && error.status === 503) return { done: false, value: undefined, seen: String(error) };
      throw error;
    }
  }, { timeoutMs: 60_000, intervalMs: 1000 });
}

/** A new device of the three-broker instance publishing as fast as it is acknowledged, and a wait for 50 more acknowledgements. */
async function publishingToR3(prefix: string) {
  const device = await registerDevice(r3Addresses, `${prefix}-${Date.now()}`);
  const running = startContinuousDevice(r3Addresses, device, { attemptTimeoutMs: 5_000, retryDelayMs: 200 });
  const acked = () => running.messages.filter((m) => m.ackedAt !== undefined).length;
  const progress = async (what: string) => {
    const before = acked();
    await waitFor(what, async () => ({ done: acked() >= before + 50, value: undefined, seen: acked() }), { timeoutMs: 120_000, intervalMs: 200 });
  };
  return { device, running, progress };
}

describe('ingestion keeps what it acknowledged', { skip }, () => {
  before(async () => {
    const registry = await referenceImages(VERSION);
    await installIoTCrd(env);
    landscape = await env.namespace('ig');
    namespace = `${landscape}-${NAME}`;
    await registryPullSecret(env, landscape, 'image-pull-secret');
    // Its /metrics on this machine's address on the pod network, where Prometheus scrapes it.
    // A 40-s stall window (--ingestion-stalled-after) instead of 60 s: the back-pressure test waits
    // it out. Its probe fills the backlog within seconds, so a reading (every 15 s) falls between
    // the backlog full and the stall on a busy machine too.
    mgr = await startOperator(env, landscape, { defaultRegistry: registry, metricsBindAddress: `${HOST_ADDRESS}:0`, ingestionStalledAfterSeconds: 40 });
    await createInstance(NAME, 1);
    addresses = await deviceAddresses(env, namespace);
  });

  after(() => stopServedLandscape({ env, landscape, mgr }));

  it('made without storage fields, keeps broker and database data on volumes of the default StorageClass; storage: ephemeral says what it loses', async () => {
    type Claim = KubeObject & { spec?: { resources?: { requests?: { storage?: string } }; storageClassName?: string }; status?: { phase?: string } };
    const claims = (await env.client.list<Claim>(Kinds.PersistentVolumeClaim, { namespace })).items;
    assert.deepEqual(
      claims.map((c) => [c.metadata.name, c.spec?.resources?.requests?.storage, c.spec?.storageClassName, c.status?.phase]).sort(),
      [['data-broker-0', '1Gi', 'standard', 'Bound'], ['data-database-0', '1Gi', 'standard', 'Bound']],
    );
    const persistent = (await getIoT(env, landscape, NAME))!.status?.conditions?.find((c) => c.type === 'PersistentStorage');
    assert.equal(persistent?.status, 'True');

    await env.client.create(IoTServiceV1alpha1Type, iotService('scratch', landscape, { broker: { storage: 'ephemeral' }, database: { storage: 'ephemeral' } } as never));
    const scratch = await waitFor('the ephemeral instance to report PersistentStorage False', async () => {
      const condition = (await getIoT(env, landscape, 'scratch'))?.status?.conditions?.find((c) => c.type === 'PersistentStorage');
      return { done: condition?.status === 'False', value: condition, seen: condition };
    }, { timeoutMs: 60_000, intervalMs: 500 });
    assert.equal(scratch?.reason, 'EmptyDir');
    assert.match(scratch?.message ?? '', /broker keeps its data in an emptyDir \(spec\.broker\.storage: ephemeral\); database keeps its data in an emptyDir/);
    assert.match(scratch?.message ?? '', /Deleting that pod loses its data/);
    assert.deepEqual((await env.client.list(Kinds.PersistentVolumeClaim, { namespace: `${landscape}-scratch` })).items, [], 'no claims');
    await env.client.delete(IoTServiceV1alpha1Type, 'scratch', landscape);
  });

  it('refuses what can never be stored with the reason; sets aside what reaches the stream anyway; other devices are stored meanwhile', async () => {
    const poisoner = await registerDevice(addresses, `poison-${Date.now()}`);
    for (const [body, reason] of [['{"x":"\\u0000"}', /NUL character/], ['{"x":"\\ud800"}', /unpaired UTF-16 surrogate/]] as const) {
      const response = await fetch(`${addresses.gatewayHttpUrl}/v1/telemetry`, {
        method: 'POST',
        headers: { Authorization: `Basic ${Buffer.from(`${poisoner.id}:${poisoner.password}`).toString('base64')}`, 'Content-Type': 'application/json' },
        body,
      });
      assert.equal(response.status, 400);
      assert.match(((await response.json()) as { error: string }).error, reason);
    }

    // The operator counts dead letters from its first reading of the broker on: wait for it.
    await waitFor('the operator to have read the broker’s dead-letter count', async () => {
      const count = await deadLettersMetric();
      return { done: count === 0, value: undefined, seen: count };
    }, { timeoutMs: 60_000, intervalMs: 1000 });

    // Straight into the stream, past the gateway's checks, as only the gateway's broker user may (its replies under its own inbox prefix).
    const { ip } = await componentPod(env, namespace, 'broker');
    const secret = (await env.client.get(Kinds.Secret, 'iot-credentials', namespace)) as KubeObject & { data: Record<string, string> };
    const broker = await connect({ servers: `${ip}:4222`, user: 'gateway', pass: Buffer.from(secret.data['broker-gateway-password']!, 'base64').toString(), inboxPrefix: '_INBOX_gateway', timeout: 10_000 });
    const poison = { messageId: 'poison-1', deviceId: poisoner.id, receivedAt: new Date().toISOString(), payload: { x: '\u0000' } };
    await jetstream(broker).publish(`telemetry.${poisoner.id}`, JSON.stringify(poison));
    await broker.close();

    const other = await registerDevice(addresses, `other-${Date.now()}`);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await postHttp(addresses.gatewayHttpUrl, other, { i }));
    await waitFor('the other device’s 5 messages stored and the poison set aside', async () => {
      const stored = (await readAllTelemetry(addresses, other.id)).length;
      const letters = await sql(`SELECT count(*) FROM dead_letters WHERE device_id = '${poisoner.id}' AND message_id = 'poison-1'`);
      return { done: stored === 5 && letters === '1', value: undefined, seen: { stored, letters } };
    }, { timeoutMs: 60_000, intervalMs: 1000 });
    assert.match(await sql(`SELECT error FROM dead_letters WHERE message_id = 'poison-1'`), /Unicode|escape|jsonb/i);
    const event = await waitFor('a DeadLetters Event on the IoTService and the count in the metric', async () => {
      type Event = KubeObject & { reason?: string; type?: string; message?: string; involvedObject?: { name?: string } };
      const events = (await env.client.list<Event>(Kinds.Event, { namespace: landscape })).items.filter((e) => e.reason === 'DeadLetters' && e.involvedObject?.name === NAME);
      const count = await deadLettersMetric();
      return { done: events.length > 0 && count === 1, value: events[0], seen: { events: events.length, count } };
    }, { timeoutMs: 60_000, intervalMs: 1000 });
    assert.equal(event?.type, 'Warning');
    assert.match(event?.message ?? '', /1 message set aside as dead letter/);
    assert.deepEqual(await readAllTelemetry(addresses, poisoner.id), [], 'nothing of the poison stored as telemetry');
    await assert.rejects(postHttp(addresses.gatewayHttpUrl, poisoner, { x: 'a\u0000b' }), (e: unknown) => e instanceof HttpStatusError && e.status === 400);
  });

  it('keeps every acknowledged message through SIGKILL of the broker, processing and database processes', async () => {
    const device = await registerDevice(addresses, `crash-${Date.now()}`);
    crashDevice = device.id;
    const running = startContinuousDevice(addresses, device, { attemptTimeoutMs: 5_000, retryDelayMs: 200 });
    const acked = () => running.messages.filter((m) => m.ackedAt !== undefined).length;
    for (const component of ['broker', 'processing', 'database'] as const) {
      const before = acked();
      await waitFor(`messages acknowledged before ${component} is killed`, async () => ({ done: acked() >= before + 50, value: undefined, seen: acked() }), { timeoutMs: 60_000, intervalMs: 200 });
      await killProcess(component);
      console.log(`ingestion: ${component} SIGKILLed and back; ${acked()} acknowledged so far`);
    }
    const after = acked();
    await waitFor('acknowledgements going on after the kills', async () => ({ done: acked() >= after + 50, value: undefined, seen: acked() }), { timeoutMs: 120_000, intervalMs: 200 });
    const messages = await running.stop();
    console.log(`ingestion: ${messages.length} messages acknowledged across three SIGKILLs, ${running.failures.length} attempts failed and were sent again`);
    await assertStoredExactlyOnce(addresses, device.id, messages);
  });

  it('a spec.config change rolls gateway, core and processing only; registry and telemetry stay', async () => {
    const device = await registerDevice(addresses, `config-${Date.now()}`);
    for (let i = 0; i < 10; i++) await postUntilAccepted(device, { i }, `c-${i}`);
    await waitFor('10 stored', async () => {
      const n = (await readAllTelemetry(addresses, device.id)).length;
      return { done: n === 10, value: undefined, seen: n };
    }, { timeoutMs: 60_000, intervalMs: 500 });
    const stateful = async () => Promise.all((['broker', 'database'] as const).map(async (c) => (await runningPod(c)).metadata.uid));
    const processingBefore = (await runningPod('processing')).metadata.uid;
    const statefulBefore = await stateful();

    const current = (await getIoT(env, landscape, NAME))!;
    await env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { config: { ...(current.spec.config ?? {}), 'log-level': 'debug' } } }, 'merge');
    await waitFor('processing rolled to the new configuration', async () => {
      const pod = await runningPod('processing').catch(() => undefined);
      const ready = pod?.status?.containerStatuses?.[0]?.ready === true;
      return { done: ready && pod?.metadata.uid !== processingBefore, value: undefined, seen: pod?.metadata.name };
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    await waitForPhase(env, landscape, NAME, 'Available', 180_000);
    assert.deepEqual(await stateful(), statefulBefore, 'broker and database pods not replaced');

    addresses = await deviceAddresses(env, namespace);
    assert.equal((await readAllTelemetry(addresses, device.id)).length, 10, 'telemetry kept');
    await postUntilAccepted(device, { after: true }, 'c-after');
    assert.equal((await readAllTelemetry(addresses, device.id)).length >= 10, true, 'the device still registered: its message accepted');
  });

  it('processing stopped until the backlog is full: devices are slowed and refused, StorageFull then IngestionStalled and its alert appear, and clear once processing is back; nothing acknowledged is lost', { timeout: 10 * 60_000 }, async () => {
    const rules = parse(readFileSync(path.join(repoRoot, 'operators/iot/deploy/prometheus_rules.yml'), 'utf8')) as { groups: Array<{ name: string; rules: Array<{ alert?: string; for?: string }> }> };
    // The alert's expression as shipped; its one-minute window shortened so the test need not wait it out.
    const ingestionRules = rules.groups.map((g) => ({ ...g, rules: g.rules.filter((r) => r.alert === 'IoTServiceIngestionStalled').map((r) => ({ ...r, for: '5s' })) }));
    const prometheus = await deployPrometheus(env, {
      namespace: await env.namespace('prom-ig'),
      scrapeConfigs: [{ job_name: 'iot-operator-metrics', static_configs: [{ targets: [`${HOST_ADDRESS}:${mgr!.httpPort}`] }] }],
      ruleFiles: { 'ingestion.rules.yaml': { groups: ingestionRules } },
    });
    let publishing: ReturnType<typeof startContinuousDevice> | undefined;
    try {
      await env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { broker: { maxBacklog: '1Mi' }, processing: { replicas: 0 } } }, 'merge');
      await waitFor('processing stopped', async () => {
        const pods = (await env.client.list<Pod>(Kinds.Pod, { namespace, labelSelector: 'app.kubernetes.io/component=processing' })).items;
        return { done: pods.length === 0, value: undefined, seen: pods.length };
      }, { timeoutMs: 120_000 });
      await waitFor('the gateway rolled to the 1Mi backlog, no old pod left', async () => {
        type Deployment = KubeObject & { spec?: { replicas?: number }; status?: { observedGeneration?: number; replicas?: number; updatedReplicas?: number; readyReplicas?: number } };
        const gateway = (await env.client.get(Kinds.Deployment, 'gateway', namespace)) as Deployment;
        const { observedGeneration, replicas, updatedReplicas, readyReplicas } = gateway.status ?? {};
        const want = gateway.spec?.replicas;
        return { done: observedGeneration === gateway.metadata.generation && replicas === want && updatedReplicas === want && readyReplicas === want, value: undefined, seen: gateway.status };
      }, { timeoutMs: 180_000 });
      await waitForPhase(env, landscape, NAME, 'Available', 180_000);
      addresses = await deviceAddresses(env, namespace);

      const device = await registerDevice(addresses, `full-${Date.now()}`);
      const prober = await registerDevice(addresses, `probe-${Date.now()}`);
      const reasons = new Set<string>();
      const degradedReason = async () => {
        const iot = (await getIoT(env, landscape, NAME))!;
        const reason = iot.status?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True')?.reason;
        if (reason) reasons.add(reason);
        return { iot, reason };
      };
      const running = startContinuousDevice(addresses, device, { attemptTimeoutMs: 40_000, retryDelayMs: 500 });
      publishing = running;
      // Probes of about 60 KB (the HTTP body limit is 64 KiB) fill the 1 MiB backlog in seconds.
      const full = await waitFor('HTTP 503 with Retry-After once the backlog is full', async () => {
        await degradedReason();
        const response = await fetch(`${addresses.gatewayHttpUrl}/v1/telemetry`, {
          method: 'POST',
          headers: { Authorization: `Basic ${Buffer.from(`${prober.id}:${prober.password}`).toString('base64')}`, 'Content-Type': 'application/json', 'Message-Id': `probe-${Date.now()}` },
          body: JSON.stringify({ probe: 'x'.repeat(60_000) }),
        });
        const body = await response.text();
        return { done: response.status === 503 && /send it again later/.test(body), value: { retryAfter: response.headers.get('retry-after'), body }, seen: `${response.status} ${body}` };
      }, { timeoutMs: 120_000, intervalMs: 500 });
      assert.equal(full.retryAfter, '5');

      const stalled = await waitFor('Failed with IngestionStalled', async () => {
        const { iot, reason } = await degradedReason();
        return { done: iot.status?.phase === 'Failed' && reason === 'IngestionStalled', value: iot.status, seen: { phase: iot.status?.phase, reason, ingestion: iot.status?.ingestion } };
      }, { timeoutMs: 180_000, intervalMs: 1000 });
      assert.ok(reasons.has('StorageFull'), `the full backlog was reported before the stall: ${[...reasons].join(', ')}`);
      assert.match(stalled?.reason ?? '', /Ingestion stalled/);
      assert.equal(stalled?.ingestion?.state, 'Stalled');
      assert.ok((stalled?.ingestion?.backlogMessages ?? 0) > 0);
      await prometheus.waitForAlert('IoTServiceIngestionStalled', 'firing', { namespace: landscape, name: NAME }, 60_000);

      // Only processing comes back: a changed maxBacklog would roll the gateway away from the device's addresses.
      await env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { processing: { replicas: 1 } } }, 'merge');
      await waitForPhase(env, landscape, NAME, 'Available', 240_000);
      await prometheus.waitForAlert('IoTServiceIngestionStalled', 'inactive', { namespace: landscape, name: NAME }, 60_000);
      const before = running.messages.filter((m) => m.ackedAt !== undefined).length;
      await waitFor('acknowledgements going on', async () => {
        const acked = running.messages.filter((m) => m.ackedAt !== undefined).length;
        return { done: acked >= before + 50, value: undefined, seen: acked };
      }, { timeoutMs: 120_000, intervalMs: 500 });
      const messages = await running.stop();
      console.log(`ingestion back-pressure: ${messages.length} messages acknowledged, ${running.failures.length} attempts refused or timed out and sent again`);
      assert.ok(running.failures.length > 0, 'the full backlog refused some attempts');
      await assertStoredExactlyOnce(addresses, device.id, messages);
    } finally {
      await publishing?.stop(5_000).catch(() => undefined);
      await env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { processing: { replicas: 1 } } }, 'merge');
      await prometheus.remove();
    }
  });

  it('with broker.replicas 3, keeps every acknowledged message through a broker SIGKILL and a broker pod deletion', async () => {
    await createInstance(R3, 3);
    r3 = `${landscape}-${R3}`;
    r3Addresses = await deviceAddresses(env, r3);
    const brokers = (await env.client.list<Pod>(Kinds.Pod, { namespace: r3, labelSelector: 'app.kubernetes.io/component=broker' })).items;
    assert.equal(brokers.length, 3, 'three broker pods');

    const { device, running, progress } = await publishingToR3('r3');
    await progress('messages acknowledged before broker-0 is killed');
    await sigkillContainer(env, (await env.client.get(Kinds.Pod, 'broker-0', r3)) as Pod);
    await progress('acknowledgements going on with broker-0 killed');
    await env.client.delete(Kinds.Pod, 'broker-1', r3);
    await progress('acknowledgements going on with broker-1 deleted');
    await waitForPhase(env, landscape, R3, 'Available', 300_000);
    await progress('acknowledgements going on with all three brokers back');
    const messages = await running.stop();
    console.log(`ingestion R3: ${messages.length} messages acknowledged through a broker SIGKILL and a broker pod deletion, ${running.failures.length} attempts sent again`);
    await assertStoredExactlyOnce(r3Addresses, device.id, messages);
  });

  it('with broker.replicas 3, a change rolls the brokers one at a time, each once the one before is current, and keeps every acknowledged message', async () => {
    assert.ok(r3, 'the instance with three brokers is made by the test before');
    const brokerPods = async () => (await env.client.list<Pod>(Kinds.Pod, { namespace: r3, labelSelector: 'app.kubernetes.io/component=broker' })).items;
    const before = new Map((await brokerPods()).map((p) => [p.metadata.name!, p.metadata.uid!]));
    assert.equal(before.size, 3, 'three broker pods');

    /**
     * Whether a broker answers nats-server's full /healthz: JetStream's meta layer and every stream
     * and consumer on it current; undefined when it gave no answer within 3 s (a busy machine's
     * slowness, not evidence either way).
     */
    const current = async (pod: Pod | undefined): Promise<boolean | undefined> => {
      if (!pod?.status?.podIP || pod.metadata.deletionTimestamp) return false;
      try {
        return (await fetch(`http://${pod.status.podIP}:${PORTS.brokerMonitor}/healthz`, { signal: AbortSignal.timeout(3000) })).ok;
      } catch (err) {
        return err instanceof Error && err.name === 'TimeoutError' ? undefined : false;
      }
    };
    /**
     * Every 500 ms from the change until the roll is done: the brokers the roll has taken down and
     * that are not current again yet (an old pod deleted or terminating, or its replacement not
     * yet seen current, by /healthz or its Ready condition), the brokers whose /healthz failed at
     * that moment, and those already replaced. A replaced broker once current has caught up: a
     * later moment's failed /healthz while the JetStream leaders it followed are elected anew on
     * another broker's deletion is counted in `failing`, not as the roll's.
     */
    const samples: Array<{ at: number; rolling: string[]; failing: string[]; replaced: string[] }> = [];
    const caughtUp = new Set<string>();
    let sampling = true;
    const sampleUntilStopped = async () => {
      while (sampling) {
        const pods = await brokerPods().catch(() => undefined);
        if (pods) {
          const names = [...before.keys()];
          const states = await Promise.all(
            names.map(async (n) => {
              const pod = pods.find((p) => p.metadata.name === n);
              const replaced = pod !== undefined && pod.metadata.uid !== before.get(n);
              const ok = await current(pod);
              const ready = pod?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
              if (replaced && (ok === true || ready)) caughtUp.add(n);
              return { n, ok, replaced, takenDown: !pod || Boolean(pod.metadata.deletionTimestamp) || replaced };
            }),
          );
          samples.push({
            at: Date.now(),
            rolling: states.filter((s) => s.takenDown && !caughtUp.has(s.n)).map((s) => s.n),
            failing: states.filter((s) => s.ok === false).map((s) => s.n),
            replaced: states.filter((s) => s.replaced).map((s) => s.n),
          });
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };

    const { device, running, progress } = await publishingToR3('roll');
    let sampler: Promise<void> | undefined;
    try {
      await progress('messages acknowledged before the roll');
      await waitFor('the three brokers current before the roll', async () => {
        const ok = await Promise.all((await brokerPods()).map(current));
        return { done: ok.length === 3 && ok.every((answer) => answer === true), value: undefined, seen: ok };
      }, { timeoutMs: 60_000, intervalMs: 500 });
      sampler = sampleUntilStopped();
      const started = Date.now();
      await env.client.patch(IoTServiceV1alpha1Type, R3, landscape, { spec: { broker: { resources: { requests: { cpu: '20m' } } } } }, 'merge');
      await waitFor('the three brokers replaced and ready', async () => {
        const pods = await brokerPods();
        const done = pods.length === 3 && pods.every((p) => p.metadata.uid !== before.get(p.metadata.name!) && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
        return { done, value: undefined, seen: pods.map((p) => `${p.metadata.name}:${p.metadata.uid === before.get(p.metadata.name!) ? 'old' : 'new'}`) };
      }, { timeoutMs: 120_000, intervalMs: 1000 });
      console.log(`ingestion R3: the three brokers rolled in ${((Date.now() - started) / 1000).toFixed(0)} s`);
      await progress('acknowledgements going on after the roll');
    } finally {
      sampling = false;
      await sampler;
    }
    const messages = await running.stop();
    const oneRolling = samples.filter((s) => s.rolling.length === 1).length;
    const twoFailing = samples.filter((s) => s.failing.length >= 2).length;
    console.log(`ingestion R3: ${messages.length} messages acknowledged through the roll, ${running.failures.length} attempts sent again; of ${samples.length} samples, ${oneRolling} with one broker rolling, ${twoFailing} with two brokers' /healthz failing`);
    const twoRolling = samples.filter((s) => s.rolling.length >= 2).map((s) => `${new Date(s.at).toISOString()} rolling ${s.rolling.join(',')} failing ${s.failing.join(',')} replaced ${s.replaced.join(',')}`);
    assert.deepEqual(twoRolling, [], 'never a broker taken down before the one replaced before it is current');
    assert.ok(oneRolling > 0, 'the sampler saw the replaced brokers down');
    assert.deepEqual(samples.at(-1)?.replaced.sort(), ['broker-0', 'broker-1', 'broker-2'], 'the sampler saw the roll through');
    await assertStoredExactlyOnce(r3Addresses, device.id, messages);
  });

  it('deletes telemetry older than spec.retention and keeps what is newer', async () => {
    assert.ok((await readAllTelemetry(addresses, crashDevice)).length > 0, 'the crash test’s messages, minutes old, are there');
    const fresh = await registerDevice(addresses, `fresh-${Date.now()}`);
    for (let i = 0; i < 5; i++) await postUntilAccepted(fresh, { i }, `f-${i}`);
    await env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { retention: '120s' } }, 'merge');
    await waitFor('the crash test’s messages deleted as older than 120 s', async () => {
      addresses = await deviceAddresses(env, namespace).catch(() => addresses); // core rolls with the new configuration
      const left = (await readAllTelemetry(addresses, crashDevice).catch(() => undefined))?.length;
      return { done: left === 0, value: undefined, seen: left };
    }, { timeoutMs: 180_000, intervalMs: 2000 });
    assert.equal((await readAllTelemetry(addresses, fresh.id)).length, 5, 'the newer messages kept');
  });

  it('refuses replicas the data plane cannot keep consistent, with the reason', async () => {
    const spec = (component: 'broker' | 'database', replicas: number) => ({ [component]: { replicas } }) as never;
    await assert.rejects(env.client.create(IoTServiceV1alpha1Type, iotService('two-db', landscape, spec('database', 2))), /database\.replicas must be 1 or 3/);
    await assert.rejects(env.client.create(IoTServiceV1alpha1Type, iotService('two-brokers', landscape, spec('broker', 2))), /broker\.replicas must be 1 or 3/);
    await assert.rejects(
      env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { broker: { replicas: 3 } } }, 'merge'),
      /broker\.replicas cannot be changed after creation: the stream of one broker does not carry over/,
    );
  });
});
