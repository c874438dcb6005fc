/**
 * Stuck states are visible: run as its ServiceAccount with one permission of the deploy/ RBAC
 * taken away, the operator reports the refusal as a Warning Event and a `Degraded` condition
 * naming the missing permission (what `kubectl describe iots` shows) instead of retrying
 * silently, and carries on by itself once the permission is granted.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments, stringify } from 'yaml';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, waitFor, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { createLandscape, deleteAllInstances, getIoT, installIoTCrd, iotService, startOperator, waitForPhase, type IoTObject } from './e2e-support.ts';

const RBAC_FILES = ['service_account.yml', 'role.yml', 'role_binding.yml'].map((file) => path.join(repoRoot, 'operators/iot/deploy', file));

let env: TestEnv;
let workDir: string;
const running: Array<{ mgr: Manager; landscape: string }> = [];
const accounts: ServiceAccountKubeconfig[] = [];
const reducedRoles: string[] = [];

before(async () => {
  env = await localTestEnv();
  await installIoTCrd(env);
  workDir = await mkdtemp(path.join(os.tmpdir(), 'iot-stuck-'));
});

after(async () => {
  for (const { mgr, landscape } of running) {
    await serviceAccountKubeconfig(env, landscape, RBAC_FILES).then((a) => accounts.push(a)).catch(() => undefined);
    await deleteAllInstances(env, landscape).catch(() => undefined);
    await mgr.stop();
  }
  for (const account of accounts) await account.cleanup().catch(() => undefined);
  for (const name of reducedRoles) await env.client.delete(Kinds.ClusterRole, name).catch(() => undefined);
  await rm(workDir, { recursive: true, force: true });
  await env?.cleanup();
});

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };

/** The deploy/ RBAC for `landscape` without `verb` on `resource`, under role names of its own. */
async function operatorWithout(landscape: string, resource: string, verb: string): Promise<Manager> {
  const suffix = `-without-${verb}-${resource}-${landscape}`;
  const docs: KubeObject[] = [];
  for (const file of RBAC_FILES) {
    for (const doc of parseAllDocuments(await readFile(file, 'utf8'))) {
      const obj = doc.toJSON() as KubeObject & { rules?: Rule[]; roleRef?: { name: string } };
      if (obj.kind === 'ClusterRole' || obj.kind === 'Role') {
        obj.metadata.name += suffix;
        if (obj.kind === 'ClusterRole') reducedRoles.push(obj.metadata.name!);
        obj.rules = obj.rules!.flatMap((rule) =>
          rule.resources.includes(resource)
            ? [{ ...rule, resources: [resource], verbs: rule.verbs.filter((v) => v !== verb) }, ...(rule.resources.length > 1 ? [{ ...rule, resources: rule.resources.filter((r) => r !== resource) }] : [])]
            : [rule],
        );
      }
      if (obj.roleRef) {
        obj.roleRef.name += suffix;
        obj.metadata.name += suffix;
      }
      docs.push(obj);
    }
  }
  const file = path.join(workDir, `rbac${suffix}.yml`);
  await writeFile(file, docs.map((d) => stringify(d)).join('---\n'));
  const account = await serviceAccountKubeconfig(env, landscape, [file]);
  accounts.push(account);
  const mgr = await startOperator(env, landscape, { kubeconfig: account.file });
  running.push({ mgr, landscape });
  return mgr;
}

async function warningEvents(landscape: string, name: string): Promise<Array<{ reason?: string; message?: string }>> {
  const list = await env.client.list(Kinds.Event, { namespace: landscape, fieldSelector: `involvedObject.name=${name},type=Warning` });
  return list.items as Array<KubeObject & { reason?: string; message?: string }>;
}

/** A Warning Event `Forbidden` whose message matches: recorded beside the status write, not before it, so waited for. */
async function forbiddenEvent(landscape: string, name: string, message: RegExp): Promise<void> {
  await waitFor(`a Warning Event Forbidden matching ${message} for ${name}`, async () => {
    const events = await warningEvents(landscape, name);
    return { done: events.some((e) => e.reason === 'Forbidden' && message.test(e.message ?? '')), value: undefined, seen: events };
  });
}

function degraded(iot: IoTObject | undefined) {
  return iot?.status?.conditions?.find((c) => c.type === 'Degraded');
}

describe('a refused request is visible, never a silent retry', () => {
  it('without delete on namespaces, deletion waits and says why; granting it lets deletion finish', async () => {
    const landscape = await createLandscape(env);
    await operatorWithout(landscape, 'namespaces', 'delete');
    await env.client.create(IoTServiceV1alpha1Type, iotService('held', landscape));
    await waitForPhase(env, landscape, 'held', 'Available');

    await env.client.delete(IoTServiceV1alpha1Type, 'held', landscape);
    const waiting = await waitFor('the deleted IoTService to say why its deletion waits', async () => {
      const iot = await getIoT(env, landscape, 'held');
      return { done: degraded(iot)?.status === 'True', value: iot!, seen: iot?.status };
    });
    assert.ok(waiting.metadata.deletionTimestamp, 'the IoTService is being deleted');
    assert.deepEqual(waiting.metadata.finalizers, ['cp.iotservices.io/cleanup'], 'and waits for the operator');
    assert.equal(degraded(waiting)?.reason, 'Forbidden');
    assert.match(degraded(waiting)?.message ?? '', new RegExp(`missing permission: delete namespaces.*Deletion of this IoTService waits`));
    assert.equal(waiting.status?.phase, 'Failed');
    await forbiddenEvent(landscape, 'held', /delete namespaces/);

    accounts.push(await serviceAccountKubeconfig(env, landscape, RBAC_FILES));
    await waitFor('the IoTService and its namespace to be gone once the permission is granted', async () => {
      const left = await getIoT(env, landscape, 'held');
      return { done: !left, value: undefined, seen: left?.status?.reason };
    }, { timeoutMs: 120_000 });
  });

  it('without get on namespaces, the instance namespace cannot be checked: Degraded naming the permission', async () => {
    const landscape = await createLandscape(env);
    await operatorWithout(landscape, 'namespaces', 'get');
    await env.client.create(IoTServiceV1alpha1Type, iotService('unchecked', landscape));
    const iot = await waitForPhase(env, landscape, 'unchecked', 'Failed');
    assert.equal(degraded(iot)?.reason, 'Forbidden');
    assert.match(degraded(iot)?.message ?? '', new RegExp(`missing permission: get namespaces, needed to check who owns namespace ${landscape}-unchecked`));
    await forbiddenEvent(landscape, 'unchecked', /get namespaces/);
  });

  it('without patch on iotservices, the finalizer cannot be added: Degraded naming the permission', async () => {
    const landscape = await createLandscape(env);
    await operatorWithout(landscape, 'iotservices', 'patch');
    await env.client.create(IoTServiceV1alpha1Type, iotService('unmarked', landscape));
    const iot = await waitForPhase(env, landscape, 'unmarked', 'Failed');
    assert.equal(degraded(iot)?.reason, 'Forbidden');
    assert.match(degraded(iot)?.message ?? '', /missing permission: patch iotservices\.cp\.iotservices\.io in namespace .*finalizer/);
    assert.deepEqual(iot.metadata.finalizers ?? [], []);
    await forbiddenEvent(landscape, 'unmarked', /patch iotservices/);
  });
});
