import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { getIoT, getOrUndefined, iotService, pullSecretData, startServedLandscape, stopServedLandscape, waitForPhase, writeRequests, type IoTObject } from './e2e-support.ts';
import { CHILD_TYPES, FINALIZER, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { COMPONENTS } from '../src/api/iotservice.ts';

type Workload = KubeObject & {
  spec: { replicas?: number; template: { metadata?: { annotations?: Record<string, string> }; spec: { containers: Array<{ image: string }> } } };
  status?: { readyReplicas?: number; updatedReplicas?: number };
};
type Pod = KubeObject & { spec: { containers: Array<{ image: string }>; nodeName?: string; affinity?: unknown }; status?: { phase?: string } };
type Service = KubeObject & { spec: { ports: Array<{ name?: string; port: number }> } };

let env: TestEnv;
let landscape: string;
let mgr: Manager;

before(async () => ({ env, landscape, mgr } = await startServedLandscape()));
after(() => stopServedLandscape({ env, landscape, mgr }));

const labelsOf = (id: string) => ({ 'app.kubernetes.io/managed-by': 'iot-operator', 'cp.iotservices.io/landscape': landscape, 'cp.iotservices.io/instance': id });

async function runningPods(namespace: string): Promise<Pod[]> {
  const { items } = await env.client.list<Pod>(Kinds.Pod, { namespace });
  return items.filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp);
}

describe('IoTService lifecycle on the real cluster', () => {
  it('create: the namespace and every child exist with the labels, the pull secret is a copy, pods run, status Available', async () => {
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-a', landscape));
    const iot = await waitForPhase(env, landscape, 'tenant-a', 'Available');
    const ns = `${landscape}-tenant-a`;

    const namespace = await env.client.get(Kinds.Namespace, ns);
    assert.deepEqual(Object.entries(labelsOf('tenant-a')).filter(([k, v]) => namespace.metadata.labels?.[k] !== v), []);
    const children: Array<[typeof Kinds.Secret, string]> = [
      [Kinds.Secret, 'image-pull-secret'],
      [Kinds.Secret, 'iot-credentials'],
      [Kinds.ConfigMap, 'iot-config'],
      [Kinds.Deployment, 'gateway'],
      [Kinds.Deployment, 'core'],
      [Kinds.Deployment, 'processing'],
      [Kinds.StatefulSet, 'broker'],
      [Kinds.StatefulSet, 'database'],
      [Kinds.Service, 'gateway'],
      [Kinds.Service, 'core'],
      [Kinds.Service, 'broker'],
      [Kinds.Service, 'database'],
      [Kinds.Service, 'broker-client'],
      [Kinds.Service, 'database-client'],
      [Kinds.NetworkPolicy, 'instance-isolation'],
      [Kinds.NetworkPolicy, 'gateway-devices'],
      [Kinds.NetworkPolicy, 'core-applications'],
      [Kinds.NetworkPolicy, 'instance-egress'],
      [Kinds.NetworkPolicy, 'operator-monitoring'],
      ...COMPONENTS.map((c): [typeof Kinds.Secret, string] => [Kinds.NetworkPolicy, `${c}-peers`]),
      [CHILD_TYPES.PodDisruptionBudget!, 'gateway'],
      [CHILD_TYPES.PodDisruptionBudget!, 'database'],
    ];
    for (const [type, name] of children) {
      const child = await env.client.get(type, name, ns);
      for (const [k, v] of Object.entries(labelsOf('tenant-a'))) assert.equal(child.metadata.labels?.[k], v, `${type.kind} ${name} label ${k}`);
    }
    const copy = await env.client.get<KubeObject & { type: string; data: Record<string, string> }>(Kinds.Secret, 'image-pull-secret', ns);
    assert.equal(copy.type, 'kubernetes.io/dockerconfigjson');
    assert.deepEqual(copy.data, pullSecretData);

    const pods = await runningPods(ns);
    assert.equal(pods.length, 7, 'gateway 2 + core 2 + processing 1 + broker 1 + database 1');
    assert.deepEqual(iot.status?.pods, pods.map((p) => p.metadata.name).sort());
    assert.equal(iot.status?.namespace, ns);
    assert.equal(iot.status?.reason, undefined);
    assert.deepEqual(iot.status?.components?.gateway, { desired: 2, updated: 2, ready: 2 });
    assert.deepEqual(iot.status?.components?.broker, { desired: 1, updated: 1, ready: 1 });
    assert.equal(iot.status?.ready, '7/7');
    assert.deepEqual(iot.metadata.finalizers, [FINALIZER]);
    const ready = iot.status?.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'True');
    const events = await env.client.list(Kinds.Event, { namespace: landscape, fieldSelector: `involvedObject.name=tenant-a,reason=Available` });
    assert.ok(events.items.length >= 1, 'an Available Event is recorded on the IoTService');
  });

  it('steady state: a forced resync of an Available instance makes no write request', async () => {
    await waitForPhase(env, landscape, 'tenant-a', 'Available');
    const reconciles = async () => (await mgr.metrics.reconcileTotal.get()).values.reduce((s, v) => s + v.value, 0);
    const before = await writeRequests(mgr);
    const reconcilesBefore = await reconciles();
    mgr.resyncAll();
    await waitFor('the forced resync to reconcile', async () => ({ done: (await reconciles()) > reconcilesBefore, value: undefined }), { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await writeRequests(mgr), before, 'no POST/PUT/PATCH/DELETE during a resync of an unchanged instance');
  });

  it('scale up and down, then a new version: Processing, then Available with workloads rolled', async () => {
    const ns = `${landscape}-tenant-a`;
    const phases: string[] = [];
    const watch = await env.client.watch(IoTServiceV1alpha1Type, { namespace: landscape, fieldSelector: 'metadata.name=tenant-a' });
    const recording = (async () => {
      for await (const line of watch.lines) {
        const phase = (JSON.parse(line) as { object: IoTObject }).object.status?.phase;
        if (phase && phases.at(-1) !== phase) phases.push(phase);
      }
    })().catch(() => undefined);
    try {
      await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { gateway: { replicas: 4 } } });
      let iot = await waitForPhase(env, landscape, 'tenant-a', 'Available');
      assert.deepEqual(iot.status?.components?.gateway, { desired: 4, updated: 4, ready: 4 });
      assert.equal((await env.client.get<Workload>(Kinds.Deployment, 'gateway', ns)).spec.replicas, 4);

      await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { gateway: { replicas: 1 } } });
      iot = await waitForPhase(env, landscape, 'tenant-a', 'Available');
      assert.deepEqual(iot.status?.components?.gateway, { desired: 1, updated: 1, ready: 1 });
      await waitFor('gateway pods to scale down to 1', async () => {
        const n = (await runningPods(ns)).filter((p) => p.metadata.name!.startsWith('gateway-')).length;
        return { done: n === 1, value: n, seen: `${n} running gateway pods` };
      });

      await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { version: '2.5.0' } });
      iot = await waitForPhase(env, landscape, 'tenant-a', 'Available');
      await waitFor('every running pod to run version 2.5.0', async () => {
        const pods = await runningPods(ns);
        const images = pods.flatMap((p) => p.spec.containers.map((c) => c.image));
        return { done: pods.length === 6 && images.every((i) => i.endsWith(':2.5.0')), value: images, seen: images };
      });
      for (const name of ['gateway', 'core', 'processing']) {
        const d = await env.client.get<Workload>(Kinds.Deployment, name, ns);
        assert.ok(d.spec.template.spec.containers[0]!.image.endsWith(':2.5.0'), `${name} rolled to 2.5.0`);
      }
      for (const name of ['broker', 'database']) {
        const s = await env.client.get<Workload>(Kinds.StatefulSet, name, ns);
        assert.ok(s.spec.template.spec.containers[0]!.image.endsWith(':2.5.0'), `${name} rolled to 2.5.0`);
      }
      assert.ok(phases.includes('Processing'), `status passed through Processing; phases seen: ${phases.join(' -> ')}`);
      assert.equal(phases.at(-1), 'Available');
    } finally {
      watch.close();
      await recording;
    }
  });

  it('a spec.config change rolls the pods', async () => {
    const ns = `${landscape}-tenant-a`;
    const checksum = async () => (await env.client.get<Workload>(Kinds.Deployment, 'core', ns)).spec.template.metadata?.annotations?.['cp.iotservices.io/config-checksum'];
    const before = await checksum();
    const podsBefore = new Set((await runningPods(ns)).filter((p) => p.metadata.name!.startsWith('core-')).map((p) => p.metadata.name));
    await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { config: { logLevel: 'debug' } } });
    await waitForPhase(env, landscape, 'tenant-a', 'Available');
    const config = await env.client.get<KubeObject & { data: Record<string, string> }>(Kinds.ConfigMap, 'iot-config', ns);
    assert.match(config.data['config.yml']!, /^"logLevel": "debug"$/m);
    assert.notEqual(await checksum(), before, 'the config checksum on the pod template changed');
    await waitFor('core pods to be replaced', async () => {
      const now = (await runningPods(ns)).filter((p) => p.metadata.name!.startsWith('core-')).map((p) => p.metadata.name);
      return { done: now.length === 2 && now.every((n) => !podsBefore.has(n)), value: now, seen: { before: [...podsBefore], now } };
    });
  });

  it('a field removed from the spec is removed from the workload', async () => {
    const ns = `${landscape}-tenant-a`;
    type Limits = { spec: { template: { spec: { containers: Array<{ resources?: { limits?: Record<string, string> } }> } } } };
    const limits = async () => (await env.client.get<KubeObject & Limits>(Kinds.Deployment, 'core', ns)).spec.template.spec.containers[0]!.resources?.limits;
    await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { core: { resources: { limits: { cpu: '500m', memory: '256Mi' } } } } });
    await waitFor('core limits cpu and memory', async () => { const l = await limits(); return { done: l?.cpu === '500m' && l?.memory === '256Mi', value: l, seen: l }; });
    await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { core: { resources: { limits: { cpu: null } } } } });
    await waitFor('the cpu limit to be gone, the memory limit kept', async () => { const l = await limits(); return { done: l?.cpu === undefined && l?.memory === '256Mi', value: l, seen: l }; });
    await waitForPhase(env, landscape, 'tenant-a', 'Available');
  });

  it('drift: a deleted Deployment, an edited Service port and a deleted copied secret are restored', async () => {
    const ns = `${landscape}-tenant-a`;
    const credentialsBefore = (await env.client.get<KubeObject & { data: Record<string, string> }>(Kinds.Secret, 'iot-credentials', ns)).data;
    await env.client.delete(Kinds.Deployment, 'processing', ns);
    await env.client.patch(Kinds.Service, 'core', ns, [{ op: 'replace', path: '/spec/ports/0/port', value: 9999 }], 'json');
    await env.client.delete(Kinds.Secret, 'image-pull-secret', ns);

    await waitFor('processing Deployment to be recreated', async () => {
      const d = await getOrUndefined<Workload>(env, Kinds.Deployment, 'processing', ns);
      return { done: !!d && !d.metadata.deletionTimestamp, value: d, seen: d ? 'terminating' : 'absent' };
    });
    await waitFor('core Service port to be 8080 again', async () => {
      const s = await env.client.get<Service>(Kinds.Service, 'core', ns);
      return { done: s.spec.ports[0]?.port === 8080, value: s, seen: s.spec.ports };
    });
    await waitFor('image-pull-secret to be copied again', async () => {
      const s = await getOrUndefined<KubeObject & { data?: Record<string, string> }>(env, Kinds.Secret, 'image-pull-secret', ns);
      return { done: JSON.stringify(s?.data) === JSON.stringify(pullSecretData), value: s, seen: s?.data ?? 'absent' };
    });
    await waitForPhase(env, landscape, 'tenant-a', 'Available');
    const credentialsAfter = (await env.client.get<KubeObject & { data: Record<string, string> }>(Kinds.Secret, 'iot-credentials', ns)).data;
    assert.deepEqual(credentialsAfter, credentialsBefore, 'generated credentials never change');
  });

  it('a hand-deleted instance namespace is recreated with everything in it', async () => {
    const ns = `${landscape}-tenant-a`;
    const before = await env.client.get(Kinds.Namespace, ns);
    await env.client.delete(Kinds.Namespace, ns);
    await waitFor(`namespace ${ns} to be recreated`, async () => {
      const now = await getOrUndefined(env, Kinds.Namespace, ns);
      return { done: !!now && now.metadata.uid !== before.metadata.uid && !now.metadata.deletionTimestamp, value: now, seen: now ? (now.metadata.uid === before.metadata.uid ? 'old namespace still terminating' : 'new') : 'absent' };
    }, { timeoutMs: 120_000 });
    const iot = await waitForPhase(env, landscape, 'tenant-a', 'Available', 120_000);
    assert.match(iot.status?.ready ?? '', /^(\d+)\/\1$/, 'every desired pod is ready again');
    assert.ok(await getOrUndefined(env, Kinds.Secret, 'iot-credentials', ns), 'credentials exist again');
  });

  it('a change of the source image-pull-secret reaches the copy', async () => {
    const ns = `${landscape}-tenant-a`;
    const rotated = Buffer.from('{"auths":{"registry.example.com":{"auth":"cm90YXRlZDpzZWNyZXQ="}}}').toString('base64');
    await env.client.patch(Kinds.Secret, 'image-pull-secret', landscape, { data: { '.dockerconfigjson': rotated } });
    await waitFor('the copy to carry the rotated credentials', async () => {
      const s = await env.client.get<KubeObject & { data: Record<string, string> }>(Kinds.Secret, 'image-pull-secret', ns);
      return { done: s.data['.dockerconfigjson'] === rotated, value: s, seen: s.data };
    });
    await env.client.patch(Kinds.Secret, 'image-pull-secret', landscape, { data: pullSecretData });
  });

  it('paused: children are left exactly as they are, status is still reported', async () => {
    const ns = `${landscape}-tenant-a`;
    await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { paused: true } });
    await waitFor('the paused generation to be observed', async () => {
      const iot = await getIoT(env, landscape, 'tenant-a');
      return { done: iot?.status?.observedGeneration === iot?.metadata.generation, value: iot, seen: iot?.status };
    });
    await env.client.delete(Kinds.ConfigMap, 'iot-config', ns);
    await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { core: { replicas: 3 } } });
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(await getOrUndefined(env, Kinds.ConfigMap, 'iot-config', ns), undefined, 'a paused instance is not repaired');
    assert.equal((await env.client.get<Workload>(Kinds.Deployment, 'core', ns)).spec.replicas, 2, 'a paused instance is not scaled');
    const iot = await getIoT(env, landscape, 'tenant-a');
    assert.equal(iot?.status?.observedGeneration, iot?.metadata.generation, 'status is still reported while paused');

    await env.client.patch(IoTServiceV1alpha1Type, 'tenant-a', landscape, { spec: { paused: false } });
    await waitForPhase(env, landscape, 'tenant-a', 'Available');
    assert.ok(await getOrUndefined(env, Kinds.ConfigMap, 'iot-config', ns), 'unpausing repairs the instance');
    assert.equal((await env.client.get<Workload>(Kinds.Deployment, 'core', ns)).spec.replicas, 3);
  });

  it('spec.gateway.affinity: a required node affinity to one kwok node puts every gateway pod there', async () => {
    const nodes = await env.client.list(Kinds.Node);
    const kwok = nodes.items.filter((n) => n.metadata.annotations?.['kwok.x-k8s.io/node'] === 'fake').map((n) => n.metadata.labels?.['kubernetes.io/hostname'] ?? '').sort();
    assert.ok(kwok.length >= 2, `the test needs two kwok nodes, found ${kwok.join(', ')}`);
    const target = kwok.at(-1)!;
    const affinity = {
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In' as const, values: [target] }] }] } },
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 100, podAffinityTerm: { labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'gateway' } }, topologyKey: 'kubernetes.io/hostname' } },
        ],
      },
    };
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-n', landscape, { gateway: { replicas: 3, affinity } }));
    await waitForPhase(env, landscape, 'tenant-n', 'Available');
    const ns = `${landscape}-tenant-n`;
    const deployment = await env.client.get<Workload & { spec: { template: { spec: { affinity?: unknown } } } }>(Kinds.Deployment, 'gateway', ns);
    assert.deepEqual(deployment.spec.template.spec.affinity, affinity, 'the pod template carries the affinity as given');
    const gateways = (await runningPods(ns)).filter((p) => p.metadata.name!.startsWith('gateway-'));
    assert.deepEqual(gateways.map((p) => p.spec.nodeName), [target, target, target], `every gateway pod on ${target}, despite the preferred spreading`);
    const others = (await runningPods(ns)).filter((p) => !p.metadata.name!.startsWith('gateway-'));
    assert.ok(others.every((p) => p.spec.affinity === undefined), 'the other components have no affinity');
  });

  it('delete: the namespace goes, then the finalizer, then the IoTService', async () => {
    const ns = `${landscape}-tenant-a`;
    await env.client.delete(IoTServiceV1alpha1Type, 'tenant-a', landscape);
    await waitFor(`namespace ${ns} to be gone`, async () => {
      const n = await getOrUndefined(env, Kinds.Namespace, ns);
      return { done: !n, value: undefined, seen: n?.metadata.deletionTimestamp ? 'terminating' : 'present' };
    }, { timeoutMs: 120_000 });
    await waitFor('the IoTService to be gone', async () => {
      const iot = await getIoT(env, landscape, 'tenant-a');
      return { done: !iot, value: undefined, seen: iot?.metadata.finalizers };
    });
  });
});
