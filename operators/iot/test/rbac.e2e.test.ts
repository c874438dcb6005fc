import assert from 'node:assert/strict';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { TestEnv, repoRoot, testEnv, waitFor } from '@iot-operator/runtime/testing';
import { IoTServiceType } from '../src/controller.ts';
import { createLandscape, deleteAllInstances, getIoT, getOrUndefined, installIoTCrd, iotService, startOperator, waitForPhase } from './e2e-support.ts';

const deploy = (file: string) => path.join(repoRoot, 'operators/iot/deploy', file);

let env: TestEnv;
let landscape: string;
let mgr: Manager | undefined;
let bindingName: string;

before(async () => {
  env = await testEnv();
  await installIoTCrd(env);
  landscape = await createLandscape(env);
});

after(async () => {
  if (mgr) {
    await deleteAllInstances(env, landscape).catch(() => undefined);
    await mgr.stop();
  }
  if (bindingName) await env.client.delete(Kinds.ClusterRoleBinding, bindingName).catch(() => undefined);
  await env?.cleanup();
});

/** The deploy/ ServiceAccount and ClusterRole, bound in this landscape; returns a kubeconfig holding only the SA's token. */
async function serviceAccountKubeconfig(): Promise<string> {
  const [serviceAccount] = await TestEnv.readManifests(deploy('service_account.yml'));
  const [clusterRole] = await TestEnv.readManifests(deploy('role.yml'));
  const [binding] = await TestEnv.readManifests(deploy('role_binding.yml'));
  await env.client.create(Kinds.ServiceAccount, { ...serviceAccount!, metadata: { ...serviceAccount!.metadata, namespace: landscape } });
  await env.client.apply(Kinds.ClusterRole, clusterRole!, { fieldManager: 'iot-operator-tests', force: true });
  bindingName = `iot-operator-${landscape}`;
  const subjects = (binding as KubeObject & { subjects: Array<Record<string, string>> }).subjects.map((s) => ({ ...s, namespace: landscape }));
  await env.client.create(Kinds.ClusterRoleBinding, { ...binding!, metadata: { name: bindingName }, subjects });

  const request = await env.client.create<KubeObject & { status?: { token: string } }>(
    { group: '', version: 'v1', kind: 'TokenRequest', plural: `serviceaccounts/${serviceAccount!.metadata.name}/token`, namespaced: true },
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', metadata: { namespace: landscape }, spec: { expirationSeconds: 3600 } },
  );
  const token = request.status?.token;
  assert.ok(token, 'a ServiceAccount token was issued');
  const admin = parse(await readFile(env.kubeconfigPath, 'utf8')) as { clusters: unknown[]; contexts: Array<{ name: string; context: { cluster: string } }> };
  const context = admin.contexts[0]!;
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: admin.clusters,
    users: [{ name: 'iot-operator', user: { token } }],
    contexts: [{ name: 'iot-operator', context: { cluster: context.context.cluster, user: 'iot-operator' } }],
    'current-context': 'iot-operator',
  };
  const file = path.join(await mkdtemp(path.join(os.tmpdir(), 'iot-sa-')), 'kubeconfig.yaml');
  await writeFile(file, stringify(kubeconfig), { mode: 0o600 });
  return file;
}

describe('the operator with only the deploy/ ClusterRole', () => {
  it('creates an instance to Available and deletes it completely, without admin rights', async () => {
    const kubeconfig = await serviceAccountKubeconfig();
    mgr = await startOperator(env, landscape, { kubeconfig });
    await env.client.create(IoTServiceType, iotService('rbac', landscape));
    const iot = await waitForPhase(env, landscape, 'rbac', 'Available');
    assert.equal(iot.status?.ready, '7/7');
    const forbidden = (await mgr.metrics.restRequests.get()).values.filter((v) => v.labels.code === '403');
    assert.deepEqual(forbidden, [], 'no request of the operator was forbidden');

    await env.client.delete(IoTServiceType, 'rbac', landscape);
    await waitFor('the instance namespace and the IoTService to be gone', async () => {
      const ns = await getOrUndefined(env, Kinds.Namespace, `${landscape}-rbac`);
      const left = await getIoT(env, landscape, 'rbac');
      return { done: !ns && !left, value: undefined, seen: { namespace: ns ? 'present' : 'gone', iotservice: left ? left.metadata.finalizers : 'gone' } };
    }, { timeoutMs: 120_000 });
  });
});
