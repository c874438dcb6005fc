/**
 * Network isolation with real packets: two IoT instances whose component pods run on the local
 * cluster's real node, where kube-router enforces NetworkPolicies (cluster/parts/network-policy).
 * Each component runs a small image made here (busybox listening on the ports the component
 * declares, answering its probes), loaded onto the node under the name the operator gives it.
 * Checked: within an instance each component reaches exactly the ports it uses (gateway → broker
 * 4222 and core 8080; core → database 5432 and broker 4222; processing → broker 4222 and database
 * 5432) and no other — the gateway not the database, no component another's health port (8081)
 * or the broker's route (6222) and monitoring (8222) ports; another instance's pods and an outside
 * pod of the project reach nothing; device traffic reaches the gateway's device ports only from
 * `spec.gateway.deviceSources` and stops when the source is removed, applications reach core's
 * API port only from `spec.core.applicationSources`, likewise; the landscape namespace,
 * where an operator in the cluster runs, reaches the broker's monitoring port and nothing else; connections out of the
 * instance to an undeclared destination fail, a declared one (`spec.egress`) is reached from
 * every component, and the instance's own names resolve through cluster DNS in kube-system. (The
 * routes between three brokers, 6222, are used by ingestion.e2e's reference images.) Every
 * address dialled is a pod of the test. The API server rejecting a non-CIDR source or destination
 * is checked on any cluster; the packet tests are reported as not run, with the reason, where the
 * cluster has no real node.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { ApiError, Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { busyboxImage, importScratchImage, localTestEnv, onRealNode, realNode, tagOnRealNode } from '@iot-operator/local-cluster';
import { COMPONENTS, type ComponentName } from '../src/api/iotservice.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { PORTS } from '../src/resources/ports.ts';
import { execInPod, iotService, realNodeTenancy, startServedLandscape, stopServedLandscape, waitForPhase } from './e2e-support.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const REGISTRY = 'registry.example.com/iot';
const VERSION = '2.4.1';

let landscape: string;
let mgr: Manager | undefined;

before(async () => ({ landscape, mgr } = await startServedLandscape({ defaultRegistry: REGISTRY, tenancy: { ...realNodeTenancy(REGISTRY), allowedServiceTypes: ['ClusterIP', 'NodePort'] } })));
after(() => stopServedLandscape({ env, landscape, mgr }));

// Which ports each component listens on, as the operator declares them (ports.ts).
const LISTEN: Readonly<Record<ComponentName, number[]>> = {
  gateway: [PORTS.mqtts, PORTS.https, PORTS.health], // the default protocols
  core: [PORTS.http, PORTS.health],
  processing: [PORTS.health],
  broker: [PORTS.brokerClient, PORTS.brokerCluster, PORTS.brokerMonitor],
  database: [PORTS.database],
};

/**
 * One image for every component, tagged `<registry>/iot-<component>:<version>` on the real node:
 * busybox's httpd on each port of the component its pod's name starts with (/readyz, /healthz and
 * / answer "ok"), as the non-root user and on the read-only root file system the operator gives it.
 */
async function loadComponentImages(): Promise<void> {
  await busyboxImage(env);
  const source = `localhost/iot-operator-test/iot-component:${VERSION}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'iot-component-'));
  try {
    const cases = COMPONENTS.map((c) => `  ${c}-*) ports="${LISTEN[c].join(' ')}" ;;`).join('\n');
    writeFileSync(path.join(dir, 'serve'), `#!/bin/sh\ncase "$(hostname)" in\n${cases}\nesac\nfor p in $ports; do httpd -p "$p" -h /www; done\nexec sleep 2147483647\n`, { mode: 0o755 });
    await importScratchImage(env, source, async (container) => {
      await run('buildah', ['copy', container, '/bin/busybox', '/bin/busybox']);
      await run('buildah', ['run', '--isolation', 'chroot', container, '/bin/busybox', '--install', '-s', '/bin']);
      await run('buildah', ['run', '--isolation', 'chroot', container, '/bin/sh', '-c', 'mkdir -p /www && for f in index.html readyz healthz; do echo ok >/www/$f; done']);
      await run('buildah', ['copy', container, path.join(dir, 'serve'), '/serve']);
      await run('buildah', ['config', '--entrypoint', '["/serve"]', container]);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  for (const c of COMPONENTS) await tagOnRealNode(env, source, `${REGISTRY}/iot-${c}:${VERSION}`);
}

/** Every component of the instance on the real node, one replica each. */
const onTheRealNode = Object.fromEntries(COMPONENTS.map((c) => [c, { replicas: 1, nodeSelector: onRealNode.nodeSelector, tolerations: onRealNode.tolerations }]));

type Pod = KubeObject & { status?: { podIP?: string; conditions?: Array<{ type: string; status: string }> } };

/** The pod name and IP of each component of an instance. */
async function componentPods(instance: string): Promise<Record<ComponentName, { name: string; ip: string }>> {
  const { items } = await env.client.list<Pod>(Kinds.Pod, { namespace: `${landscape}-${instance}` });
  const pods = Object.fromEntries(items.filter((p) => !p.metadata.deletionTimestamp).map((p) => [p.metadata.labels?.['app.kubernetes.io/component'], { name: p.metadata.name!, ip: p.status?.podIP ?? '' }]));
  for (const c of COMPONENTS) assert.ok(pods[c]?.ip, `${instance} has a running ${c} pod: ${JSON.stringify(pods)}`);
  return pods as Record<ComponentName, { name: string; ip: string }>;
}

/** Whether an HTTP request from the pod to address:port is answered "ok" within 5 s (busybox 1.35's `wget -T` crashes: `timeout` bounds it). */
async function reaches(namespace: string, pod: string, address: string, port: number): Promise<boolean> {
  try {
    return (await execInPod(env, namespace, pod, ['timeout', '5', 'wget', '-q', '-O-', `http://${address}:${port}/`])).trim() === 'ok';
  } catch {
    return false;
  }
}

async function expectReach(namespace: string, pod: string, address: string, port: number, expected: boolean): Promise<void> {
  await waitFor(`${namespace}/${pod} → ${address}:${port} to be ${expected ? 'answered' : 'blocked'}`, async () => {
    const now = await reaches(namespace, pod, address, port);
    return { done: now === expected, value: undefined, seen: now };
  }, { timeoutMs: 45_000, intervalMs: 500 });
}

describe('network isolation with real packets', { skip }, () => {
  let outsideNs = '';
  let outside = ''; // a pod of the project outside both instances, listening on 8080
  let alpha: Record<ComponentName, { name: string; ip: string }>;
  let beta: Record<ComponentName, { name: string; ip: string }>;
  const alphaNs = () => `${landscape}-alpha`;
  const betaNs = () => `${landscape}-beta`;

  before(async () => {
    await loadComponentImages();
    outsideNs = await env.namespace('iso-outside');
    await env.client.create(Kinds.Pod, {
      metadata: { name: 'outside', namespace: outsideNs },
      spec: {
        ...onRealNode,
        terminationGracePeriodSeconds: 0,
        containers: [{ name: 'c', image: await busyboxImage(env), imagePullPolicy: 'Never', command: ['/bin/sh', '-c', 'mkdir -p /tmp/www && echo ok >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www'] }],
      },
    });
    // A pod where the operator runs in a cluster: the landscape namespace.
    await env.client.create(Kinds.Pod, {
      metadata: { name: 'operator-side', namespace: landscape },
      spec: { ...onRealNode, terminationGracePeriodSeconds: 0, containers: [{ name: 'c', image: await busyboxImage(env), imagePullPolicy: 'Never', command: ['sleep', '3600'] }] },
    });
    await env.client.create(IoTServiceV1alpha1Type, iotService('alpha', landscape, onTheRealNode));
    await env.client.create(IoTServiceV1alpha1Type, iotService('beta', landscape, onTheRealNode));
    await waitForPhase(env, landscape, 'alpha', 'Available', 180_000);
    await waitForPhase(env, landscape, 'beta', 'Available', 180_000);
    [alpha, beta] = await Promise.all([componentPods('alpha'), componentPods('beta')]);
    outside = await waitFor('the outside pod to run', async () => {
      const p = (await env.client.get(Kinds.Pod, 'outside', outsideNs)) as Pod;
      const ready = p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
      return { done: ready, value: p.status?.podIP ?? '', seen: p.status };
    }, { timeoutMs: 90_000 });
  });

  it('within an instance each component reaches the ports it uses and no other; another instance’s pods and an outside pod reach nothing', async () => {
    const used: Array<[ComponentName, ComponentName, number]> = [
      ['gateway', 'broker', PORTS.brokerClient],
      ['gateway', 'core', PORTS.http],
      ['core', 'database', PORTS.database],
      ['core', 'broker', PORTS.brokerClient],
      ['processing', 'broker', PORTS.brokerClient],
      ['processing', 'database', PORTS.database],
    ];
    for (const [from, to, port] of used) assert.ok(await reaches(alphaNs(), alpha[from].name, alpha[to].ip, port), `alpha ${from} → alpha ${to}:${port}`);
    const unused: Array<[ComponentName, ComponentName, number]> = [
      ['gateway', 'database', PORTS.database],
      ['broker', 'database', PORTS.database],
      ['processing', 'core', PORTS.http],
      ['database', 'broker', PORTS.brokerClient],
      ['core', 'broker', PORTS.brokerCluster],
      ['core', 'broker', PORTS.brokerMonitor],
      ['gateway', 'broker', PORTS.brokerMonitor],
      ['gateway', 'core', PORTS.health],
      ['core', 'gateway', PORTS.health],
      ['core', 'processing', PORTS.health],
    ];
    for (const [from, to, port] of unused) assert.equal(await reaches(alphaNs(), alpha[from].name, alpha[to].ip, port), false, `alpha ${from} → alpha ${to}:${port}`);
    for (const [target, port] of [...LISTEN.broker.map((p) => [alpha.broker.ip, p] as const), [alpha.database.ip, PORTS.database] as const]) {
      assert.equal(await reaches(betaNs(), beta.core.name, target, port), false, `beta core → alpha ${target}:${port}`);
      assert.equal(await reaches(outsideNs, 'outside', target, port), false, `outside pod → alpha ${target}:${port}`);
    }
    assert.ok(await reaches(betaNs(), beta.core.name, beta.database.ip, PORTS.database), 'beta reaches its own database');
  });

  it('the landscape namespace (the operator) reaches the broker’s monitoring port only', async () => {
    await waitFor('the operator-side pod to run', async () => {
      const p = (await env.client.get(Kinds.Pod, 'operator-side', landscape)) as Pod;
      return { done: p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true, value: undefined, seen: p.status };
    }, { timeoutMs: 90_000 });
    assert.ok(await reaches(landscape, 'operator-side', alpha.broker.ip, PORTS.brokerMonitor), 'landscape → alpha broker:8222');
    assert.equal(await reaches(landscape, 'operator-side', alpha.broker.ip, PORTS.brokerClient), false, 'landscape → alpha broker:4222');
    assert.equal(await reaches(landscape, 'operator-side', alpha.database.ip, PORTS.database), false, 'landscape → alpha database');
  });

  it('device traffic reaches the gateway only from spec.gateway.deviceSources, on the device ports, and stops when the source is removed', async () => {
    assert.equal(await reaches(outsideNs, 'outside', alpha.gateway.ip, PORTS.mqtts), false, 'no device source yet');
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { gateway: { deviceSources: [`${outside}/32`] } } }, 'merge');
    await expectReach(outsideNs, 'outside', alpha.gateway.ip, PORTS.mqtts, true);
    assert.ok(await reaches(outsideNs, 'outside', alpha.gateway.ip, PORTS.https), 'the https device port');
    assert.equal(await reaches(outsideNs, 'outside', alpha.gateway.ip, PORTS.health), false, 'the health port is no device port');
    assert.equal(await reaches(outsideNs, 'outside', alpha.core.ip, PORTS.http), false, 'only the gateway takes device traffic');
    assert.equal(await reaches(outsideNs, 'outside', beta.gateway.ip, PORTS.mqtts), false, 'the other instance’s gateway names no sources');
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { gateway: { deviceSources: null } } }, 'merge');
    await expectReach(outsideNs, 'outside', alpha.gateway.ip, PORTS.mqtts, false);
  });

  it('applications reach core’s API port only from spec.core.applicationSources, and are refused again when the source is removed', async () => {
    assert.equal(await reaches(outsideNs, 'outside', alpha.core.ip, PORTS.http), false, 'no application source yet');
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { core: { applicationSources: [`${outside}/32`] } } }, 'merge');
    await expectReach(outsideNs, 'outside', alpha.core.ip, PORTS.http, true);
    assert.equal(await reaches(outsideNs, 'outside', alpha.core.ip, PORTS.health), false, 'core’s health port is not its API');
    assert.equal(await reaches(outsideNs, 'outside', alpha.gateway.ip, PORTS.mqtts), false, 'an application source is no device source');
    assert.equal(await reaches(outsideNs, 'outside', beta.core.ip, PORTS.http), false, 'the other instance’s core names no sources');
    assert.equal(await reaches(landscape, 'operator-side', alpha.core.ip, PORTS.http), false, 'a pod at another address');
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { core: { applicationSources: null } } }, 'merge');
    await expectReach(outsideNs, 'outside', alpha.core.ip, PORTS.http, false);
  });

  it('connections out of the instance fail unless spec.egress declares the destination, for every component; cluster DNS still answers', async () => {
    assert.equal(await reaches(alphaNs(), alpha.core.name, outside, 8080), false, 'an undeclared destination');
    assert.equal(await reaches(alphaNs(), alpha.core.name, beta.core.ip, PORTS.http), false, 'the other instance');
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { egress: [{ cidr: `${outside}/32`, ports: [8080] }] } }, 'merge');
    await expectReach(alphaNs(), alpha.core.name, outside, 8080, true);
    for (const c of COMPONENTS) assert.ok(await reaches(alphaNs(), alpha[c].name, outside, 8080), `spec.egress applies to every component: alpha ${c} → ${outside}:8080`);
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { egress: null } }, 'merge');
    await expectReach(alphaNs(), alpha.core.name, outside, 8080, false);
    const stdout = await execInPod(env, alphaNs(), alpha.core.name, ['nslookup', `broker.${alphaNs()}.svc.cluster.local`]);
    assert.match(stdout, new RegExp(`Address:? *${alpha.broker.ip.replaceAll('.', '\\.')}`), `the instance's DNS lookups pass its egress policy: ${stdout}`);
  });

  it("a NodePort gateway Service keeps devices' own addresses (externalTrafficPolicy Local); through the node port a source in deviceSources is admitted, another pod is not", async () => {
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { gateway: { serviceType: 'NodePort', deviceSources: [`${outside}/32`] } } }, 'merge');
    const nodePort = await waitFor('the gateway Service to be a NodePort with externalTrafficPolicy Local', async () => {
      const service = await env.client.get<V1Service & KubeObject>(Kinds.Service, 'gateway', alphaNs());
      const port = service.spec?.ports?.find((p) => p.port === PORTS.mqtts)?.nodePort;
      return { done: service.spec?.externalTrafficPolicy === 'Local' && port !== undefined, value: port!, seen: service.spec };
    });
    const nodeObject = await env.client.get<V1Node & KubeObject>(Kinds.Node, node.available ? node.name : '');
    const nodeAddress = nodeObject.status?.addresses?.find((a) => a.type === 'InternalIP')?.address ?? '';
    assert.ok(nodeAddress, 'the real node has an InternalIP');
    await expectReach(outsideNs, 'outside', nodeAddress, nodePort, true);
    // From a pod the source is kept under either policy (kube-proxy masquerades only what comes
    // from outside the pod network, which tests on this machine cannot send): what Local changes
    // is checked on the Service above; this shows the source filter holds through the node port.
    assert.equal(await reaches(landscape, 'operator-side', nodeAddress, nodePort), false, 'a pod not in deviceSources, through the node port');
    await env.client.patch(IoTServiceV1alpha1Type, 'alpha', landscape, { spec: { gateway: { serviceType: null, deviceSources: null } } }, 'merge');
  });
});

describe('network isolation in the API', () => {
  it('a device source, application source or egress destination that is not a CIDR is rejected by the API server', async () => {
    for (const spec of [{ gateway: { deviceSources: ['0.0.0.0'] } }, { core: { applicationSources: ['10.0.0.0/33'] } }, { egress: [{ cidr: 'example.com/24' }] }]) {
      await assert.rejects(env.client.create(IoTServiceV1alpha1Type, iotService('bad-cidr', landscape, spec)), (err: unknown) => {
        assert.ok(err instanceof ApiError && err.reason === 'Invalid', JSON.stringify(spec));
        assert.match(err.message, /must be a CIDR/);
        return true;
      });
    }
  });
});
