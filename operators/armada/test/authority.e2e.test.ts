/**
 * Helm acts with the authority of the ArmadaChart's ServiceAccount (spec.serviceAccountName,
 * impersonated), the operator watching every namespace: a chart of namespace A whose account may
 * only touch A cannot install into namespace B, cannot upgrade (even with `adopt: true`) a
 * release of B — nor have the operator delete B's objects through `upgrade.pre.delete` — and says
 * so in its status; the same account installs, upgrades and uninstalls
 * in A. An operator that requires an account refuses a chart naming none, installing nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject, type Manager, type ResourceType } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { createArmadaOperator } from '../src/operator.ts';
import { helm, helmBinary, helmHistory, helmList, installArmadaCrds, TESTCHART, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

const Role: ResourceType = { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'Role', plural: 'roles', namespaced: true };
const RoleBinding: ResourceType = { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'RoleBinding', plural: 'rolebindings', namespaced: true };

let env: TestEnv;
let teamA: string;
let teamB: string;
let mgr: Manager;
let strict: Manager | undefined;

/** A ServiceAccount `deployer` in `namespace` that may do anything in that namespace only. */
async function namespaceAdmin(namespace: string): Promise<void> {
  await env.client.create(Kinds.ServiceAccount, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'deployer', namespace } });
  await env.client.create(Role, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'deployer', namespace }, rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] } as KubeObject);
  await env.client.create(RoleBinding, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'deployer', namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'deployer' },
    subjects: [{ kind: 'ServiceAccount', name: 'deployer', namespace }],
  } as KubeObject);
}

describe('Helm acts with the ArmadaChart\'s ServiceAccount', () => {
  before(async () => {
    env = await localTestEnv();
    await installArmadaCrds(env);
    teamA = await env.namespace('armada-authority-a');
    teamB = await env.namespace('armada-authority-b');
    await namespaceAdmin(teamA);
    mgr = await createArmadaOperator({ ...env.operatorOptions(''), helmBinary: await helmBinary() });
    await mgr.start();
  });

  after(async () => {
    await strict?.stop();
    await mgr?.stop();
    await env?.cleanup();
  });

  test('an account of namespace A cannot install into namespace B: nothing in B, and the chart says so', async () => {
    await env.client.create(ArmadaChart, testChart('intruder', teamA, { namespace: teamB, serviceAccountName: 'deployer' }));
    const refused = await waitForChartState(env, teamA, 'intruder', 'failed');
    assert.match(refused.status?.reason ?? '', /helm install as ServiceAccount armada-authority-a-\w+\/deployer failed: .*forbidden/);
    assert.match(refused.status?.reason ?? '', new RegExp(`system:serviceaccount:${teamA}:deployer`));
    assert.deepEqual(await helmList(env, teamB), [], 'no release in B');
    assert.equal((await env.client.list(Kinds.Deployment, { namespace: teamB })).items.length, 0, 'nothing created in B');
  });

  test('nor upgrade a release of B, even with adopt: true', async () => {
    await helm(env, 'install', 'victim', TESTCHART, '--namespace', teamB, '--set', 'replicaCount=3');
    await env.client.create(ArmadaChart, testChart('hijack', teamA, { release: 'victim', namespace: teamB, serviceAccountName: 'deployer', adopt: true, values: { replicaCount: 0 } }));
    const refused = await waitForChartState(env, teamA, 'hijack', 'failed');
    assert.match(refused.status?.reason ?? '', /helm upgrade as ServiceAccount .*\/deployer failed .*forbidden/);
    // upgrade.pre.delete runs with the operator's client: it deletes only what the account may.
    await env.client.patch(ArmadaChart, 'hijack', teamA, { spec: { values: { replicaCount: 1 }, upgrade: { pre: { delete: [{ type: 'deployment' }] } } } }, 'merge');
    const predelete = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, teamA, 'hijack', 'pre.delete refused', (s) => /may not delete deployments/.test(s.reason ?? ''));
    assert.match(predelete.status?.reason ?? '', new RegExp(`ServiceAccount ${teamA}/deployer may not delete deployments in namespace ${teamB}: nothing was deleted`));
    assert.ok(await env.client.get(Kinds.Deployment, 'victim-testchart', teamB), 'the Deployment of B is still there');
    assert.deepEqual((await helmHistory(env, teamB, 'victim')).map((r) => [r.revision, r.status]), [[1, 'deployed']], 'no new revision of the release in B');
    assert.equal((await env.client.get<KubeObject & { spec?: { replicas?: number } }>(Kinds.Deployment, 'victim-testchart', teamB)).spec?.replicas, 3);
    await env.client.delete(ArmadaChart, 'hijack', teamA);
    await env.client.delete(ArmadaChart, 'intruder', teamA);
    await env.waitFor('the charts of A gone', async () => ({ done: (await env.client.list(ArmadaChart, { namespace: teamA })).items.length === 0, value: undefined }));
    assert.equal((await helmList(env, teamB)).length, 1, 'the release of B is still there');
  });

  test('in its own namespace the account installs, upgrades (with upgrade.pre.delete) and uninstalls', async () => {
    await env.client.create(ArmadaChart, testChart('own', teamA, { serviceAccountName: 'deployer' }));
    await waitForChartState(env, teamA, 'own', 'deployed');
    await env.client.create(Kinds.ConfigMap, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'stale', namespace: teamA, labels: { stale: 'yes' } } });
    await env.client.patch(ArmadaChart, 'own', teamA, { spec: { values: { replicaCount: 2 }, upgrade: { pre: { delete: [{ type: 'configmap', labels: { stale: 'yes' } }] } } } }, 'merge');
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, teamA, 'own', 'deployed at revision 2', (s) => s.actual_state === 'deployed' && s.revision === 2);
    assert.equal((await env.client.get<KubeObject & { spec?: { replicas?: number } }>(Kinds.Deployment, 'own-testchart', teamA)).spec?.replicas, 2);
    assert.equal((await env.client.list(Kinds.ConfigMap, { namespace: teamA, labelSelector: 'stale=yes' })).items.length, 0, 'upgrade.pre.delete of what the account may delete');
    await env.client.delete(ArmadaChart, 'own', teamA);
    await env.waitFor('release own uninstalled', async () => {
      const releases = await helmList(env, teamA);
      return { done: releases.length === 0, value: undefined, seen: releases };
    }, { timeoutMs: 120_000 });
  });

  test('an operator requiring an account refuses a chart naming none: Stalled, nothing installed', async () => {
    await mgr.stop();
    strict = await createArmadaOperator({ ...env.operatorOptions(''), helmBinary: await helmBinary(), requireServiceAccount: true });
    await strict.start();
    await env.client.create(ArmadaChart, testChart('anonymous', teamA));
    const refused = await waitForChartState(env, teamA, 'anonymous', 'error');
    assert.match(refused.status?.reason ?? '', /requires every ArmadaChart to name the ServiceAccount .*spec\.serviceAccountName/);
    assert.equal(refused.status?.conditions?.find((c) => c.type === 'Stalled')?.reason, 'ServiceAccountRequired');
    assert.deepEqual(await helmList(env, teamA), []);
    await env.client.delete(ArmadaChart, 'anonymous', teamA);
    await env.waitFor('chart anonymous gone (its finalizer removed: nothing to uninstall)', async () => ({ done: (await env.client.list(ArmadaChart, { namespace: teamA })).items.length === 0, value: undefined }));
  });
});
