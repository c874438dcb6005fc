/**
 * The IoT operator as users run it: its image, installed with its Helm chart into a landscape that
 * enforces the Pod Security Standard `restricted`, in a real pod on the local cluster's real node
 * (the IoT services it creates stay on the kwok nodes). Proves the Dockerfile, the in-cluster
 * ServiceAccount token, the kubelet's probes, the read-only root file system, secure metrics
 * through the chart's Service, `helm upgrade`, leader handover between two real pods on SIGTERM,
 * a burst of 100 instances under the chart's memory limit, two pods sharing the instances as
 * shards of the chart's ControllerRing (the cluster's controller sharder assigns them), and
 * `helm uninstall` (nothing of the operator left, its admission webhook configuration included).
 *
 * Pulling: the image is pushed to the cluster's private registry, the landscape's
 * image-pull-secret holds the registry's credentials (the chart's pod and ServiceAccount name it),
 * and the chart's `image.pullPolicy=Always` makes the kubelet resolve the tag in the registry with
 * that secret on every pod start (the tag is the commit's version: a rebuild reuses it). The pod's
 * imageID is the registry's digest.
 * Reported as not run, with the reason, where the cluster has no real node.
 */
// run-tests: alone among the IoT files: its burst of 100 instances keeps the kwok nodes busy for minutes; other IoT files' instances would wait behind it.
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { CONTROLLER_RING_LABEL, Kinds, customResource, isNotFound, shardLabel, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { deletePodAwaitingHandover, localTestEnv, podPeakMemoryBytes, realNode, REAL_NODE_NAME, registryImageId } from '@iot-operator/local-cluster';
import { chart, isReady, prepareChartRelease, preStopPauseSeconds, type ChartRelease, type Pod } from './chart-release.ts';
import { abandonLandscape, iotService, waitForPhase, type IoTObject } from './e2e-support.ts';

process.env.CLUSTER_SHARDER = '1'; // cluster up (run by localTestEnv) starts the sharder unless it runs
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const IoTServices = customResource('cp.iotservices.io', 'v1alpha1', 'IoTService', 'iotservices');
/** The stored version: the polls of 100 IoTServices read their status without a conversion each time. */
const StoredIoTServices = customResource('cp.iotservices.io', 'v1beta1', 'IoTService', 'iotservices');

type Lease = KubeObject & { spec: { holderIdentity?: string } };

let rel: ChartRelease;
let landscape = '';
let release = '';

/** GET https://<metrics Service>/metrics from this machine, as a scraper would. */
async function scrape(token?: string): Promise<{ status: number; body: string }> {
  const service = (await env.client.get(Kinds.Service, 'iot-operator-metrics', landscape)) as KubeObject & { spec: { clusterIP: string } };
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: service.spec.clusterIP, port: 8080, path: '/metrics', rejectUnauthorized: false, timeout: 10_000, headers: token ? { Authorization: `Bearer ${token}` } : {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d)).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('metrics request timed out'))).on('error', reject).end();
  });
}

async function serviceAccountToken(namespace: string, name: string): Promise<string> {
  const answer = await env.client.raw<{ status?: { token?: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  });
  return answer.status!.token!;
}

before(async () => {
  if (skip) return;
  rel = await prepareChartRelease(env, 'ls-pod');
  ({ landscape, release } = rel);
});

after(async () => {
  if (landscape) await rel.helm('uninstall', release, '-n', landscape, '--wait').catch(() => undefined);
  // The operator is gone: its 100 instances' namespaces (700 pods) would stay on the cluster.
  if (landscape) await abandonLandscape(env, landscape);
  await env.cleanup();
});

describe('the IoT operator in a real pod, installed with its chart', { skip }, () => {
  test('helm install: the pod, pulled from the registry with the landscape’s image-pull-secret, passes PSA restricted, becomes Ready through its probes on the real node, and makes an IoTService Available', async () => {
    const started = Date.now();
    await rel.helm('install', release, chart, '-n', landscape, ...rel.values());
    const [pod] = await rel.waitForReadyPods(1);
    console.log(`# install → operator pod Ready: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(pod!.spec.nodeName, REAL_NODE_NAME);
    assert.equal(pod!.status?.containerStatuses?.[0]?.imageID, await registryImageId(env, rel.imageRef));
    await env.client.create(IoTServices, iotService('tenant-a', landscape));
    const iot = await waitForPhase(env, landscape, 'tenant-a', 'Available', 120_000);
    assert.equal(iot.status?.ready, '7/7');
    const children = (await env.client.list(Kinds.Pod, { namespace: `${landscape}-tenant-a` })).items as Pod[];
    assert.ok(children.length > 0 && children.every((p) => p.spec.nodeName !== REAL_NODE_NAME), 'the instance’s pods stay on the kwok nodes');
  });

  test('metrics through the chart’s Service: refused without a token, served to a ServiceAccount bound to the metrics-reader role', async () => {
    assert.equal((await scrape()).status, 401);
    await env.client.create(Kinds.ServiceAccount, { metadata: { name: 'scraper', namespace: landscape } });
    const token = await serviceAccountToken(landscape, 'scraper');
    assert.equal((await scrape(token)).status, 403, 'an unbound ServiceAccount may not read /metrics');
    await env.client.create(Kinds.ClusterRoleBinding, {
      metadata: { name: `${landscape}-scraper` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${landscape}-iot-operator-metrics-reader` },
      subjects: [{ kind: 'ServiceAccount', name: 'scraper', namespace: landscape }],
    });
    try {
      const metrics = await waitFor('/metrics to answer 200', async () => {
        const answer = await scrape(token);
        return { done: answer.status === 200, value: answer.body, seen: answer.status };
      }, { timeoutMs: 20_000 });
      assert.match(metrics, /controller_runtime_reconcile_total\{[^}]*controller="iotservice"[^}]*\} [1-9]/);
    } finally {
      await env.client.delete(Kinds.ClusterRoleBinding, `${landscape}-scraper`).catch(() => undefined);
    }
  });

  test('helm upgrade rolls the pod; the IoTService stays Available throughout', async () => {
    const [before] = await rel.operatorPods();
    const watching = watchPhase('tenant-a');
    await rel.helm('upgrade', release, chart, '-n', landscape, ...rel.values(['--set', 'logLevel=debug']));
    const [after] = await waitFor('a new operator pod, Ready', async () => {
      const pods = await rel.operatorPods();
      return { done: pods.length === 1 && pods[0]!.metadata.name !== before!.metadata.name && isReady(pods[0]!), value: pods, seen: pods.map((p) => p.metadata.name) };
    }, { timeoutMs: 120_000 });
    assert.ok(after);
    await env.client.patch(IoTServices, 'tenant-a', landscape, { spec: { gateway: { replicas: 2 } } });
    const iot = await waitFor('the new pod to reconcile a change', async () => {
      const o = (await env.client.get(IoTServices, 'tenant-a', landscape)) as IoTObject;
      return { done: o.status?.observedGeneration === o.metadata.generation && o.status?.phase === 'Available', value: o, seen: o.status };
    }, { timeoutMs: 90_000 });
    assert.equal(iot.status?.phase, 'Available');
    assert.deepEqual(watching.stop(), ['Available'], 'phases seen during the upgrade');
  });

  test('two replicas: deleting the leader’s pod (SIGTERM) releases its Lease and the other pod takes over', async () => {
    await rel.helm('upgrade', release, chart, '-n', landscape, ...rel.values(['--set', 'replicas=2']));
    await rel.waitForReadyPods(2);
    const leaseName = `iot-operator-${landscape}`;
    const lease = await waitFor('a leader', async () => {
      const l = (await env.client.get(Kinds.Lease, leaseName, landscape)) as Lease;
      return { done: !!l.spec.holderIdentity, value: l, seen: l.spec };
    });
    const pods = await rel.operatorPods();
    const leader = pods.find((p) => lease.spec.holderIdentity!.startsWith(p.metadata.name!));
    assert.ok(leader, `the holder ${lease.spec.holderIdentity} is one of the pods ${pods.map((p) => p.metadata.name).join(', ')}`);
    const { goneSeconds, handoverSeconds, newHolder } = await deletePodAwaitingHandover(env, { name: leader.metadata.name!, namespace: landscape }, landscape, leaseName);
    console.log(`# leader handover after deleting the leader's pod: ${handoverSeconds.toFixed(1)} s (new holder ${newHolder}); old pod gone after ${goneSeconds.toFixed(1)} s`);
    // SIGTERM comes after the preStop pause, during which the leader still renews. Released on
    // SIGTERM, the Lease changes hands within seconds of it, where one left to expire would take its
    // 15 s more; and the pod exits well inside its grace period instead of being killed at its end.
    const pauseSeconds = preStopPauseSeconds(leader);
    assert.ok(handoverSeconds < pauseSeconds + 10, `handover took ${handoverSeconds} s, ${pauseSeconds} s of them the preStop pause`);
    assert.ok(goneSeconds < pauseSeconds + 30, `the old pod took ${goneSeconds} s to exit`);
    await env.client.patch(IoTServices, 'tenant-a', landscape, { spec: { gateway: { replicas: 1 } } });
    await waitFor('the new leader to reconcile a change', async () => {
      const o = (await env.client.get(IoTServices, 'tenant-a', landscape)) as IoTObject;
      return { done: o.status?.observedGeneration === o.metadata.generation && o.status?.phase === 'Available', value: o, seen: o.status };
    }, { timeoutMs: 90_000 });
  });

  test('a burst of 100 IoTServices under the chart’s memory limit: all Available, no restart, no OOMKill', async () => {
    await rel.helm('upgrade', release, chart, '-n', landscape, ...rel.values(['--set', 'replicas=1']));
    await rel.waitForReadyPods(1);
    const started = Date.now();
    const names = Array.from({ length: 100 }, (_, i) => `burst-${String(i).padStart(3, '0')}`);
    // Data in emptyDirs: the burst weighs the operator, not the provisioner's 200 volumes.
    const ephemeral = { broker: { storage: 'ephemeral' }, database: { storage: 'ephemeral' } } as never;
    for (let i = 0; i < names.length; i += 20) await Promise.all(names.slice(i, i + 20).map((n) => env.client.create(IoTServices, iotService(n, landscape, ephemeral))));
    await waitFor('100 IoTServices Available', async () => {
      const items = (await env.client.list(StoredIoTServices, { namespace: landscape })).items as IoTObject[];
      const available = items.filter((o) => o.metadata.name!.startsWith('burst-') && o.status?.phase === 'Available').length;
      return { done: available === 100, value: available, seen: `${available} of 100 Available` };
    }, { timeoutMs: 600_000, intervalMs: 2_000 });
    const [pod] = await rel.operatorPods();
    const peakMiB = podPeakMemoryBytes(pod!.metadata.uid!) / 1024 / 1024;
    console.log(`# burst of 100 IoTServices with the operator in a pod: all Available after ${((Date.now() - started) / 1000).toFixed(0)} s; the pod's peak memory ${peakMiB.toFixed(1)} MiB (limit 256 MiB)`);
    assert.ok(peakMiB < 256, `peak ${peakMiB} MiB`);
    const status = pod!.status?.containerStatuses?.[0];
    assert.equal(status?.restartCount, 0, `restarts; last state ${JSON.stringify(status?.lastState)}`);
    assert.notEqual(status?.lastState?.terminated?.reason, 'OOMKilled');
  });

  test('sharding.enabled: two pods share the instances as shards of the chart’s ring (the second joins through drains); a deleted pod’s instances move to the pod that replaces it', async () => {
    await rel.helm('upgrade', release, chart, '-n', landscape, ...rel.values(['--set', 'replicas=2', '--set', 'sharding.enabled=true']));
    const ring = `iot-${landscape}`;
    const shardOf = (o: KubeObject) => o.metadata.labels?.[shardLabel(ring)];
    const assignment = async () => {
      const items = (await env.client.list(StoredIoTServices, { namespace: landscape })).items as IoTObject[];
      const pods = (await rel.operatorPods()).filter(isReady).map((p) => p.metadata.name!);
      const byPod = new Map(pods.map((p) => [p, items.filter((o) => shardOf(o) === p).length]));
      const available = items.filter((o) => o.status?.phase === 'Available' && o.status.observedGeneration === o.metadata.generation).length;
      return { items, pods, byPod, available, elsewhere: items.filter((o) => !pods.includes(shardOf(o) ?? '')).length };
    };
    const shared = await waitFor('every IoTService assigned to one of two Ready pods, each holding at least a fifth', async () => {
      const a = await assignment();
      return { done: a.pods.length === 2 && a.elsewhere === 0 && [...a.byPod.values()].every((n) => n >= a.items.length / 5), value: a, seen: { pods: a.pods, byPod: [...a.byPod], elsewhere: a.elsewhere } };
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    console.log(`# two sharded operator pods: ${[...shared.byPod].map(([p, n]) => `${p} holds ${n}`).join(', ')}`);
    for (const pod of shared.pods) {
      const lease = (await env.client.get(Kinds.Lease, pod, landscape)) as Lease;
      assert.equal(lease.spec.holderIdentity, pod, `the shard Lease ${pod} is held by its pod`);
      assert.equal(lease.metadata.labels?.[CONTROLLER_RING_LABEL], ring);
    }
    const [gone] = shared.pods;
    await env.client.delete(Kinds.Pod, gone!, landscape);
    const moved = await waitFor(`${gone}'s instances on the remaining pods, all Available`, async () => {
      const a = await assignment();
      return { done: !a.pods.includes(gone!) && a.pods.length === 2 && a.elsewhere === 0 && a.available === a.items.length, value: a, seen: { pods: a.pods, byPod: [...a.byPod], elsewhere: a.elsewhere, available: a.available } };
    }, { timeoutMs: 180_000, intervalMs: 1000 });
    console.log(`# after deleting ${gone}: ${[...moved.byPod].map(([p, n]) => `${p} holds ${n}`).join(', ')}`);
    await env.client.patch(IoTServices, 'tenant-a', landscape, { spec: { gateway: { replicas: 2 } } });
    await waitFor('tenant-a’s change reconciled by its shard', async () => {
      const o = (await env.client.get(IoTServices, 'tenant-a', landscape)) as IoTObject;
      return { done: o.status?.observedGeneration === o.metadata.generation && o.status?.phase === 'Available', value: o, seen: o.status };
    }, { timeoutMs: 90_000 });
  });

  test('helm uninstall leaves no operator object behind', async () => {
    await rel.helm('uninstall', release, '-n', landscape, '--wait');
    await waitFor('the operator pods to be gone', async () => {
      const pods = await rel.operatorPods();
      return { done: pods.length === 0, value: undefined, seen: pods.map((p) => p.metadata.name) };
    }, { timeoutMs: 90_000 });
    const left: string[] = [];
    const check = async (type: Parameters<TestEnv['client']['get']>[0], name: string, namespace?: string) => {
      if (await env.client.get(type, name, namespace).then(() => true, (e: unknown) => (isNotFound(e) ? false : Promise.reject(e)))) left.push(`${type.kind} ${name}`);
    };
    await check(customResource('sharding.timebertt.dev', 'v1alpha1', 'ControllerRing', 'controllerrings', false), `iot-${landscape}`);
    await check(Kinds.Deployment, 'iot-operator', landscape);
    await check(Kinds.ServiceAccount, 'iot-operator', landscape);
    await check(Kinds.Service, 'iot-operator-metrics', landscape);
    await check(Kinds.Secret, 'iot-operator-metrics-tls', landscape);
    await check(Kinds.Service, 'iot-operator-webhook', landscape);
    await check(Kinds.Secret, 'iot-operator-webhook-tls', landscape);
    await check(customResource('admissionregistration.k8s.io', 'v1', 'ValidatingWebhookConfiguration', 'validatingwebhookconfigurations', false), `iot-operator-${landscape}`);
    await check(Kinds.Role, 'iot-operator', landscape);
    await check(Kinds.RoleBinding, 'iot-operator', landscape);
    await check(Kinds.ClusterRole, `iot-operator-${landscape}`);
    await check(Kinds.ClusterRole, `${landscape}-iot-operator-metrics-reader`);
    await check(Kinds.ClusterRoleBinding, `iot-operator-${landscape}`);
    await check(Kinds.ClusterRole, `iot-operator-${landscape}-metrics-auth`);
    await check(Kinds.ClusterRoleBinding, `iot-operator-${landscape}-metrics-auth`);
    assert.deepEqual(left, []);
  });
});

/** Records the distinct phases an IoTService shows while something else happens. */
function watchPhase(name: string): { stop(): string[] } {
  const seen: string[] = [];
  let running = true;
  void (async () => {
    while (running) {
      const o = (await env.client.get(IoTServices, name, landscape).catch(() => undefined)) as IoTObject | undefined;
      const phase = o?.status?.phase ?? 'missing';
      if (seen.at(-1) !== phase) seen.push(phase);
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    stop() {
      running = false;
      return seen;
    },
  };
}
