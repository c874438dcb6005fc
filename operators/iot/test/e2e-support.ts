/**
 * End-to-end helpers for the IoT operator on the real local cluster: the IoTService CRD converted
 * by the test process (testing/conversion-server.ts), landscapes (a namespace with its image-pull-secret), the operator in-process or as a process
 * (stopped only once it has finalized its landscape's IoTServices; in-process, its tenant policy
 * lets instances onto the real node: its taint and label allowed besides the defaults, as the
 * cluster's admin would allow them), IoTService objects and waits on
 * what `kubectl` would show; for instances of the reference images on the real node, the images
 * built and pushed, the addresses a simulated device dials (pod IPs, the API token) and commands
 * run inside an instance's pods (`kubectl exec`).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { Kinds, ifFound, type KubeObject, type Manager } from '@iot-operator/runtime';
import { spawnOperator as spawnOperatorProcess, waitFor, type OperatorProcess, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, onRealNode, REAL_NODE_LABEL, realNodeContainerd, registryPullSecret, repoRoot } from '@iot-operator/local-cluster';
import { readAllTelemetry, type DeviceMessage, type ServiceAddresses } from '@iot-operator/iot-service/simulator';
import { COMPONENTS, type ComponentName, type IoTServiceStatus } from '../src/api/iotservice.ts';
import type { IoTServiceV1alpha1Spec } from '../src/api/v1alpha1.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { createIoTOperator } from '../src/operator.ts';
import type { OperatorOptions } from '../src/options.ts';
import { DEFAULT_NODE_LABEL_KEYS } from '../src/resources/placement-policy.ts';
import { defaultTenantPolicy, type TenantPolicy } from '../src/resources/tenant-policy.ts';
import { installIoTCrd } from '../testing/conversion-server.ts';

export type IoTObject = KubeObject & { spec: IoTServiceV1alpha1Spec; status?: IoTServiceStatus };

export const pullSecretData = { '.dockerconfigjson': Buffer.from('{"auths":{"registry.example.com":{"auth":"dGVzdDp0ZXN0"}}}').toString('base64') };

export { createThroughConversion, installIoTCrd, restoreShippedConversion, serveIoTConversion, testConversion } from '../testing/conversion-server.ts';

/** The shared TestEnv with the IoTService CRD installed (its conversion served by this process): where an IoT e2e file starts. */
export async function iotTestEnv(): Promise<TestEnv> {
  const env = await localTestEnv();
  await installIoTCrd(env);
  return env;
}

/** A landscape namespace holding the image-pull-secret (unless `withSecret` is false). */
export async function createLandscape(env: TestEnv, withSecret = true): Promise<string> {
  const landscape = await env.namespace('ls');
  if (withSecret) await createPullSecret(env, landscape);
  return landscape;
}

export async function createPullSecret(env: TestEnv, landscape: string): Promise<void> {
  await env.client.create(Kinds.Secret, {
    metadata: { name: 'image-pull-secret', namespace: landscape },
    type: 'kubernetes.io/dockerconfigjson',
    data: pullSecretData,
  });
}

/** The default tenant policy, and pods may tolerate the real node's taint and select it by its label (`onRealNode`). */
export function realNodeTenancy(defaultRegistry: string): TenantPolicy {
  return { ...defaultTenantPolicy(defaultRegistry), allowedTolerationKeys: [REAL_NODE_LABEL], allowedNodeLabelKeys: [...DEFAULT_NODE_LABEL_KEYS, REAL_NODE_LABEL] };
}

export function operatorOptions(env: TestEnv, operatorName: string, overrides: Partial<OperatorOptions> = {}): OperatorOptions {
  const defaultRegistry = overrides.defaultRegistry ?? 'registry.example.com/iot';
  return {
    operatorName,
    watchNamespace: '',
    defaultRegistry,
    tenancy: realNodeTenancy(defaultRegistry),
    maxConcurrentReconciles: 4,
    leaderElect: false,
    metricsBindAddress: '127.0.0.1:0',
    logLevel: 'warn',
    kubeconfig: env.kubeconfigPath,
    syncPeriodMs: 10 * 3_600_000,
    ...overrides,
  };
}

/** Runs the operator in this process; stop it with `mgr.stop()`. */
export async function startOperator(env: TestEnv, operatorName: string, overrides: Partial<OperatorOptions> = {}): Promise<Manager> {
  const mgr = await createIoTOperator(operatorOptions(env, operatorName, overrides));
  await mgr.start();
  return mgr;
}

/** Runs the `iot-operator` bin as a separate process (so that it can be SIGKILLed); `output()` is its stdout and stderr. */
export function spawnOperator(env: TestEnv, operatorName: string, args: string[] = [], extraEnv: Record<string, string> = {}): OperatorProcess {
  return spawnOperatorProcess(
    [path.join(repoRoot, 'operators/iot/bin/iot-operator.js'), '--metrics-bind-address=127.0.0.1:0', '--log-level=info', ...args],
    { KUBECONFIG: env.kubeconfigPath, OPERATOR_NAME: operatorName, WATCH_NAMESPACE: '', ...extraEnv },
    { output: 'all' },
  );
}

/** The port of an operator process's metrics endpoint (`--metrics-bind-address=127.0.0.1:0`), read from its log once it serves. */
export function metricsPort(operator: OperatorProcess): Promise<number> {
  return waitFor('the operator to serve its metrics', async () => {
    const match = /"address":"[^"]*:(\d+)"/.exec(operator.output());
    return { done: !!match, value: Number(match?.[1]), seen: operator.output().slice(-800) };
  });
}

export function iotService(name: string, landscape: string, spec: Partial<IoTServiceV1alpha1Spec> = {}): IoTObject {
  return {
    apiVersion: 'cp.iotservices.io/v1alpha1',
    kind: 'IoTService',
    metadata: { name, namespace: landscape },
    spec: { version: '2.4.1', ...spec } as IoTServiceV1alpha1Spec,
  };
}

export function getIoT(env: TestEnv, landscape: string, name: string): Promise<IoTObject | undefined> {
  return ifFound(env.client.get<IoTObject>(IoTServiceV1alpha1Type, name, landscape));
}

/** Waits until the instance reports `phase` for its current generation. */
export async function waitForPhase(env: TestEnv, landscape: string, name: string, phase: 'Available' | 'Processing' | 'Failed', timeoutMs = 90_000): Promise<IoTObject> {
  return waitFor(
    `IoTService ${landscape}/${name} to be ${phase} with observedGeneration = generation`,
    async () => {
      const iot = await getIoT(env, landscape, name);
      const done = !!iot && iot.status?.phase === phase && iot.status.observedGeneration === iot.metadata.generation;
      return { done, value: iot!, seen: iot ? { generation: iot.metadata.generation, status: iot.status } : 'no such IoTService' };
    },
    { timeoutMs, intervalMs: 300 },
  );
}

export function getOrUndefined<T extends KubeObject>(env: TestEnv, type: Parameters<TestEnv['client']['get']>[0], name: string, namespace?: string): Promise<T | undefined> {
  return ifFound(env.client.get<T>(type, name, namespace));
}

/** Deletes every IoTService of the landscape and waits until the operator has finalized them. */
export async function deleteAllInstances(env: TestEnv, landscape: string, timeoutMs = 120_000): Promise<void> {
  const { items } = await env.client.list<IoTObject>(IoTServiceV1alpha1Type, { namespace: landscape });
  await Promise.all(items.map((i) => env.client.delete(IoTServiceV1alpha1Type, i.metadata.name!, landscape).catch(() => undefined)));
  await waitFor(
    `every IoTService of ${landscape} to be finalized and gone`,
    async () => {
      const left = await env.client.list<IoTObject>(IoTServiceV1alpha1Type, { namespace: landscape });
      return { done: left.items.length === 0, value: undefined, seen: left.items.map((i) => `${i.metadata.name} finalizers=${i.metadata.finalizers}`) };
    },
    { timeoutMs },
  );
}

/** A landscape (with its image-pull-secret) on `iotTestEnv()`. */
export async function iotTestLandscape(): Promise<{ env: TestEnv; landscape: string }> {
  const env = await iotTestEnv();
  return { env, landscape: await createLandscape(env) };
}

/** An operator serving a landscape: in this process (`Manager`) or as its own (`OperatorProcess`). */
interface LandscapeOperator {
  stop(): Promise<unknown>;
}

/**
 * Stops `operator`, then lets `landscape` go without waiting (`abandonLandscape`): its instance
 * namespaces are deleted in the background while the next file runs. What deletion does is
 * asserted by the tests that delete; a teardown that waited for it took up to minutes a file.
 */
export async function stopOperator(env: TestEnv, landscape: string, operator: LandscapeOperator | undefined): Promise<void> {
  await operator?.stop();
  await abandonLandscape(env, landscape);
}

/** A landscape on `iotTestEnv()` and the operator serving it in this process. */
export interface ServedLandscape {
  env: TestEnv;
  landscape: string;
  mgr: Manager;
}

/**
 * A landscape (with its image-pull-secret) on `iotTestEnv()`, served by the operator in this
 * process (`overrides` on `operatorOptions`). Should the operator not start, the env's
 * namespaces are deleted before the error is passed on: nothing is left for a caller that got
 * nothing. `stopServedLandscape` undoes it.
 */
export async function startServedLandscape(overrides: Partial<OperatorOptions> = {}): Promise<ServedLandscape> {
  const { env, landscape } = await iotTestLandscape();
  try {
    return { env, landscape, mgr: await startOperator(env, landscape, overrides) };
  } catch (err) {
    await env.cleanup();
    throw err;
  }
}

/** The operator stopped as `stopOperator` does, then the env's namespaces deleted; parts never started are passed over. */
export async function stopServedLandscape({ env, landscape, mgr }: Partial<ServedLandscape>): Promise<void> {
  if (!env) return;
  if (landscape) await stopOperator(env, landscape, mgr);
  await env.cleanup();
}

/**
 * Lets a landscape go when no operator may finalize it: every IoTService's finalizers removed and
 * every instance namespace deleted, without waiting for them to disappear (their pods would
 * otherwise stay on the shared cluster's nodes).
 */
export async function abandonLandscape(env: TestEnv, landscape: string): Promise<void> {
  const { items } = await env.client.list<IoTObject>(IoTServiceV1alpha1Type, { namespace: landscape }).catch(() => ({ items: [] as IoTObject[] }));
  await Promise.all(items.map((i) => env.client.patch(IoTServiceV1alpha1Type, i.metadata.name!, landscape, { metadata: { finalizers: null } }).catch(() => undefined)));
  const namespaces = await env.client.list(Kinds.Namespace, { labelSelector: `cp.iotservices.io/landscape=${landscape}` }).catch(() => ({ items: [] as KubeObject[] }));
  await Promise.all(namespaces.items.map((ns) => env.client.delete(Kinds.Namespace, ns.metadata.name!).catch(() => undefined)));
}

/** Sum of the operator's write requests (POST, PUT, PATCH, DELETE) so far. */
export async function writeRequests(mgr: Manager): Promise<number> {
  const metric = await mgr.metrics.restRequests.get();
  return metric.values.filter((v) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(String(v.labels.method))).reduce((sum, v) => sum + v.value, 0);
}

const run = promisify(execFile);

/**
 * Builds the reference images of `version` (`scripts/iot-service-images.ts`, cached layers make a
 * second call quick) and pushes them to the cluster's registry; returns the registry they are in
 * (what `--default-registry` or `spec.registry` names).
 */
export async function referenceImages(version: string): Promise<string> {
  const built = await run('node', ['--import', 'tsx', 'scripts/iot-service-images.ts', '--version', version], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 });
  return built.stdout.trim();
}

/** This machine's address on the real node's pod bridge: where its connections to pods come from (a device source for tests). */
export const HOST_ON_POD_NETWORK = '10.244.0.1/32';

/**
 * A landscape whose operator runs the reference images of `version`, built and pushed to the
 * cluster's registry (`referenceImages`), its image-pull-secret holding the registry's credentials.
 */
export async function startReferenceLandscape(env: TestEnv, version: string): Promise<{ landscape: string; mgr: Manager }> {
  const registry = await referenceImages(version);
  await installIoTCrd(env);
  const landscape = await env.namespace('ls');
  await registryPullSecret(env, landscape, 'image-pull-secret');
  return { landscape, mgr: await startOperator(env, landscape, { defaultRegistry: registry }) };
}

/**
 * A spec running every component on the real node, one replica each, broker and database on 1Gi
 * volumes, devices admitted from this machine; each component's fields of `overrides` over it.
 */
export function realNodeSpec(overrides: Partial<Record<ComponentName, Record<string, unknown>>> = {}): Partial<IoTServiceV1alpha1Spec> {
  const own: Partial<Record<ComponentName, Record<string, unknown>>> = { gateway: { deviceSources: [HOST_ON_POD_NETWORK] }, broker: { storage: '1Gi' }, database: { storage: '1Gi' } };
  return Object.fromEntries(COMPONENTS.map((c) => [c, { ...onRealNode, replicas: 1, ...own[c], ...overrides[c] }])) as Partial<IoTServiceV1alpha1Spec>;
}

type RunningPod = KubeObject & { status?: { podIP?: string; phase?: string } };

/** The name and IP of a running pod of `component` in an instance namespace (fails when there is none). */
export async function componentPod(env: TestEnv, namespace: string, component: ComponentName): Promise<{ name: string; ip: string }> {
  const { items } = await env.client.list<RunningPod>(Kinds.Pod, { namespace, labelSelector: `app.kubernetes.io/component=${component}` });
  const pod = items.find((p) => !p.metadata.deletionTimestamp && p.status?.phase === 'Running' && p.status.podIP);
  if (!pod) throw new Error(`no running ${component} pod in ${namespace}: ${JSON.stringify(items.map((p) => [p.metadata.name, p.status?.phase]))}`);
  return { name: pod.metadata.name!, ip: pod.status!.podIP! };
}

/** The instance's API token (Secret `iot-credentials`), as core's clients present it. */
export async function apiToken(env: TestEnv, namespace: string): Promise<string> {
  const secret = (await env.client.get(Kinds.Secret, 'iot-credentials', namespace)) as KubeObject & { data: Record<string, string> };
  return Buffer.from(secret.data['api-token'] ?? '', 'base64').toString('utf8');
}

/** What a device simulated on this machine dials for an instance of the reference images: its core's and gateway's pod IPs, and the API token. */
export async function deviceAddresses(env: TestEnv, namespace: string): Promise<ServiceAddresses> {
  const [gateway, core] = [await componentPod(env, namespace, 'gateway'), await componentPod(env, namespace, 'core')];
  return {
    coreUrl: `http://${core.ip}:8080`,
    gatewayHttpUrl: `http://${gateway.ip}:8080`,
    gatewayMqttUrl: `mqtt://${gateway.ip}:1883`,
    apiToken: await apiToken(env, namespace),
  };
}

/**
 * The same through the gateway's and core's Services (their cluster IPs, which this machine, the
 * real node, reaches through kube-proxy): addresses that outlive the pods, for a device publishing
 * while gateway and core roll.
 */
export async function deviceServiceAddresses(env: TestEnv, namespace: string): Promise<ServiceAddresses> {
  const clusterIp = async (service: string) => ((await env.client.get(Kinds.Service, service, namespace)) as KubeObject & { spec: { clusterIP: string } }).spec.clusterIP;
  const [gateway, core] = [await clusterIp('gateway'), await clusterIp('core')];
  return { coreUrl: `http://${core}:8080`, gatewayHttpUrl: `http://${gateway}:8080`, gatewayMqttUrl: `mqtt://${gateway}:1883`, apiToken: await apiToken(env, namespace) };
}

let kubectlBinary: Promise<string> | undefined;

/** Runs `command` in a pod's (first) container with the project's kubectl (cluster/engines/build.sh control-plane); its stdout. Rejects when kubectl fails or takes over `timeoutMs`. */
export async function execInPod(env: TestEnv, namespace: string, pod: string, command: readonly string[], timeoutMs = 20_000): Promise<string> {
  kubectlBinary ??= run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'], { maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => path.join(stdout.trim().split('\n').at(-1)!, 'kubectl'));
  const { stdout } = await run(await kubectlBinary, ['--kubeconfig', env.kubeconfigPath, 'exec', '-n', namespace, pod, '--', ...command], { timeout: timeoutMs });
  return stdout;
}

/**
 * Dials host:port over TCP from inside a pod (Node's net.connect, 4 s): 'connected', 'timed out' or
 * the error code; `resolved` is the address a name resolved to. A failing `kubectl exec` rejects,
 * so a probe that did not run is never taken for a blocked connection.
 */
export async function dialFromPod(env: TestEnv, namespace: string, pod: string, host: string, port: number): Promise<{ outcome: string; resolved?: string }> {
  const script = [
    `const s = require('node:net').connect({ host: ${JSON.stringify(host)}, port: ${port}, timeout: 4000 });`,
    `s.on('lookup', (e, a) => { if (!e) console.log('resolved ' + a); });`,
    `s.on('connect', () => { console.log('connected'); s.destroy(); });`,
    `s.on('timeout', () => { console.log('timed out'); s.destroy(); });`,
    `s.on('error', (e) => console.log(e.code || e.message));`,
  ].join(' ');
  const lines = (await execInPod(env, namespace, pod, ['node', '-e', script])).trim().split('\n');
  const resolved = lines.find((l) => l.startsWith('resolved '))?.slice('resolved '.length);
  return { outcome: lines.at(-1) ?? '', resolved };
}

type ContainerPod = KubeObject & { status?: { containerStatuses?: Array<{ containerID?: string }> } };

/** SIGKILLs the main process of `pod`'s (first) container through the real node's containerd, as an OOM kill would: every process of the container dies, the pod stays and the kubelet restarts the container. */
export async function sigkillContainer(env: TestEnv, pod: ContainerPod): Promise<void> {
  const id = pod.status?.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//, '');
  assert.ok(id, `${pod.metadata.name} has a running container`);
  await run('ctr', ['--address', realNodeContainerd(env), '-n', 'k8s.io', 'tasks', 'kill', '--signal', 'SIGKILL', id]);
}

/** Every acknowledged message of `deviceId` stored exactly once, and nothing else of it; returns what is stored. */
export async function assertStoredExactlyOnce(at: ServiceAddresses, deviceId: string, messages: readonly DeviceMessage[]): Promise<Awaited<ReturnType<typeof readAllTelemetry>>> {
  const acknowledged = messages.filter((m) => m.ackedAt !== undefined).map((m) => m.messageId).sort();
  const stored = await waitFor(`${acknowledged.length} acknowledged messages of ${deviceId} stored`, async () => {
    const records = await readAllTelemetry(at, deviceId);
    return { done: records.length >= acknowledged.length, value: records, seen: `${records.length} stored` };
  }, { timeoutMs: 120_000, intervalMs: 1000 });
  const ids = stored.map((r) => r.messageId).sort();
  assert.equal(new Set(ids).size, ids.length, 'no message stored twice');
  assert.deepEqual(ids, acknowledged, 'exactly the acknowledged messages are stored');
  return stored;
}
