/**
 * What a user meets when it goes wrong, on the real node with the reference images (issue 44,
 * part 3): each failure is `Failed` with a `status.reason` of one sentence saying what to fix, the
 * same sentence for as long as the failure lasts, and the instance comes back by itself once the
 * cause is fixed, without recreating the IoTService.
 *   - a `spec.version` with no such image → `ImageNotFound` naming the image and spec.version; the
 *     version set back → Available (the operator replaces the StatefulSet pods stuck on the
 *     missing image, which the StatefulSet controller never would);
 *   - the landscape's image-pull-secret with a wrong password → `ImagePullUnauthorized` naming
 *     that Secret and its namespace (and no password); the Secret fixed → Available, the same
 *     IoTService (the operator restarts the pods waiting for their image);
 *   - a version whose core exits on start (the 2.4.1 images under another tag, core's with an
 *     entrypoint that exits 1) → `CrashLooping` naming component core and its crash loop; back to
 *     2.4.1 → Available;
 *   - then core away (its Deployment scaled to 0 while the instance is paused, as a database
 *     failover makes it unready): the gateway stays Ready, so a device it knows publishes over
 *     HTTP and MQTT through its Service and one it cannot check is told to come back (HTTP 503),
 *     none refused a connection; unpaused, core is back and what was acknowledged is stored.
 * The operators run with `--stuck-pod-timeout` 20 s instead of 5 minutes. The three instances run
 * side by side (two landscapes: the wrong password is the landscape's), one replica per component.
 * Times (apply → Failed, fix → Available) are printed, never asserted. Reported as not run, with
 * the reason, where the cluster has no real node.
 *
 *   node --import tsx --test operators/iot/test/real-failures.e2e.test.ts
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localRegistry, localTestEnv, onRealNode, pushUnderTag, realNode, realNodeContainerd, registryPullSecret, repoRoot } from '@iot-operator/local-cluster';
import { localImage } from '../../../images/local-images.ts';
import { COMPONENTS } from '../src/api/iotservice.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { HttpStatusError, postHttp, publishMqtt, readTelemetry, registerDevice } from '@iot-operator/iot-service/simulator';
import { HOST_ON_POD_NETWORK, abandonLandscape, deviceServiceAddresses, getIoT, installIoTCrd, iotService, startOperator, waitForPhase, type IoTObject } from './e2e-support.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;

const VERSION = '2.4.1';
/** Never pushed. */
const MISSING = '0.0.0-no-such-version';
/** 2.4.1's images, but core's entrypoint exits 1. */
const CRASH = '2.4.1-exits-on-start';
/** 2.4.1's images under a tag removed from the node before the test: its pods must pull. */
const FRESH = '2.4.1-pulled-afresh';
const WRONG_PASSWORD = 'not-the-password';
const STUCK_POD_TIMEOUT_MS = 20_000;

let registry = '';
let good = '';
let locked = '';
const managers: Manager[] = [];

type Event = KubeObject & { type?: string; reason?: string; message?: string };

/** One replica of every component, each on the real node, data on the default volumes; the gateway's MQTT and HTTP open to this machine. */
function spec(version: string) {
  const gateway = { protocols: ['mqtt', 'http'], deviceSources: [HOST_ON_POD_NETWORK] };
  return { version, ...Object.fromEntries(COMPONENTS.map((c) => [c, { ...onRealNode, replicas: 1, ...(c === 'gateway' ? gateway : {}) }])) } as never;
}

async function createInstance(landscape: string, name: string, version: string): Promise<void> {
  await env.client.create(IoTServiceV1alpha1Type, iotService(name, landscape, spec(version)));
}

async function setVersion(landscape: string, name: string, version: string): Promise<void> {
  await env.client.patch(IoTServiceV1alpha1Type, name, landscape, { spec: { version } }, 'merge');
}

/** The image references of the node's containerd for `tag`, removed so that pods must pull them. */
async function removeFromNode(tag: string): Promise<void> {
  const refs = COMPONENTS.map((c) => `${registry}/iot-${c}:${tag}`);
  await run('ctr', ['--address', realNodeContainerd(env), '-n', 'k8s.io', 'images', 'rm', ...refs]).catch(() => undefined);
}

/**
 * The 2.4.1 images just built (buildah's `localhost/iot/…`, never an older copy kept under the
 * registry's name) under CRASH (core's entrypoint exits 1) and FRESH, pushed to the cluster's registry.
 */
async function pushVersions(): Promise<void> {
  const crashingCore = `${registry}/iot-core:${CRASH}`;
  const container = (await run('buildah', ['from', '--pull-never', localImage('core', VERSION)])).stdout.trim();
  const exit = `console.error('iot-core ${CRASH}: built to exit on start'); process.exit(1)`;
  await run('buildah', ['config', '--entrypoint', JSON.stringify(['node', '-e', exit]), '--env', `IOT_SERVICE_VERSION=${CRASH}`, container]);
  await run('buildah', ['commit', '-q', '--rm', container, crashingCore]);
  await pushUnderTag(env, crashingCore, crashingCore);
  await run('buildah', ['rmi', crashingCore]).catch(() => undefined);
  for (const component of COMPONENTS) {
    const image = localImage(component, VERSION);
    if (component !== 'core') await pushUnderTag(env, image, `${registry}/iot-${component}:${CRASH}`);
    await pushUnderTag(env, image, `${registry}/iot-${component}:${FRESH}`);
  }
}

/**
 * Waits for Failed with `reason` (the Degraded condition's); the IoTService and how long after its
 * creation it went Failed (the Degraded condition's transition: whole seconds).
 */
async function failedWith(landscape: string, name: string, reason: string): Promise<{ iot: IoTObject; ms: number }> {
  const iot = await waitFor(
    `IoTService ${landscape}/${name} to be Failed with reason ${reason}`,
    async () => {
      const current = await getIoT(env, landscape, name);
      const degraded = current?.status?.conditions?.find((c) => c.type === 'Degraded');
      return { done: current?.status?.phase === 'Failed' && degraded?.reason === reason, value: current!, seen: current?.status };
    },
    { timeoutMs: 240_000, intervalMs: 500 },
  );
  const degraded = iot.status?.conditions?.find((c) => c.type === 'Degraded');
  return { iot, ms: Date.parse(String(degraded?.lastTransitionTime)) - Date.parse(String(iot.metadata.creationTimestamp)) };
}

/**
 * Samples the status every 2 s for `ms`: always Failed with the same reason and message (no flapping
 * to Processing, no changing text), and the IoTService got one Warning Event of that reason and no
 * Recovered Event.
 */
async function staysFailed(landscape: string, name: string, first: IoTObject, ms: number): Promise<void> {
  const reason = first.status?.conditions?.find((c) => c.type === 'Degraded')?.reason;
  for (const end = Date.now() + ms; Date.now() < end; await delay(2000)) {
    const now = await getIoT(env, landscape, name);
    assert.equal(now?.status?.phase, 'Failed', `still Failed: ${JSON.stringify(now?.status)}`);
    assert.equal(now?.status?.reason, first.status?.reason, 'the same message');
  }
  const events = (await env.client.list<Event>(Kinds.Event, { namespace: landscape, fieldSelector: `involvedObject.name=${name}` })).items;
  assert.deepEqual(events.filter((e) => e.reason === reason).map((e) => e.type), ['Warning'], `one Warning Event ${reason}: ${events.map((e) => `${e.reason}: ${e.message}`).join(' | ')}`);
  assert.deepEqual(events.filter((e) => e.reason === 'Recovered'), [], 'never recovered in between');
}

async function podsRestartedEvents(landscape: string, name: string): Promise<string[]> {
  const events = (await env.client.list<Event>(Kinds.Event, { namespace: landscape, fieldSelector: `involvedObject.name=${name},reason=PodsRestarted` })).items;
  return events.map((e) => e.message ?? '');
}

describe('what a user meets when it goes wrong, on the real node', { skip }, () => {
  before(async () => {
    const built = await run('node', ['--import', 'tsx', 'scripts/iot-service-images.ts', '--version', VERSION], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 });
    registry = built.stdout.trim();
    await pushVersions();
    await removeFromNode(FRESH);
    await installIoTCrd(env);
    good = await env.namespace('ls');
    locked = await env.namespace('ls');
    await registryPullSecret(env, good, 'image-pull-secret');
    await registryPullSecret(env, locked, 'image-pull-secret', WRONG_PASSWORD);
    for (const landscape of [good, locked]) managers.push(await startOperator(env, landscape, { defaultRegistry: registry, stuckPodTimeoutMs: STUCK_POD_TIMEOUT_MS }));
    // Side by side: the waits of the tests below overlap.
    await createInstance(good, 'missing', MISSING);
    await createInstance(good, 'crash', CRASH);
    await createInstance(locked, 'locked', FRESH);
  });

  after(async () => {
    for (const mgr of managers) await mgr.stop();
    for (const landscape of [good, locked].filter(Boolean)) await abandonLandscape(env, landscape);
    if (registry) await removeFromNode(FRESH);
    await env.cleanup();
  });

  it('a spec.version with no such image: Failed, ImageNotFound naming the image; the version fixed, Available again', async () => {
    const { iot, ms } = await failedWith(good, 'missing', 'ImageNotFound');
    const message = iot.status?.reason ?? '';
    assert.match(message, new RegExp(`^Image ${registry.replace(/[.]/g, '\\.')}/iot-(\\w+):${MISSING} of component \\1 does not exist in its registry: set spec.version to a version published there \\(or correct spec.registry\\)\\.$`));
    await staysFailed(good, 'missing', iot, 30_000);

    const fixed = Date.now();
    const uid = iot.metadata.uid;
    await setVersion(good, 'missing', VERSION);
    const available = await waitForPhase(env, good, 'missing', 'Available', 300_000);
    console.log(`no such image: created → Failed ${ms} ms; version fixed → Available ${Date.now() - fixed} ms`);
    assert.equal(available.metadata.uid, uid, 'the same IoTService');
    assert.ok(
      (await podsRestartedEvents(good, 'missing')).some((m) => /broker-0|database-0/.test(m) && /earlier revision of their StatefulSet|earlier revision/.test(m)),
      'the StatefulSet pods stuck on the missing image were replaced by the operator',
    );
  });

  it("the landscape's image-pull-secret with a wrong password: Failed, ImagePullUnauthorized naming the Secret; fixed, Available again", async () => {
    const { iot, ms } = await failedWith(locked, 'locked', 'ImagePullUnauthorized');
    const message = iot.status?.reason ?? '';
    assert.match(message, new RegExp(`^The registry refused to serve image \\S+:${FRESH} of component \\w+ with the credentials of Secret image-pull-secret: put valid credentials for that registry into Secret image-pull-secret in namespace ${locked} \\(the operator copies it into namespace ${locked}-locked`));
    for (const secret of [WRONG_PASSWORD, localRegistry(env).password]) assert.ok(!message.includes(secret), 'no password in the message');
    await staysFailed(locked, 'locked', iot, 20_000);

    const fixed = Date.now();
    await registryPullSecret(env, locked, 'image-pull-secret');
    const available = await waitForPhase(env, locked, 'locked', 'Available', 300_000);
    console.log(`wrong password: created → Failed ${ms} ms; secret fixed → Available ${Date.now() - fixed} ms`);
    assert.equal(available.metadata.uid, iot.metadata.uid, 'the same IoTService');
    assert.ok((await podsRestartedEvents(locked, 'locked')).some((m) => /changed image-pull-secret/.test(m)), 'the pods waiting for their image were restarted');
  });

  it('a version built to crash on start: Failed, CrashLooping naming component core and its crash loop; back to 2.4.1, Available again', async () => {
    const { iot, ms } = await failedWith(good, 'crash', 'CrashLooping');
    const message = iot.status?.reason ?? '';
    assert.match(message, new RegExp(`^Component core is in a crash loop: container core of pod (core-\\S+) keeps exiting and has not been ready for more than 20 seconds; see why with kubectl logs -n ${good}-crash \\1 -c core --previous`));
    await staysFailed(good, 'crash', iot, 40_000);
    const pod = /of pod (\S+) keeps/.exec(message)![1]!;
    const logs = await run('kubectl', ['--kubeconfig', env.kubeconfigPath, 'logs', '-n', `${good}-crash`, pod, '-c', 'core', '--previous']);
    assert.match(logs.stdout + logs.stderr, new RegExp(`iot-core ${CRASH}: built to exit on start`), 'the command the message gives shows why');

    const fixed = Date.now();
    await setVersion(good, 'crash', VERSION);
    const available = await waitForPhase(env, good, 'crash', 'Available', 300_000);
    console.log(`crash on start: created → Failed ${ms} ms; version fixed → Available ${Date.now() - fixed} ms`);
    assert.equal(available.metadata.uid, iot.metadata.uid, 'the same IoTService');
  });

  it('core away: the gateway stays Ready; a device it knows keeps publishing, one it cannot check is told to come back; core back, all stored', async () => {
    const namespace = `${good}-crash`;
    const addresses = await deviceServiceAddresses(env, namespace);
    const device = await waitFor('a device registered with core', async () => ({ done: true, value: await registerDevice(addresses, `known-${Date.now()}`) }), { timeoutMs: 60_000, intervalMs: 1000 });
    const sent = [await postHttp(addresses.gatewayHttpUrl, device, { reading: 0 })]; // the gateway has checked it with core
    await env.client.patch(IoTServiceV1alpha1Type, 'crash', good, { spec: { paused: true } }, 'merge');
    await waitFor('the paused generation observed', async () => {
      const iot = await getIoT(env, good, 'crash');
      return { done: iot?.status?.observedGeneration === iot?.metadata.generation, value: undefined, seen: iot?.status };
    });
    await env.client.patch(Kinds.Deployment, 'core', namespace, { spec: { replicas: 0 } }, 'merge');
    type ReadyPod = KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } };
    const pods = async (component: string) => (await env.client.list<ReadyPod>(Kinds.Pod, { namespace, labelSelector: `app.kubernetes.io/component=${component}` })).items;
    await waitFor('core’s pods gone', async () => ({ done: (await pods('core')).length === 0, value: undefined }), { timeoutMs: 90_000, intervalMs: 500 });
    // The gateway's readiness is probed every 2 s and lost after 2 failures: 10 s would show it.
    for (const end = Date.now() + 10_000; Date.now() < end; await delay(1000)) {
      const gateways = await pods('gateway');
      assert.ok(gateways.some((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')), `a gateway Ready while core is away: ${JSON.stringify(gateways.map((p) => p.status?.conditions))}`);
    }
    sent.push(await postHttp(addresses.gatewayHttpUrl, device, { reading: 1 }));
    await publishMqtt(addresses.gatewayMqttUrl, device, [{ reading: 2 }]);
    const refusal = await postHttp(addresses.gatewayHttpUrl, { id: `unknown-${Date.now()}`, password: 'never-checked' }, { reading: 0 }).then(() => 'accepted', (err: unknown) => err);
    assert.ok(refusal instanceof HttpStatusError, `a device the gateway cannot check: ${String(refusal)}`);
    assert.equal(refusal.status, 503);
    assert.match(refusal.body, /device registry busy or unavailable/);

    await env.client.patch(IoTServiceV1alpha1Type, 'crash', good, { spec: { paused: false } }, 'merge');
    await waitForPhase(env, good, 'crash', 'Available', 180_000);
    const stored = await waitFor('the three readings stored', async () => {
      const records = await readTelemetry(addresses, device.id, 10);
      return { done: records.length === 3, value: records, seen: records.length };
    }, { timeoutMs: 60_000, intervalMs: 1000 });
    assert.deepEqual(stored.map((r) => (r.payload as { reading: number }).reading).sort(), [0, 1, 2]);
    assert.ok(sent.every((id) => stored.some((r) => r.messageId === id)), 'the HTTP messages under the ids the gateway acknowledged');
  });
});
