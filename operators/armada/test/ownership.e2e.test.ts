/**
 * Armada among many teams, with the operator watching every namespace (a cluster-wide install):
 * a release someone installed with `helm install` is never touched by an ArmadaChart that names
 * it — not upgraded, not uninstalled when the chart is deleted — unless the chart opts in with
 * `adopt: true` (then an Event says so, and the next revision records the chart as its owner);
 * a values key removed from the spec is removed from the release (the chart's default comes back).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { testEnv, type TestEnv } from '@iot-operator/runtime/testing';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { createArmadaOperator } from '../src/operator.ts';
import { eventsOf, helm, helmBinary, helmHistory, installArmadaCrds, TESTCHART, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let teamA: string;
let teamB: string;
let mgr: Manager;

type DeploymentObject = KubeObject & { spec?: { replicas?: number } };

describe('ownership of releases (operator watching all namespaces)', () => {
  before(async () => {
    env = await testEnv();
    await installArmadaCrds(env);
    teamA = await env.namespace('armada-team-a');
    teamB = await env.namespace('armada-team-b');
    mgr = await createArmadaOperator({ ...env.operatorOptions(''), helmBinary: await helmBinary() });
    await mgr.start();
  });

  after(async () => {
    await mgr?.stop();
    await env?.cleanup();
  });

  test('a release installed by hand is left untouched by an ArmadaChart naming it, and kept when the chart is deleted', async () => {
    await helm(env, 'install', 'handmade', TESTCHART, '--namespace', teamB, '--set', 'replicaCount=3');
    await env.client.create(ArmadaChart, testChart('takeover', teamA, { release: 'handmade', namespace: teamB, values: { replicaCount: 1 } }));
    const refused = await waitForChartState(env, teamA, 'takeover', 'error');
    assert.match(refused.status?.reason ?? '', /release handmade in namespace .* was not installed by this ArmadaChart .*left untouched.*spec\.adopt: true/);
    const released = refused.status?.conditions?.find((c) => c.type === 'Released');
    assert.deepEqual([released?.status, released?.reason], ['False', 'ForeignRelease']);
    await new Promise((r) => setTimeout(r, 3_000));
    assert.deepEqual((await helmHistory(env, teamB, 'handmade')).map((r) => [r.revision, r.status]), [[1, 'deployed']], 'no helm upgrade of the foreign release');
    assert.equal((await env.client.get<DeploymentObject>(Kinds.Deployment, 'handmade-testchart', teamB)).spec?.replicas, 3);

    await env.client.delete(ArmadaChart, 'takeover', teamA);
    await env.waitFor('the ArmadaChart to be gone', async () => {
      const left = await env.client.list(ArmadaChart, { namespace: teamA });
      return { done: left.items.length === 0, value: undefined };
    });
    assert.deepEqual((await helmHistory(env, teamB, 'handmade')).map((r) => [r.revision, r.status]), [[1, 'deployed']], 'still installed after the chart was deleted');
  });

  test('adopt: true takes the release over, says so in an Event, and records the chart as its owner', async () => {
    await env.client.create(ArmadaChart, testChart('adopter', teamA, { release: 'handmade', namespace: teamB, values: { replicaCount: 2 }, adopt: true }));
    const adopted = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, teamA, 'adopter', 'deployed at revision 2', (s) => s.actual_state === 'deployed' && s.revision === 2);
    assert.equal(adopted.status?.revision, 2);
    assert.equal((await env.client.get<DeploymentObject>(Kinds.Deployment, 'handmade-testchart', teamB)).spec?.replicas, 2);
    assert.ok((await eventsOf(env, teamA, 'adopter')).some((e) => e.reason === 'Adopting' && /handmade/.test(e.message)));
    const owners = JSON.parse(await helm(env, 'list', '--namespace', teamB, '--filter', '^handmade$', '--output', 'json')) as unknown[];
    assert.equal(owners.length, 1);
    const secrets = await env.client.list(Kinds.Secret, { namespace: teamB, labelSelector: 'owner=helm,name=handmade,version=2' });
    assert.equal(secrets.items[0]?.metadata.labels?.['armada.airshipit.org/chart-uid'], adopted.metadata.uid, 'revision 2 records the adopting chart');
  });

  test('a values key removed from the spec is removed from the release: the chart default comes back', async () => {
    await env.client.patch(ArmadaChart, 'adopter', teamA, [{ op: 'replace', path: '/spec/values', value: {} }], 'json');
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, teamA, 'adopter', 'deployed at revision 3', (s) => s.actual_state === 'deployed' && s.revision === 3);
    assert.equal((await env.client.get<DeploymentObject>(Kinds.Deployment, 'handmade-testchart', teamB)).spec?.replicas, 1, 'the chart default replicaCount: 1');
    const values = JSON.parse(await helm(env, 'get', 'values', 'handmade', '--namespace', teamB, '--output', 'json')) as Record<string, unknown> | null;
    assert.equal(values?.['replicaCount'], undefined, `the release's user-supplied values: ${JSON.stringify(values)}`);
  });

  test('deleting the adopting chart uninstalls the release it now owns', async () => {
    await env.client.delete(ArmadaChart, 'adopter', teamA);
    await env.waitFor('release handmade uninstalled', async () => {
      const releases = JSON.parse(await helm(env, 'list', '--all', '--namespace', teamB, '--output', 'json')) as unknown[];
      return { done: releases.length === 0, value: undefined, seen: releases };
    }, { timeoutMs: 120_000 });
  });
});
