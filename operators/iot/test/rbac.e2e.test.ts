/**
 * The IoT operator needs nothing beyond its committed deploy/ RBAC: run as the deploy/
 * ServiceAccount bound to the deploy/ ClusterRole in a landscape (a kubeconfig holding only the
 * ServiceAccount's token), it takes an instance to Available and deletes it completely, and no
 * request of it is forbidden.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Kinds, type Manager } from '@iot-operator/runtime';
import { repoRoot, serviceAccountKubeconfig, testEnv, waitFor, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { IoTServiceType } from '../src/controller.ts';
import { createLandscape, deleteAllInstances, getIoT, getOrUndefined, installIoTCrd, iotService, startOperator, waitForPhase } from './e2e-support.ts';

const deploy = (file: string) => path.join(repoRoot, 'operators/iot/deploy', file);

let env: TestEnv;
let landscape: string;
let mgr: Manager | undefined;
let serviceAccount: ServiceAccountKubeconfig | undefined;

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
  await serviceAccount?.cleanup().catch(() => undefined);
  await env?.cleanup();
});

describe('the operator with only the deploy/ ClusterRole', () => {
  it('creates an instance to Available and deletes it completely, without admin rights', async () => {
    // The deploy/ ServiceAccount and ClusterRole, bound in this landscape; the kubeconfig holds only the SA's token.
    serviceAccount = await serviceAccountKubeconfig(env, landscape, ['service_account.yml', 'role.yml', 'role_binding.yml'].map(deploy));
    mgr = await startOperator(env, landscape, { kubeconfig: serviceAccount.file });
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
