/**
 * The IoT operator needs nothing beyond its committed deploy/ RBAC, and that RBAC plus the
 * deploy/ admission policy keep its blast radius to its landscape: run as the deploy/
 * ServiceAccount (a kubeconfig holding only its token) with the ClusterRole, the landscape Role
 * and the ValidatingAdmissionPolicy in place, it takes an instance to Available and deletes it
 * completely with no request forbidden; `kubectl auth can-i` shows what RBAC grants it, and a
 * write RBAC would allow outside its instance namespaces (kube-system, a namespace someone else
 * labelled for the landscape) is denied by the policy.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { ApiError, KubeClient, Kinds, customResource, type KubeObject, type Manager } from '@iot-operator/runtime';
import { TestEnv as TestEnvClass, serviceAccountKubeconfig, waitFor, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { repoRoot } from '@iot-operator/local-cluster';
import { getIoT, getOrUndefined, iotService, iotTestLandscape, startOperator, stopOperator, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

const run = promisify(execFile);
const deploy = (file: string) => path.join(repoRoot, 'operators/iot/deploy', file);
const AdmissionTypes: Record<string, ReturnType<typeof customResource>> = {
  ValidatingAdmissionPolicy: customResource('admissionregistration.k8s.io', 'v1', 'ValidatingAdmissionPolicy', 'validatingadmissionpolicies', false),
  ValidatingAdmissionPolicyBinding: customResource('admissionregistration.k8s.io', 'v1', 'ValidatingAdmissionPolicyBinding', 'validatingadmissionpolicybindings', false),
};

let env: TestEnv;
let landscape: string;
let kubectl: string;
let mgr: Manager | undefined;
let serviceAccount: ServiceAccountKubeconfig | undefined;
let asOperator: KubeClient | undefined;
const policyObjects: KubeObject[] = [];

before(async () => {
  ({ env, landscape } = await iotTestLandscape());
  kubectl = path.join((await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
  for (const obj of await TestEnvClass.readManifests(deploy('admission_policy.yml'))) {
    await env.client.apply(AdmissionTypes[obj.kind!]!, obj, { fieldManager: 'iot-operator-tests', force: true });
    policyObjects.push(obj);
  }
  // The deploy/ ServiceAccount, ClusterRole and landscape Role, bound in this landscape.
  serviceAccount = await serviceAccountKubeconfig(env, landscape, ['service_account.yml', 'role.yml', 'role_binding.yml'].map(deploy));
  asOperator = await KubeClient.fromKubeconfig({ kubeconfigPath: serviceAccount.file });
});

after(async () => {
  await stopOperator(env, landscape, mgr);
  asOperator?.close();
  for (const obj of policyObjects.reverse()) await env.client.delete(AdmissionTypes[obj.kind!]!, obj.metadata.name!).catch(() => undefined);
  await serviceAccount?.cleanup().catch(() => undefined);
  await env?.cleanup();
});

/** `kubectl auth can-i <verb> <resource> -n <namespace>` as the operator's ServiceAccount. */
async function canI(verb: string, resource: string, namespace: string): Promise<string> {
  const args = ['--kubeconfig', env.kubeconfigPath, 'auth', 'can-i', verb, resource, '-n', namespace, '--as', `system:serviceaccount:${landscape}:iot-operator`];
  const answer = await run(kubectl, args).then((r) => r.stdout, (err: { stdout?: string }) => err.stdout ?? '');
  return answer.trim();
}

/** A server-side dry-run create as the operator: admission runs, nothing is stored. */
async function dryRunCreate(type: ReturnType<typeof customResource>, obj: KubeObject): Promise<void> {
  const base = type.group ? `/apis/${type.group}/${type.version}` : `/api/${type.version}`;
  const where = type.namespaced ? `/namespaces/${obj.metadata.namespace}` : '';
  await asOperator!.raw({ method: 'POST', path: `${base}${where}/${type.plural}?dryRun=All`, body: obj });
}

async function deniedByPolicy(what: string, type: ReturnType<typeof customResource>, obj: KubeObject, message: RegExp): Promise<void> {
  // The policy takes effect a moment after it is created: wait for the first denial.
  await waitFor(`${what} to be denied by the admission policy`, async () => {
    try {
      await dryRunCreate(type, obj);
      return { done: false, value: undefined, seen: 'allowed' };
    } catch (err) {
      assert.ok(err instanceof ApiError && err.code === 403, `${what}: ${String(err)}`);
      assert.match(err.message, /ValidatingAdmissionPolicy 'iot-operator-writes-in-landscape'/);
      assert.match(err.message, message);
      return { done: true, value: undefined };
    }
  });
}

describe('the operator with only the deploy/ RBAC and admission policy', () => {
  it('RBAC grants the landscape-only rights in the landscape only', async () => {
    const rows: Array<[string, string, string, string]> = [
      ['patch', 'iotservices.cp.iotservices.io', landscape, 'yes'],
      ['patch', 'iotservices.cp.iotservices.io', 'kube-system', 'no'],
      ['update', 'leases.coordination.k8s.io', landscape, 'yes'],
      ['update', 'leases.coordination.k8s.io', 'kube-system', 'no'],
      ['create', 'namespaces', 'default', 'yes'],
      // Cluster-wide in RBAC (instance namespaces come and go); the admission policy confines it.
      ['create', 'configmaps', 'kube-system', 'yes'],
      ['delete', 'configmaps', 'kube-system', 'no'],
      ['create', 'pods', landscape, 'no'],
    ];
    const answers = await Promise.all(rows.map(([verb, resource, namespace]) => canI(verb, resource, namespace)));
    assert.deepEqual(
      rows.map((row, i) => `${row.slice(0, 3).join(' ')}: ${answers[i]}`),
      rows.map((row) => `${row.slice(0, 3).join(' ')}: ${row[3]}`),
    );
  });

  it('the admission policy denies its writes outside its instance namespaces', async () => {
    await deniedByPolicy('a ConfigMap in kube-system', Kinds.ConfigMap, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'planted', namespace: 'kube-system' } }, /may not write configmaps in namespace kube-system/);
    const lookalike = await env.namespace('lookalike');
    await env.client.patch(Kinds.Namespace, lookalike, undefined, { metadata: { labels: { 'cp.iotservices.io/landscape': landscape } } }, 'merge');
    await deniedByPolicy('a Secret in a namespace someone labelled for the landscape', Kinds.Secret, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'planted', namespace: lookalike } }, /may not write secrets/);
    await deniedByPolicy('a namespace without the landscape label', Kinds.Namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `${landscape}-unlabelled` } }, /may write only namespaces named/);
    await deniedByPolicy('a Secret in its own landscape namespace', Kinds.Secret, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'planted', namespace: landscape } }, /may not write secrets in namespace/);
  });

  it('creates an instance to Available and deletes it completely, with no request forbidden', async () => {
    mgr = await startOperator(env, landscape, { kubeconfig: serviceAccount!.file });
    await env.client.create(IoTServiceV1alpha1Type, iotService('rbac', landscape));
    const iot = await waitForPhase(env, landscape, 'rbac', 'Available');
    assert.equal(iot.status?.ready, '7/7');
    const forbidden = (await mgr.metrics.restRequests.get()).values.filter((v) => v.labels.code === '403');
    assert.deepEqual(forbidden, [], 'no request of the operator was forbidden');

    await env.client.delete(IoTServiceV1alpha1Type, 'rbac', landscape);
    await waitFor('the instance namespace and the IoTService to be gone', async () => {
      const ns = await getOrUndefined(env, Kinds.Namespace, `${landscape}-rbac`);
      const left = await getIoT(env, landscape, 'rbac');
      return { done: !ns && !left, value: undefined, seen: { namespace: ns ? 'present' : 'gone', iotservice: left ? left.metadata.finalizers : 'gone' } };
    }, { timeoutMs: 120_000 });
  });
});
