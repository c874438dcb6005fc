/**
 * Chart sources on the real cluster: a packaged chart (`helm package`) served over HTTP by a
 * loopback server of the test (`tar`: its single top folder, or `subpath: testchart` as Armada
 * users write it; the same content again is no upgrade, new content at the same URL is one), a git
 * repository on local disk (`git`, branch + subpath), and bad input — an unknown source type, a
 * 404 archive, an archive that is not a tar, a missing git reference, values the chart's schema
 * rejects — each reported `error` or `failed` with a reason naming the problem, no release left
 * behind for it, the operator still working; an install Helm refuses for its values stalls the
 * chart (`Stalled`, not retried) and recovers once its spec is fixed.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import type { Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { armadaTestEnv, helm, helmList, listenOnLoopback, packageTestChart, startOperator, stopServedNamespace, TESTCHART, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let ns: string;
let mgr: Manager;
let dir: string;
let server: http.Server;
let baseUrl: string;
let repo: string;
let files: Record<string, Buffer>;

function git(...args: string[]): string {
  return execFileSync('git', ['-C', repo, ...args], {
    encoding: 'utf8',
    env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com' },
  }).trim();
}

describe('chart sources', () => {
  before(async () => {
    env = await armadaTestEnv();
    ns = await env.namespace('armada-sources');
    dir = mkdtempSync(path.join(os.tmpdir(), 'armada-sources-e2e-'));

    files = {
      '/charts/testchart-0.1.0.tgz': await packageTestChart(env, dir),
      '/charts/not-a-chart.tgz': gzipSync(Buffer.from('just some text, not a tar archive of a chart\n')),
    };
    server = http.createServer((req, res) => {
      const body = files[req.url ?? ''];
      if (!body) return res.writeHead(404).end('not found');
      res.writeHead(200, { 'content-type': 'application/gzip' }).end(body);
    });
    baseUrl = await listenOnLoopback(server);

    repo = path.join(dir, 'charts-repo');
    cpSync(TESTCHART, path.join(repo, 'charts/testchart'), { recursive: true });
    writeFileSync(path.join(repo, 'README'), 'charts\n');
    git('init', '--quiet', '--initial-branch', 'main');
    git('add', '.');
    git('commit', '--quiet', '-m', 'testchart');

    mgr = await startOperator(env, ns);
  });

  after(async () => {
    await stopServedNamespace({ env, ns, mgr });
    server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('bad sources and values: error or failed with a reason, nothing installed for them', async () => {
    const bad: Array<[string, Partial<ArmadaChartObject['spec']>, string, RegExp]> = [
      ['unknown-type', { source: { type: 'svn', location: 'svn://example.com/charts' } }, 'error', /source\.type "svn" is unknown: use one of local, tar, git/],
      ['missing-tarball', { source: { type: 'tar', location: `${baseUrl}/charts/missing-0.1.0.tgz` } }, 'error', /source\.location .*missing-0\.1\.0\.tgz: the server answered HTTP 404; check the URL/],
      ['not-a-chart', { source: { type: 'tar', location: `${baseUrl}/charts/not-a-chart.tgz` } }, 'error', /source\.location .*not-a-chart\.tgz: the archive was refused/],
      ['wrong-subpath', { source: { type: 'tar', location: `${baseUrl}/charts/testchart-0.1.0.tgz`, subpath: 'charts/testchart' } }, 'error', /source\.subpath "charts\/testchart" of the archive .* is not a Helm chart/],
      ['missing-ref', { source: { type: 'git', location: repo, subpath: 'charts/testchart', reference: 'no-such-branch' } }, 'error', /source\.reference: git reference "no-such-branch" not found in .*charts-repo: name an existing branch, tag or commit/],
      ['bad-values', { values: { replicaCount: 'two' } }, 'failed', /helm install failed [\s\S]*values don't meet the specifications of the schema[\s\S]*replicaCount/],
    ];
    for (const [name, spec] of bad) await env.client.create(ArmadaChart, testChart(name, ns, spec));
    for (const [name, , state, reason] of bad) {
      const chart = await waitForChartState(env, ns, name, state);
      assert.equal(chart.status?.satisfied, false);
      assert.match(chart.status?.reason ?? '', reason, `${name}: ${chart.status?.reason}`);
    }
    assert.deepEqual(await helmList(env, ns), [], 'no release is left for a bad chart');
  });

  test('tar sources (a helm package archive: its top folder, or subpath: <chart>) and a git source (branch and subpath) install; the operator kept working', async () => {
    await env.client.create(ArmadaChart, testChart('from-tar', ns, { source: { type: 'tar', location: `${baseUrl}/charts/testchart-0.1.0.tgz`, interval: 10 } }));
    await env.client.create(ArmadaChart, testChart('tar-subpath', ns, { source: { type: 'tar', location: `${baseUrl}/charts/testchart-0.1.0.tgz`, subpath: 'testchart' } }));
    await env.client.create(ArmadaChart, testChart('from-git', ns, { source: { type: 'git', location: repo, subpath: 'charts/testchart', reference: 'main' } }));
    for (const name of ['from-tar', 'tar-subpath', 'from-git']) {
      const chart = await waitForChartState(env, ns, name, 'deployed');
      assert.equal(chart.status?.version, '0.1.0');
    }
    const releases = (await helmList(env, ns)).map((r) => [r.name, r.status]).sort();
    assert.deepEqual(releases, [['from-git', 'deployed'], ['from-tar', 'deployed'], ['tar-subpath', 'deployed']]);
  });

  test('a tar URL checked again every source.interval: the same content is no upgrade, new content at the same URL is one', async () => {
    await new Promise((r) => setTimeout(r, 12_000)); // one interval of from-tar: downloaded again, same digest
    assert.equal((await env.client.get<ArmadaChartObject>(ArmadaChart, 'from-tar', ns)).status?.revision, 1, 'no upgrade for the same content');
    const changed = path.join(dir, 'changed');
    cpSync(TESTCHART, changed, { recursive: true });
    const values = readFileSync(path.join(changed, 'values.yaml'), 'utf8');
    writeFileSync(path.join(changed, 'values.yaml'), values.replace(/^replicaCount: 1$/m, 'replicaCount: 2'));
    await helm(env, 'package', changed, '--destination', path.join(dir, 'changed-package'));
    files['/charts/testchart-0.1.0.tgz'] = readFileSync(path.join(dir, 'changed-package', 'testchart-0.1.0.tgz'));
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'from-tar', 'upgraded to revision 2 by the new content', (s) => s.actual_state === 'deployed' && s.revision === 2, 60_000);
    const deployment = await env.client.get<{ metadata: Record<string, unknown>; spec?: { replicas?: number } }>({ group: 'apps', version: 'v1', kind: 'Deployment', plural: 'deployments', namespaced: true }, 'from-tar-testchart', ns);
    assert.equal(deployment.spec?.replicas, 2, 'the chart of the new archive');
  });

  test('a new commit on the git branch is upgraded to when the spec changes', async () => {
    const values = readFileSync(path.join(repo, 'charts/testchart/values.yaml'), 'utf8');
    writeFileSync(path.join(repo, 'charts/testchart/values.yaml'), values.replace(/^replicaCount: 1$/m, 'replicaCount: 3'));
    git('commit', '--quiet', '-am', 'three replicas');
    await env.client.patch(ArmadaChart, 'from-git', ns, { spec: { values: { podLabels: { commit: 'second' } } } }, 'merge');
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'from-git', 'deployed at revision 2', (s) => s.actual_state === 'deployed' && s.revision === 2);
    const deployment = await env.client.get<{ metadata: object; spec?: { replicas?: number } } & { metadata: Record<string, unknown> }>({ group: 'apps', version: 'v1', kind: 'Deployment', plural: 'deployments', namespaced: true }, 'from-git-testchart', ns);
    assert.equal(deployment.spec?.replicas, 3, 'the chart of the new commit');
  });

  test('values the chart rejects stall the chart (Stalled, not retried) until its spec is fixed', async () => {
    const stalled = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'bad-values', 'Stalled', (s) => s.conditions?.some((c) => c.type === 'Stalled' && c.status === 'True') ?? false);
    const condition = stalled.status?.conditions?.find((c) => c.type === 'Stalled');
    assert.equal(condition?.reason, 'InvalidValues');
    assert.equal(condition?.observedGeneration, stalled.metadata.generation);
    assert.equal(stalled.status?.conditions?.find((c) => c.type === 'Reconciling')?.status, 'False');
    await new Promise((r) => setTimeout(r, 12_000)); // longer than the first retry delay of a transient failure
    assert.equal((await env.client.get<ArmadaChartObject>(ArmadaChart, 'bad-values', ns)).status?.install_failures, 1, 'not retried');
    await env.client.patch(ArmadaChart, 'bad-values', ns, { spec: { values: { replicaCount: 2 } } }, 'merge');
    const fixed = await waitForChartState(env, ns, 'bad-values', 'deployed', 120_000);
    assert.equal(fixed.status?.install_failures, 0);
    assert.equal(fixed.status?.reason, undefined);
  });

  test('a source error is fixed by the spec: the archive URL corrected, the chart installs', async () => {
    await env.client.patch(ArmadaChart, 'missing-tarball', ns, { spec: { source: { location: `${baseUrl}/charts/testchart-0.1.0.tgz` } } }, 'merge');
    const fixed = await waitForChartState(env, ns, 'missing-tarball', 'deployed', 120_000);
    assert.equal(fixed.status?.reason, undefined);
  });
});
