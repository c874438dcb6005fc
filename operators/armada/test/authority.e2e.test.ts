/**
 * Helm acts with the authority of the ArmadaChart's ServiceAccount (spec.service_account_name,
 * impersonated), tested as an attacker would try it: with the operator watching every namespace,
 * a chart in namespace A whose account may only touch A cannot install anything into B — it says
 * so (Helm's "forbidden" in its status) and B stays empty — while the same account installs,
 * upgrades and uninstalls in A. An operator that requires an account refuses a chart naming none.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kinds, type Manager } from '@iot-operator/runtime';
import { testEnv, type TestEnv } from '@iot-operator/runtime/testing';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { createArmadaOperator } from '../src/operator.ts';
import { helmBinary, helmHistory, helmList, installArmadaCrds, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let teamA: string;
let teamB: string;
const managers: Manager[] = [];

async function operator(watchNamespace: string, requireServiceAccount = false): Promise<Manager> {
  const mgr = await createArmadaOperator({ ...env.operatorOptions(watchNamespace), helmBinary: await helmBinary(), requireServiceAccount });
  await mgr.start();
  managers.push(mgr);
  return mgr;
}

describe('authority: Helm acts as the chart’s ServiceAccount', () => {
  before(async () => {
    env = await testEnv();
    await installArmadaCrds(env);
    teamA = await env.namespace('armada-authority-a');
    teamB = await env.namespace('armada-authority-b');
    // Team A's deployer may do anything in A, nothing elsewhere.
    await env.client.create(Kinds.ServiceAccount, { metadata: { name: 'deployer', namespace: teamA } });
    await env.client.create(Kinds.Role, { metadata: { name: 'deployer', namespace: teamA }, rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] });
    await env.client.create(Kinds.RoleBinding, {
      metadata: { name: 'deployer', namespace: teamA },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'deployer' },
      subjects: [{ kind: 'ServiceAccount', name: 'deployer', namespace: teamA }],
    });
    await operator('');
  });

  after(async () => {
    for (const mgr of managers) await mgr.stop().catch(() => undefined);
    await env?.cleanup();
  });

  test('a chart in A whose account may not touch B cannot install into B, and says so', async () => {
    await env.client.create(ArmadaChart, testChart('intruder', teamA, { namespace: teamB, service_account_name: 'deployer' }));
    const refused = await waitForChartState(env, teamA, 'intruder', 'failed');
    assert.match(refused.status?.reason ?? '', new RegExp(`system:serviceaccount:${teamA}:deployer.*(cannot|forbidden)[\\s\\S]*${teamB}|forbidden[\\s\\S]*system:serviceaccount:${teamA}:deployer`));
    assert.deepEqual(await helmList(env, teamB), [], 'no release in B');
    assert.deepEqual((await env.client.list(Kinds.Deployment, { namespace: teamB })).items, [], 'nothing created in B');
    assert.deepEqual((await env.client.list(Kinds.Secret, { namespace: teamB, labelSelector: 'owner=helm' })).items, [], 'no Helm storage in B');
  });

  test('the same account installs, upgrades and uninstalls in its own namespace', async () => {
    await env.client.create(ArmadaChart, testChart('own', teamA, { service_account_name: 'deployer' }));
    await waitForChartState(env, teamA, 'own', 'deployed');
    await env.client.patch(ArmadaChart, 'own', teamA, { spec: { values: { replicaCount: 2 } } });
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, teamA, 'own', 'deployed at revision 2', (s) => s.actual_state === 'deployed' && s.revision === 2);
    assert.deepEqual((await helmHistory(env, teamA, 'own')).map((r) => r.status), ['superseded', 'deployed']);
    await env.client.delete(ArmadaChart, 'own', teamA);
    await env.waitFor('release own uninstalled', async () => {
      const releases = (await helmList(env, teamA)).filter((r) => r.name === 'own');
      return { done: releases.length === 0, value: undefined, seen: releases };
    }, { timeoutMs: 120_000 });
  });

  test('an operator that requires an account refuses a chart naming none', async () => {
    await managers[0]!.stop(); // the operator watching every namespace would take this chart too
    const strict = await env.namespace('armada-authority-strict');
    await operator(strict, true);
    await env.client.create(ArmadaChart, testChart('anonymous', strict));
    const refused = await waitForChartState(env, strict, 'anonymous', 'error');
    assert.match(refused.status?.reason ?? '', /the operator requires spec\.service_account_name/);
    assert.deepEqual(await helmList(env, strict), []);
  });
});
