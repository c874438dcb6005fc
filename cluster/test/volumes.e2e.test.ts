// End-to-end tests of the real node's volumes (cluster/parts/volumes): local-path-provisioner
// behind the default StorageClass `standard`. A claim without a class gets `standard` and binds when
// a pod on the real node uses it; what a pod writes there is read by the pod that replaces it (a
// plain pod, and a StatefulSet's pod); deleting the claim removes its directory from the node; a
// claim naming a StorageClass that does not exist keeps its pod Pending and says why in events.
// Reported as not run, with the reason, where the cluster has no real node.
//
//   node --import tsx --test cluster/test/volumes.e2e.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { busyboxImage, localTestEnv, onRealNode, realNode, REAL_NODE_NAME } from '../src/index.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const dataDir = path.join(path.dirname(env.kubeconfigPath), 'real-node/local-path');
let image = '';
let namespace = '';

type Pvc = KubeObject & { spec: { storageClassName?: string; volumeName?: string }; status?: { phase?: string } };
type Pv = KubeObject & { spec: { hostPath?: { path: string }; local?: { path: string }; persistentVolumeReclaimPolicy?: string } };
type Pod = KubeObject & {
  spec: { nodeName?: string };
  status?: { phase?: string; conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
};
type Event = KubeObject & { involvedObject: { kind: string; name: string }; reason?: string; message?: string };

async function kubectl(...args: string[]): Promise<string> {
  const bin = path.join((await run('bash', ['cluster/engines/build.sh', 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
  return (await run(bin, ['--kubeconfig', env.kubeconfigPath, ...args])).stdout;
}

function claim(name: string, storageClassName?: string): KubeObject {
  return {
    metadata: { name, namespace },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Mi' } }, ...(storageClassName ? { storageClassName } : {}) },
  };
}

/** A pod on the real node that runs `script` with claim `claimName` mounted at /data. */
function podWithClaim(name: string, claimName: string, script: string): KubeObject {
  return {
    metadata: { name, namespace },
    spec: {
      ...onRealNode,
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'c', image, imagePullPolicy: 'Never', command: ['/bin/sh', '-c', script], volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName } }],
    },
  };
}

async function finished(name: string): Promise<Pod> {
  return waitFor(`pod ${name} to finish`, async () => {
    const p = (await env.client.get(Kinds.Pod, name, namespace)) as Pod;
    return { done: p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed', value: p, seen: p.status };
  }, { timeoutMs: 120_000 });
}

async function gone(kind: typeof Kinds.Pod | typeof Kinds.PersistentVolume, name: string, ns?: string): Promise<void> {
  await waitFor(`${kind.kind} ${name} to be gone`, async () => {
    const present = await env.client.get(kind, name, ns).then(() => true, (e: unknown) => (isNotFound(e) ? false : Promise.reject(e)));
    return { done: !present, value: undefined, seen: present ? 'still there' : 'gone' };
  }, { timeoutMs: 120_000 });
}

function volumePath(pv: Pv): string {
  return pv.spec.hostPath?.path ?? pv.spec.local?.path ?? '';
}

before(async () => {
  if (skip) return;
  image = await busyboxImage(env);
  namespace = await env.namespace('volumes');
});
after(() => env.cleanup());

describe('volumes on the real node', { skip }, () => {
  test('standard is the only default StorageClass: local-path, WaitForFirstConsumer, Delete', async () => {
    const classes = JSON.parse(await kubectl('get', 'storageclass', '-o', 'json')) as { items: Array<KubeObject & { provisioner: string; volumeBindingMode: string; reclaimPolicy: string }> };
    const defaults = classes.items.filter((c) => c.metadata.annotations?.['storageclass.kubernetes.io/is-default-class'] === 'true');
    assert.deepEqual(defaults.map((c) => [c.metadata.name, c.provisioner, c.volumeBindingMode, c.reclaimPolicy]), [['standard', 'rancher.io/local-path', 'WaitForFirstConsumer', 'Delete']]);
  });

  test('a claim without a class gets standard, binds on first use, keeps what a pod wrote for the next pod, and its directory goes with it', async () => {
    await env.client.create(Kinds.PersistentVolumeClaim, claim('data'));
    const created = (await env.client.get(Kinds.PersistentVolumeClaim, 'data', namespace)) as Pvc;
    assert.equal(created.spec.storageClassName, 'standard', 'the default class is filled in');
    // WaitForFirstConsumer: nothing is provisioned before a pod uses the claim.
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(((await env.client.get(Kinds.PersistentVolumeClaim, 'data', namespace)) as Pvc).status?.phase, 'Pending');

    await env.client.create(Kinds.Pod, podWithClaim('writer', 'data', 'echo "written by $HOSTNAME" > /data/note && cat /data/note'));
    const writer = await finished('writer');
    assert.equal(writer.status?.phase, 'Succeeded', JSON.stringify(writer.status));
    assert.equal(writer.spec.nodeName, REAL_NODE_NAME);
    const bound = (await env.client.get(Kinds.PersistentVolumeClaim, 'data', namespace)) as Pvc;
    assert.equal(bound.status?.phase, 'Bound');
    const pv = (await env.client.get(Kinds.PersistentVolume, bound.spec.volumeName!)) as Pv;
    assert.equal(pv.spec.persistentVolumeReclaimPolicy, 'Delete');
    const dir = volumePath(pv);
    assert.ok(dir.startsWith(`${dataDir}/`), `the volume lives under the cluster's real-node directory: ${dir}`);
    assert.equal(readFileSync(path.join(dir, 'note'), 'utf8'), 'written by writer\n', 'the file is on the node’s disk');

    await env.client.delete(Kinds.Pod, 'writer', namespace);
    await gone(Kinds.Pod, 'writer', namespace);
    await env.client.create(Kinds.Pod, podWithClaim('reader', 'data', 'cat /data/note'));
    const reader = await finished('reader');
    assert.equal(reader.status?.phase, 'Succeeded');
    assert.equal(await kubectl('logs', '-n', namespace, 'reader'), 'written by writer\n');

    await env.client.delete(Kinds.Pod, 'reader', namespace);
    await gone(Kinds.Pod, 'reader', namespace);
    await env.client.delete(Kinds.PersistentVolumeClaim, 'data', namespace);
    await gone(Kinds.PersistentVolume, pv.metadata.name!);
    assert.equal(existsSync(dir), false, `${dir} is removed from the node`);
  });

  test('a StatefulSet pod deleted and recreated reads what it wrote', async () => {
    const script = 'if [ -f /data/first ]; then echo "again, first was $(cat /data/first)"; else echo "$(date +%s%N)" > /data/first; echo first; fi; sleep 3600';
    await env.client.create(Kinds.StatefulSet, {
      metadata: { name: 'db', namespace },
      spec: {
        serviceName: 'db',
        replicas: 1,
        selector: { matchLabels: { app: 'db' } },
        template: {
          metadata: { labels: { app: 'db' } },
          spec: {
            ...onRealNode,
            terminationGracePeriodSeconds: 0,
            containers: [{ name: 'c', image, imagePullPolicy: 'Never', command: ['/bin/sh', '-c', script], volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
          },
        },
        volumeClaimTemplates: [{ metadata: { name: 'data' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Mi' } } } }],
      },
    });
    const running = async (uidNot?: string) =>
      waitFor('pod db-0 Running', async () => {
        const p = (await env.client.get(Kinds.Pod, 'db-0', namespace).catch(() => undefined)) as Pod | undefined;
        return { done: p?.status?.phase === 'Running' && p.metadata.uid !== uidNot, value: p!, seen: p?.status };
      }, { timeoutMs: 120_000 });
    const first = await running();
    const logs = async () => waitFor('db-0 to log', async () => {
      const out = await kubectl('logs', '-n', namespace, 'db-0').catch(() => '');
      return { done: out !== '', value: out, seen: out };
    });
    assert.equal(await logs(), 'first\n');
    const written = readFileSync(path.join(volumePath((await env.client.get(Kinds.PersistentVolume, ((await env.client.get(Kinds.PersistentVolumeClaim, 'data-db-0', namespace)) as Pvc).spec.volumeName!)) as Pv), 'first'), 'utf8').trim();
    await env.client.delete(Kinds.Pod, 'db-0', namespace);
    await running(first.metadata.uid);
    assert.equal(await logs(), `again, first was ${written}\n`);
  });

  test('a claim of a pod on a kwok node binds too, to a volume whose directory is on no disk, deleted with the claim', async () => {
    await env.client.create(Kinds.PersistentVolumeClaim, claim('simulated'));
    await env.client.create(Kinds.Pod, {
      metadata: { name: 'on-kwok', namespace },
      spec: { containers: [{ name: 'c', image: 'registry.example.com/none:1' }], volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'simulated' } }] },
    });
    const pod = await waitFor('pod on-kwok Running', async () => {
      const p = (await env.client.get(Kinds.Pod, 'on-kwok', namespace)) as Pod;
      return { done: p.status?.phase === 'Running', value: p, seen: p.status };
    }, { timeoutMs: 90_000 });
    assert.notEqual(pod.spec.nodeName, REAL_NODE_NAME);
    const bound = (await env.client.get(Kinds.PersistentVolumeClaim, 'simulated', namespace)) as Pvc;
    assert.equal(bound.status?.phase, 'Bound');
    const pv = (await env.client.get(Kinds.PersistentVolume, bound.spec.volumeName!)) as Pv;
    assert.equal(existsSync(volumePath(pv)), false, 'nothing is made on this machine for a kwok node');
    await env.client.delete(Kinds.Pod, 'on-kwok', namespace);
    await gone(Kinds.Pod, 'on-kwok', namespace);
    await env.client.delete(Kinds.PersistentVolumeClaim, 'simulated', namespace);
    await gone(Kinds.PersistentVolume, pv.metadata.name!);
  });

  test('a claim naming a StorageClass that does not exist keeps its pod Pending, and the events say why', async () => {
    await env.client.create(Kinds.PersistentVolumeClaim, claim('nowhere', 'no-such-class'));
    await env.client.create(Kinds.Pod, podWithClaim('stuck', 'nowhere', 'true'));
    const events = await waitFor('events of the claim and the pod', async () => {
      const items = (await env.client.list(Kinds.Event, { namespace })).items as Event[];
      const claimEvent = items.find((e) => e.involvedObject.kind === 'PersistentVolumeClaim' && e.involvedObject.name === 'nowhere' && e.reason === 'ProvisioningFailed');
      const podEvent = items.find((e) => e.involvedObject.kind === 'Pod' && e.involvedObject.name === 'stuck' && e.reason === 'FailedScheduling');
      // The scheduler records the event and writes the pod's PodScheduled condition separately.
      const pod = (await env.client.get(Kinds.Pod, 'stuck', namespace)) as Pod;
      const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled')?.status;
      return { done: !!claimEvent && !!podEvent && scheduled !== undefined, value: { claimEvent, podEvent, pod }, seen: { scheduled, events: items.map((e) => `${e.involvedObject.name} ${e.reason}: ${e.message}`) } };
    }, { timeoutMs: 60_000 });
    assert.match(events.claimEvent!.message ?? '', /storageclass.*"no-such-class" not found/);
    assert.match(events.podEvent!.message ?? '', /unbound immediate PersistentVolumeClaims/);
    assert.equal(events.pod.status?.phase, 'Pending');
    assert.equal(events.pod.status?.conditions?.find((c) => c.type === 'PodScheduled')?.status, 'False');
    assert.equal(((await env.client.get(Kinds.PersistentVolumeClaim, 'nowhere', namespace)) as Pvc).status?.phase, 'Pending');
  });
});
