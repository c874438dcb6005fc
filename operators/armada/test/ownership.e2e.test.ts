/**
 * Armada among many teams, with the operator watching every namespace (a cluster-wide install):
 * a release someone installed with `helm install` is never touched by an ArmadaChart that names
 * it — not upgraded, not uninstalled when the chart is deleted — unless the chart opts in with
 * `adopt: true` (then an Event says so, and the next revision records the chart as its owner);
 * a values key removed from the spec is removed from the release (the chart's default comes back).
 * A release of another ArmadaChart is never touched, and kept when a chart naming it is deleted;
 * renaming `release` or `namespace` uninstalls the old release before installing the new one;
 * an install that fails because someone installed the same release by hand meanwhile leaves
 * that release untouched.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { createArmadaOperator } from '../src/operator.ts';
import { deleteCharts, eventsOf, helm, helmBinary, helmHistory, helmList, installArmadaCrds, TESTCHART, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let teamA: string;
let teamB: string;
let mgr: Manager;

type DeploymentObject = KubeObject & { spec?: { replicas?: number } };

describe('ownership of releases (operator watching all namespaces)', () => {
  before(async () => {
    env = await localTestEnv();
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

describe('ownership between ArmadaCharts, renames, and a release made by hand during an install', () => {
  let server: http.Server;
  let release: () => void = () => undefined;

  before(async () => {
    env = await localTestEnv();
    await installArmadaCrds(env);
    teamA = await env.namespace('armada-owner-a');
    teamB = await env.namespace('armada-owner-b');
    mgr = await createArmadaOperator({ ...env.operatorOptions(''), helmBinary: await helmBinary() });
    await mgr.start();
  });

  after(async () => {
    release();
    for (const namespace of [teamA, teamB]) if (namespace) await deleteCharts(env, namespace).catch(() => undefined); // while the operator still removes their finalizers
    server?.close();
    await mgr?.stop();
    await env?.cleanup();
  });

  test('a release of another ArmadaChart is not touched by a chart naming it, and kept when that chart is deleted', async () => {
    await env.client.create(ArmadaChart, testChart('owner', teamA, { release: 'shared', values: { replicaCount: 2 } }));
    const owner = await waitForChartState(env, teamA, 'owner', 'deployed');
    await env.client.create(ArmadaChart, testChart('other', teamB, { release: 'shared', namespace: teamA, values: { replicaCount: 0 } }));
    const refused = await waitForChartState(env, teamB, 'other', 'error');
    assert.match(refused.status?.reason ?? '', new RegExp(`release shared in namespace ${teamA} belongs to ArmadaChart ${teamA}/owner: left untouched`));
    assert.equal(refused.status?.conditions?.find((c) => c.type === 'Stalled')?.reason, 'ForeignRelease');
    await env.client.delete(ArmadaChart, 'other', teamB);
    await env.waitFor('chart other gone', async () => ({ done: (await env.client.list(ArmadaChart, { namespace: teamB })).items.length === 0, value: undefined }));
    assert.deepEqual((await helmHistory(env, teamA, 'shared')).map((r) => [r.revision, r.status]), [[1, 'deployed']], 'still revision 1 of owner');
    assert.equal((await env.client.get<DeploymentObject>(Kinds.Deployment, 'shared-testchart', teamA)).spec?.replicas, 2);
    assert.ok((await eventsOf(env, teamB, 'other')).some((e) => e.reason === 'ForeignReleaseKept'));
    assert.equal(owner.status?.revision, 1);
  });

  test('renaming the release uninstalls the old one before installing the new: never two releases of one chart', async () => {
    await env.client.patch(ArmadaChart, 'owner', teamA, { spec: { release: 'renamed' } }, 'merge');
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, teamA, 'owner', 'deployed as renamed', (s) => s.actual_state === 'deployed');
    assert.deepEqual((await helmList(env, teamA)).map((r) => r.name), ['renamed']);
    assert.ok((await eventsOf(env, teamA, 'owner')).some((e) => e.reason === 'PreviousReleaseUninstalled' && /release shared/.test(e.message)));
    await env.client.patch(ArmadaChart, 'owner', teamA, { spec: { namespace: teamB } }, 'merge');
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, teamA, 'owner', 'deployed in namespace B', (s) => s.actual_state === 'deployed');
    assert.deepEqual([(await helmList(env, teamA)).map((r) => r.name), (await helmList(env, teamB)).map((r) => r.name)], [[], ['renamed']]);
  });

  test('a release installed by hand while the chart fetches its source: the failed install leaves it untouched', async () => {
    await helm(env, 'package', TESTCHART, '--destination', os.tmpdir());
    const archive = readFileSync(path.join(os.tmpdir(), 'testchart-0.1.0.tgz'));
    let requested: () => void = () => undefined;
    const downloadStarted = new Promise<void>((resolve) => (requested = resolve));
    const held = new Promise<void>((resolve) => (release = resolve));
    server = http.createServer((_req, res) => {
      requested();
      void held.then(() => res.writeHead(200, { 'content-type': 'application/gzip' }).end(archive));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/testchart-0.1.0.tgz`;
    await env.client.create(ArmadaChart, testChart('racer', teamA, { release: 'raced', source: { type: 'tar', location: url } }));
    await downloadStarted; // the chart found no release named raced and is fetching its chart
    await helm(env, 'install', 'raced', TESTCHART, '--namespace', teamA, '--set', 'replicaCount=3');
    release();
    const chart = await waitForChartState(env, teamA, 'racer', 'error');
    assert.match(chart.status?.reason ?? '', /release raced .* was not installed by this ArmadaChart/);
    assert.ok((await eventsOf(env, teamA, 'racer')).some((e) => /cannot re-use a name that is still in use/.test(e.message)), 'the install was tried and failed');
    assert.deepEqual((await helmHistory(env, teamA, 'raced')).map((r) => [r.revision, r.status]), [[1, 'deployed']], 'the hand-made release is untouched');
    assert.equal((await env.client.get<DeploymentObject>(Kinds.Deployment, 'raced-testchart', teamA)).spec?.replicas, 3);
  });
});
