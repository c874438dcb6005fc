/**
 * Failures on the real cluster, told apart as Flux's helm-controller does, with kstatus
 * conditions: a transient failure (the archive's server answering 503) keeps the chart
 * `Reconciling` and is retried with backoff until it succeeds, with no spec change; a
 * deterministic one (a `subpath` that is not in the archive) sets `Stalled` for the chart's
 * generation and is not fetched again until the spec changes; `kubectl wait
 * --for=condition=Ready` and `--for=condition=Stalled` work on ArmadaCharts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { deleteCharts, helm, installArmadaCrds, kubectl, startOperator, TESTCHART, testChart, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let ns: string;
let mgr: Manager;
let dir: string;
let server: http.Server;
let baseUrl: string;
let archive: Buffer;
/** Requests the archive server answered, and how many more it answers with 503. */
const served = { requests: 0, unavailable: 0 };

const condition = (chart: ArmadaChartObject, type: string) => chart.status?.conditions?.find((c) => c.type === type);

describe('transient and deterministic failures, kstatus conditions', () => {
  before(async () => {
    env = await localTestEnv();
    await installArmadaCrds(env);
    ns = await env.namespace('armada-failures');
    dir = mkdtempSync(path.join(os.tmpdir(), 'armada-failures-e2e-'));
    await helm(env, 'package', TESTCHART, '--destination', dir);
    archive = readFileSync(path.join(dir, 'testchart-0.1.0.tgz'));
    server = http.createServer((_req, res) => {
      served.requests++;
      if (served.unavailable > 0) {
        served.unavailable--;
        return res.writeHead(503).end('busy');
      }
      res.writeHead(200, { 'content-type': 'application/gzip' }).end(archive);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/testchart-0.1.0.tgz`;
    mgr = await startOperator(env, ns);
  });

  after(async () => {
    if (ns) await deleteCharts(env, ns).catch(() => undefined); // while the operator still removes their finalizers
    await mgr?.stop();
    server?.close();
    await env?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('a server answering 503 is retried with backoff (Reconciling), and the chart installs once it answers, with no spec change', async () => {
    served.unavailable = 2;
    await env.client.create(ArmadaChart, testChart('flaky', ns, { source: { type: 'tar', location: baseUrl } }));
    const retrying = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'flaky', 'a transient error', (s) => s.actual_state === 'error');
    assert.match(retrying.status?.reason ?? '', /HTTP 503; trying again later \(attempt 1, retrying in 10 s\)/);
    assert.equal(condition(retrying, 'Reconciling')?.status, 'True');
    assert.equal(condition(retrying, 'Stalled')?.status, 'False');
    await kubectl(env, 'wait', '--namespace', ns, 'act/flaky', '--for=condition=Ready', '--timeout=90s');
    const ready = await env.client.get<ArmadaChartObject>(ArmadaChart, 'flaky', ns);
    assert.equal(ready.status?.actual_state, 'deployed');
    assert.equal(ready.metadata.generation, 1, 'no spec change');
    for (const type of ['Ready', 'Reconciling', 'Stalled']) assert.equal(condition(ready, type)?.observedGeneration, 1, type);
    assert.deepEqual(['Reconciling', 'Stalled'].map((type) => condition(ready, type)?.status), ['False', 'False']);
    assert.equal(served.requests, 3, 'two 503 answers, then the archive');
  });

  test('a subpath missing from the archive stalls the chart: Stalled for its generation, not fetched again until the spec changes', async () => {
    await env.client.create(ArmadaChart, testChart('wrong-subpath', ns, { source: { type: 'tar', location: baseUrl, subpath: 'charts/testchart' } }));
    await kubectl(env, 'wait', '--namespace', ns, 'act/wrong-subpath', '--for=condition=Stalled', '--timeout=60s');
    const stalled = await env.client.get<ArmadaChartObject>(ArmadaChart, 'wrong-subpath', ns);
    assert.match(stalled.status?.reason ?? '', /source\.subpath "charts\/testchart" of the archive .* is not a Helm chart/);
    assert.deepEqual([condition(stalled, 'Stalled')?.reason, condition(stalled, 'Stalled')?.observedGeneration], ['SourceInvalid', stalled.metadata.generation]);
    assert.equal(condition(stalled, 'Reconciling')?.status, 'False');
    const requests = served.requests;
    await new Promise((r) => setTimeout(r, 12_000));
    assert.equal(served.requests, requests, 'not downloaded again');

    await env.client.patch(ArmadaChart, 'wrong-subpath', ns, { spec: { source: { subpath: 'testchart' } } }, 'merge');
    await kubectl(env, 'wait', '--namespace', ns, 'act/wrong-subpath', '--for=condition=Ready', '--timeout=90s');
    const fixed = await env.client.get<ArmadaChartObject>(ArmadaChart, 'wrong-subpath', ns);
    assert.deepEqual([condition(fixed, 'Stalled')?.status, condition(fixed, 'Ready')?.observedGeneration], ['False', fixed.metadata.generation]);
  });
});
