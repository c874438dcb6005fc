/**
 * The IoTService conversion webhook as users get it: the chart installed with its defaults (two
 * replicas, webhook and conversion on) runs this commit's operator image on the real node, and the
 * operator keeps the cluster-wide CRD's conversion pointed at the release's webhook Service. Proves:
 * the CRD as shipped (naming a Service that does not exist, no CA) is pointed at the release's
 * Service with the chart's CA; an IoTService written as v1alpha1 with placement fields is read back
 * as v1beta1 (placement) and as v1alpha1, the real API server converting through the in-cluster
 * Service; with one operator pod deleted, conversions keep answering from the other replica, and a
 * PodDisruptionBudget selects the release's pods; a second release in another landscape leaves the
 * CRD with the first while the first serves.
 * The seed's manifests (deploy/, as users apply them with kubectl, the landscape named as the seed
 * asks) serve it too, without Helm: the operator makes its webhook certificate into a Secret of its
 * landscape, points the CRD at deploy/operator.yml's Service with that CA, converts through it, and a
 * restarted pod keeps the same certificate (the CRD's caBundle does not change).
 * Afterwards the CRD is pointed back at this test process's conversion server for later test files.
 * Reported as not run, with the reason, where the cluster has no real node.
 */
// run-tests: alone among the IoT files: it hands the CRD's conversion to the chart's and deploy/'s in-cluster Services.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { customResource, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, onRealNode, realNode, repoRoot } from '@iot-operator/local-cluster';
import { parseAllDocuments, stringify } from 'yaml';
import { DEFAULT_CONVERSION_SERVICE, IOTSERVICE_CRD_NAME, conversionClientConfig } from '../src/api/crd.ts';
import { IoTServiceType, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import type { CrdConversion } from '../src/webhooks/crd-conversion.ts';
import { chart, isReady, prepareChartRelease, preStopPauseSeconds, type ChartRelease, type Pod } from './chart-release.ts';
import { abandonLandscape, createThroughConversion, installIoTCrd, iotService, serveIoTConversion } from './e2e-support.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const PodDisruptionBudgets = customResource('policy', 'v1', 'PodDisruptionBudget', 'poddisruptionbudgets');
const WEBHOOK_SERVICE = 'iot-operator-webhook';

type Crd = KubeObject & { spec: { conversion?: CrdConversion } };
type EndpointSlice = KubeObject & { endpoints?: Array<{ targetRef?: { name?: string }; conditions?: { ready?: boolean } }> };

let first: ChartRelease | undefined;
let second: ChartRelease | undefined;
let seedLandscape: ChartRelease | undefined; // only its landscape and image: deploy/ is applied with kubectl
let deployDir = '';
let objects = '';
let kubectl = '';

const clientConfig = async () => (await env.client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME)).spec.conversion?.webhook?.clientConfig;

/** Where the API server reaches the CRD's conversion: `<namespace>/<name>` of a Service, or its URL. */
async function conversionTarget(): Promise<string> {
  const config = await clientConfig();
  return config?.service ? `${config.service.namespace}/${config.service.name}` : (config?.url ?? 'none');
}

/**
 * The CRD as the first release's operator pointed it. The cluster is shared: another test process may
 * point the CRD at its own URL meanwhile (which the operator rightly leaves alone), so the later
 * tests put the first release's conversion back before they start.
 */
let released: CrdConversion | undefined;
async function pointAtFirstRelease(): Promise<void> {
  if ((await conversionTarget()) === `${first!.landscape}/${WEBHOOK_SERVICE}`) return;
  console.log(`# the CRD named ${await conversionTarget()}: pointed back at the first release's Service`);
  await env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: released }], 'json');
}

/** A v1alpha1 IoTService with placement fields on two components, as the seed's YAML writes them. */
const placed = (name: string) =>
  iotService(name, objects, {
    gateway: { nodeSelector: { pool: 'edge' }, tolerations: [{ key: 'edge', operator: 'Exists', effect: 'NoSchedule' }] },
    database: { nodeSelector: { disk: 'ssd' } },
  } as never);

before(async () => {
  if (skip) return;
  await installIoTCrd(env);
  kubectl = path.join((await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
  [first, second, seedLandscape] = await Promise.all([prepareChartRelease(env, 'ls-conv'), prepareChartRelease(env, 'ls-conv2'), prepareChartRelease(env, 'ls-deploy')]);
  objects = await env.namespace('conv-objects');
});

/** Uninstalls the chart releases (the deploy/ tests need the CRD to name a Service nobody serves). */
async function uninstallReleases(): Promise<void> {
  for (const rel of [second, first]) {
    if (!rel) continue;
    await rel.helm('uninstall', rel.release, '-n', rel.landscape, '--wait').catch(() => undefined);
    await abandonLandscape(env, rel.landscape);
  }
  first = second = undefined;
}

after(async () => {
  if (!skip) await serveIoTConversion(env).catch(() => undefined);
  await uninstallReleases();
  if (deployDir) {
    // Cluster-scoped objects of deploy/ that name this landscape; the shared ClusterRole `iot-operator` stays, as after the seed test.
    await kubectlIn(deployDir, ['delete', '--ignore-not-found', '--wait=false', '-f', 'admission_policy.yml']).catch(() => undefined);
    await env.client.delete(Kinds.ClusterRoleBinding, `iot-operator-${seedLandscape!.landscape}`).catch(() => undefined);
    await rm(deployDir, { recursive: true, force: true });
  }
  if (seedLandscape) await abandonLandscape(env, seedLandscape.landscape);
  await env.cleanup();
});

async function kubectlIn(dir: string, args: string[]): Promise<string> {
  return (await run(kubectl, ['--kubeconfig', env.kubeconfigPath, ...args], { cwd: dir })).stdout;
}

describe('the IoTService conversion webhook, served in the cluster by the chart’s operator', { skip }, () => {
  test('the CRD as shipped (a missing Service, no CA) is pointed at the release’s webhook Service with the chart’s CA', async () => {
    const rel = first!;
    await rel.helm('install', rel.release, chart, '-n', rel.landscape, ...rel.values(['--set', 'replicas=2']));
    await rel.waitForReadyPods(2);
    await env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: conversionClientConfig({ service: DEFAULT_CONVERSION_SERVICE }, '') }], 'json');
    const pointedFrom = Date.now();
    await waitFor('the operator to point the CRD at its Service', async () => {
      const target = await conversionTarget();
      return { done: target === `${rel.landscape}/${WEBHOOK_SERVICE}`, value: undefined, seen: target };
    }, { timeoutMs: 90_000, intervalMs: 1000 });
    console.log(`# CRD re-pointed by the operator after ${((Date.now() - pointedFrom) / 1000).toFixed(1)} s`);
    const secret = await env.client.get<KubeObject & { data: Record<string, string> }>(Kinds.Secret, 'iot-operator-webhook-tls', rel.landscape);
    const config = await clientConfig();
    assert.equal(config?.caBundle, secret.data['ca.crt'], 'the API server trusts the chart’s CA');
    assert.equal(config?.url, undefined);
    assert.deepEqual(config?.service, { namespace: rel.landscape, name: WEBHOOK_SERVICE, path: '/convert', port: 443 });
    released = (await env.client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME)).spec.conversion;
  });

  test('an IoTService written as v1alpha1 reads back as v1beta1 (placement) and as v1alpha1, converted through the Service', async () => {
    await pointAtFirstRelease();
    await createThroughConversion(env, placed('placed'), 'the release’s Service', { timeoutMs: 60_000, intervalMs: 1000 });
    const beta = await env.client.get<KubeObject & { spec: Record<string, any> }>(IoTServiceType, 'placed', objects);
    const toleration = { key: 'edge', operator: 'Exists', effect: 'NoSchedule' };
    assert.deepEqual(beta.spec.gateway.placement, { nodeSelector: { pool: 'edge' }, tolerations: [toleration] });
    assert.deepEqual(beta.spec.database.placement, { nodeSelector: { disk: 'ssd' } });
    assert.equal(beta.spec.gateway.nodeSelector, undefined);
    const alpha = await env.client.get<KubeObject & { spec: Record<string, any> }>(IoTServiceV1alpha1Type, 'placed', objects);
    assert.equal(alpha.apiVersion, 'cp.iotservices.io/v1alpha1');
    assert.deepEqual([alpha.spec.gateway.nodeSelector, alpha.spec.gateway.tolerations, alpha.spec.database.nodeSelector], [{ pool: 'edge' }, [toleration], { disk: 'ssd' }]);
    assert.equal(alpha.spec.gateway.placement, undefined);
  });

  test('one operator pod deleted: conversions keep answering from the other replica; a PodDisruptionBudget selects the release’s pods', async () => {
    const rel = first!;
    const pdb = await env.client.get<KubeObject & { spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } } }>(PodDisruptionBudgets, 'iot-operator', rel.landscape);
    assert.equal(pdb.spec.minAvailable, 1);
    const pods = await rel.operatorPods();
    assert.equal(pods.length, 2);
    for (const pod of pods) for (const [key, value] of Object.entries(pdb.spec.selector.matchLabels)) assert.equal(pod.metadata.labels?.[key], value);

    await pointAtFirstRelease();
    const [victim] = pods;
    await env.client.delete(Kinds.Pod, victim!.metadata.name!, rel.landscape);
    const deletedAt = Date.now();
    // The Service routes to ready endpoints: the deleted pod is not one from its deletion on (the
    // pause covers kube-proxy catching up); with publishNotReadyAddresses it would stay one until it exited.
    const pauseSeconds = preStopPauseSeconds(victim!);
    const victimEndpoint = async () => {
      const slices = await env.client.list<EndpointSlice>(Kinds.EndpointSlice, { namespace: rel.landscape, labelSelector: `kubernetes.io/service-name=${WEBHOOK_SERVICE}` });
      return slices.items.flatMap((slice) => slice.endpoints ?? []).find((e) => e.targetRef?.name === victim!.metadata.name);
    };
    const leftEndpoints = waitFor('the deleted pod to be no ready endpoint of the webhook Service', async () => {
      const endpoint = await victimEndpoint();
      return { done: endpoint?.conditions?.ready === false || endpoint === undefined, value: undefined, seen: endpoint };
    }, { timeoutMs: pauseSeconds * 1000, intervalMs: 200 }).then(() => console.log(`# the deleted pod was no ready endpoint ${((Date.now() - deletedAt) / 1000).toFixed(1)} s after its deletion`));
    leftEndpoints.catch(() => undefined); // awaited after the conversions
    const failures: string[] = [];
    let conversions = 0;
    let elsewhere = 0;
    // Reads and writes as v1alpha1 while the pod terminates (preStop pause, shutdown) and for 10 s
    // after; a round during which the CRD named anything but the release's Service does not count.
    const ours = `${rel.landscape}/${WEBHOOK_SERVICE}`;
    for (let round = 0, until = Date.now() + (pauseSeconds + 10) * 1000; Date.now() < until; round++) {
      const before = await conversionTarget();
      const errors: string[] = [];
      await env.client.get(IoTServiceV1alpha1Type, 'placed', objects).catch((err: unknown) => errors.push(`read: ${err instanceof Error ? err.message : String(err)}`));
      await env.client
        .patch(IoTServiceV1alpha1Type, 'placed', objects, { metadata: { labels: { round: String(round) } } }, 'merge')
        .catch((err: unknown) => errors.push(`write: ${err instanceof Error ? err.message : String(err)}`));
      if (before === ours && (await conversionTarget()) === ours) {
        conversions += 2;
        failures.push(...errors);
      } else {
        elsewhere++;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await leftEndpoints;
    if (elsewhere > 0) console.log(`# ${elsewhere} rounds not counted: the CRD named another target (another test process)`);
    assert.ok(conversions >= 20, `${conversions} conversions through the release's Service`);
    assert.deepEqual(failures, [], `${failures.length} of ${conversions} conversions failed`);
    const remaining = (await rel.operatorPods()).filter((p) => p.metadata.name !== victim!.metadata.name);
    assert.ok(remaining.some(isReady), 'the other replica is still Ready');
  });

  test('a second release in another landscape leaves the CRD with the first while the first serves', async () => {
    const rel = second!;
    await pointAtFirstRelease();
    await rel.helm('install', rel.release, chart, '-n', rel.landscape, ...rel.values());
    const [pod] = await rel.waitForReadyPods(1);
    // Its first round runs as the process starts, then every 30 s; its warning names what it left alone.
    const logs = await waitFor('the second operator to say it leaves the CRD alone', async () => {
      const { stdout } = await run(kubectl, ['--kubeconfig', env.kubeconfigPath, 'logs', '-n', rel.landscape, pod!.metadata.name!]);
      return { done: stdout.includes(`"holder":"${first!.landscape}/${WEBHOOK_SERVICE}"`), value: stdout, seen: stdout.split('\n').slice(-5) };
    }, { timeoutMs: 75_000, intervalMs: 2000 });
    assert.match(logs, /another Service with a ready endpoint; left alone/);
    assert.equal(await conversionTarget(), `${first!.landscape}/${WEBHOOK_SERVICE}`);
  });
});

describe('the IoTService conversion webhook, served by the operator of the seed’s deploy/ manifests', { skip }, () => {
  const secretName = 'iot-operator-webhook-cert';
  let landscape = '';
  const caOfSecret = async () => (await env.client.get<KubeObject & { data: Record<string, string> }>(Kinds.Secret, secretName, landscape)).data['ca.crt'];

  before(async () => {
    if (skip) return;
    await uninstallReleases();
    landscape = seedLandscape!.landscape;
    // deploy/ as the seed's walkthrough applies it: the landscape written into every manifest, the
    // image version filled in; here also the image of this commit in the cluster's registry, on the real node.
    deployDir = await mkdtemp(path.join(os.tmpdir(), 'iot-deploy-'));
    await cp(path.join(repoRoot, 'operators/iot/deploy'), deployDir, { recursive: true });
    for (const file of ['service_account.yml', 'role.yml', 'role_binding.yml', 'admission_policy.yml', 'operator.yml']) {
      const text = (await readFile(path.join(deployDir, file), 'utf8')).replaceAll('devawsk8s', landscape);
      await writeFile(path.join(deployDir, file), text);
    }
    const [deployment, ...others] = parseAllDocuments(await readFile(path.join(deployDir, 'operator.yml'), 'utf8')).map((d) => d.toJSON());
    const pod = deployment.spec.template.spec;
    pod.containers[0].image = seedLandscape!.imageRef;
    pod.containers[0].imagePullPolicy = 'Always';
    Object.assign(pod, onRealNode);
    await writeFile(path.join(deployDir, 'operator.yml'), [deployment, ...others].map((doc) => stringify(doc)).join('---\n'));
  });

  test('kubectl apply of deploy/: the operator makes its certificate into a Secret of its landscape and points the CRD at the Service of deploy/operator.yml with that CA', async () => {
    // The CRD as shipped: a Service of landscape devawsk8s that does not exist here, no CA.
    await env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: conversionClientConfig({ service: DEFAULT_CONVERSION_SERVICE }, '') }], 'json');
    for (const file of ['service_account.yml', 'role.yml', 'role_binding.yml', 'admission_policy.yml', 'operator.yml']) await kubectlIn(deployDir, ['apply', '-f', file]);
    await waitFor('the deploy/ operator to point the CRD at its Service', async () => {
      const target = await conversionTarget();
      return { done: target === `${landscape}/${WEBHOOK_SERVICE}`, value: undefined, seen: target };
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    const config = await clientConfig();
    assert.equal(config?.caBundle, await caOfSecret(), 'the API server trusts the CA of the Secret the operator made');
    const secret = await env.client.get<KubeObject & { type: string }>(Kinds.Secret, secretName, landscape);
    assert.equal(secret.type, 'kubernetes.io/tls');
    released = (await env.client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME)).spec.conversion;
  });

  test('a v1alpha1 IoTService is converted through it; a restarted operator pod serves the same certificate', async () => {
    const ours = `${landscape}/${WEBHOOK_SERVICE}`;
    const pointBack = async () => {
      if ((await conversionTarget()) !== ours) await env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: released }], 'json');
    };
    const convertedRoundTrip = async (name: string) => {
      await pointBack();
      await createThroughConversion(env, placed(name), 'the deploy/ operator’s Service', { timeoutMs: 90_000, intervalMs: 1000 });
      const beta = await env.client.get<KubeObject & { spec: Record<string, any> }>(IoTServiceType, name, objects);
      assert.deepEqual(beta.spec.database.placement, { nodeSelector: { disk: 'ssd' } });
      const alpha = await env.client.get<KubeObject & { spec: Record<string, any> }>(IoTServiceV1alpha1Type, name, objects);
      assert.deepEqual(alpha.spec.database.nodeSelector, { disk: 'ssd' });
    };
    await convertedRoundTrip('via-deploy');
    const ca = await caOfSecret();
    const operatorPods = async () => (await env.client.list<Pod>(Kinds.Pod, { namespace: landscape, labelSelector: 'app.kubernetes.io/name=iot-operator' })).items;
    const [old] = await operatorPods();
    await env.client.delete(Kinds.Pod, old!.metadata.name!, landscape);
    await waitFor('a new Ready operator pod', async () => {
      const pods = await operatorPods();
      const ready = pods.filter((p) => p.metadata.name !== old!.metadata.name && isReady(p));
      return { done: ready.length === 1 && pods.length === 1, value: undefined, seen: pods.map((p) => p.metadata.name) };
    }, { timeoutMs: 120_000 });
    await convertedRoundTrip('after-restart');
    assert.equal(await caOfSecret(), ca, 'the restarted pod used the Secret’s certificate, not a new one');
    assert.equal((await clientConfig())?.caBundle, ca, 'the CRD still trusts the same CA');
  });
});
