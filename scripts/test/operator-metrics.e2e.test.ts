// Every operator's /metrics passes `promtool check metrics` (Prometheus' own exposition-format
// and naming lint): each of the four operators runs as its own process against the local
// cluster, as a user starts it (its CRDs installed, --leader-elect), reconciles an object of its
// own kind where that takes no more than the API server, and its /metrics, scraped over HTTP, is
// piped to promtool, which must report no problem.
//
//   node --import tsx --test scripts/test/operator-metrics.e2e.test.ts
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { spawnOperator, waitFor, type OperatorProcess, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { createPullSecret, deleteAllInstances, installIoTCrd, iotService } from '../../operators/iot/test/e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../../operators/iot/src/iotservice-types.ts';
import { JOBS, OPERATORS, type Operator } from '../alert-rules.ts';

const run = promisify(execFile);
let env: TestEnv;
let promtool = '';
let helm = '';

const lastLine = async (script: string, ...args: string[]) =>
  (await run('bash', [path.join(repoRoot, script), ...args], { timeout: 900_000, maxBuffer: 16 * 1024 * 1024 })).stdout.trim().split('\n').at(-1)!;

before(async () => {
  env = await localTestEnv();
  promtool = await lastLine('cluster/engines/build.sh', 'promtool');
  helm = await lastLine('cluster/engines/build.sh', 'helm');
});
after(() => env?.cleanup());

/** How each operator is installed and started, and the object it is given to reconcile. */
interface Setup {
  /** Installs the operator's CRDs. */
  installCrds: (env: TestEnv) => Promise<void>;
  main: string;
  args: (ns: string) => string[];
  object?: (ns: string) => { type: Parameters<TestEnv['client']['create']>[0]; body: KubeObject };
  /** A series the scrape must show once the object is reconciled (the operator's own metrics). */
  shows?: RegExp;
}
/** Installs CRD files of the repository, one after the other. */
const crdFiles = (files: string[]) => async (env: TestEnv) => {
  for (const file of files) await env.installCrd(path.join(repoRoot, file));
};

const OPERATOR_SETUPS: Record<Operator, Setup> = {
  iot: {
    installCrds: installIoTCrd, // converted by this test process
    main: 'operators/iot/bin/iot-operator.js',
    args: () => [], // its Lease lives in its landscape
    object: (ns) => ({ type: IoTServiceV1alpha1Type, body: iotService('metrics', ns) }),
    shows: /^iotservice_status_phase\{[^}]*name="metrics"/m,
  },
  armada: {
    installCrds: crdFiles(['armadachart', 'armadachartgroup', 'armadamanifest'].map((kind) => `operators/armada/deploy/crds/armada_v1alpha1_${kind}_crd.yml`)),
    main: 'operators/armada/bin/armada-operator.js',
    args: (ns) => ['--leader-election-namespace', ns, '--helm-binary', helm],
  },
  memcached: {
    installCrds: crdFiles(['operators/memcached/deploy/crds/cache_v1alpha1_memcached_crd.yaml']),
    main: 'operators/memcached/src/main.ts',
    args: (ns) => ['--leader-election-namespace', ns],
    object: (ns) => ({
      type: { group: 'cache.example.com', version: 'v1alpha1', kind: 'Memcached', plural: 'memcacheds', namespaced: true },
      body: { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name: 'metrics', namespace: ns }, spec: { size: 1 } } as KubeObject,
    }),
  },
  ptemplate: {
    installCrds: crdFiles(['operators/ptemplate/config/crd/bases/pt.example.com_ptemplates.yaml']),
    main: 'operators/ptemplate/src/main.ts',
    args: (ns) => ['--leader-election-namespace', ns],
  },
};

async function scrape(port: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(response.status, 200);
  return response.text();
}

/** What `promtool check metrics` says of `exposition` (fed on stdin): its exit code and output. */
function checkMetrics(exposition: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(promtool, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
    child.stdin.end(exposition);
  });
}

describe('promtool check metrics over each operator\'s /metrics', () => {
  for (const operator of OPERATORS) {
    it(`${operator}: a real scrape of its /metrics (job ${JOBS[operator]} in the rules) has no problem`, async () => {
      const setup = OPERATOR_SETUPS[operator];
      await setup.installCrds(env);
      const ns = await env.namespace(`metrics-${operator}`);
      const name = `${operator}-operator`;
      const child: OperatorProcess = spawnOperator(
        [...(setup.main.endsWith('.ts') ? ['--import', 'tsx'] : []), setup.main, '--leader-elect', '--metrics-bind-address=127.0.0.1:0', '--log-level=info', ...setup.args(ns)],
        // The IoT operator's landscape is its name's namespace; the others watch the test's namespace.
        { KUBECONFIG: env.kubeconfigPath, OPERATOR_NAME: operator === 'iot' ? ns : name, WATCH_NAMESPACE: operator === 'iot' ? '' : ns },
        { output: 'all' },
      );
      try {
        const port = await waitFor(`${operator} operator to serve /metrics`, async () => {
          const match = /"address":"http:\/\/[^"]*:(\d+)"/.exec(child.output());
          return { done: !!match || child.exitCode !== null, value: Number(match?.[1]), seen: child.output().slice(-800) };
        });
        assert.ok(port > 0, `the operator serves /metrics (exit ${child.exitCode}): ${child.output().slice(-2000)}`);
        const object = setup.object?.(ns);
        if (operator === 'iot') await createPullSecret(env, ns);
        if (object) await env.client.create(object.type, object.body);
        const exposition = await waitFor(`${operator} operator to lead and reconcile`, async () => {
          const text = await scrape(port);
          const leading = /^leader_election_master_status\{[^}]*\} 1$/m.test(text);
          const reconciled = (!object || /^controller_runtime_reconcile_total\{[^}]*result="success"[^}]*\} [1-9]/m.test(text)) && (!setup.shows || setup.shows.test(text));
          return { done: leading && reconciled, value: text, seen: text.split('\n').filter((l) => /^(leader_election|controller_runtime_reconcile_total|iotservice_status_phase)/.test(l)).join('\n') };
        }, { timeoutMs: 90_000 });
        assert.match(exposition, /^process_start_time_seconds \d+$/m, 'the process metrics are in the scrape');
        assert.match(exposition, /^rest_client_requests_total\{/m, 'the client metrics are in the scrape');
        const { code, output } = await checkMetrics(exposition);
        assert.equal(output.trim(), '', `promtool check metrics reports problems for the ${operator} operator`);
        assert.equal(code, 0);
      } finally {
        if (operator === 'iot') await deleteAllInstances(env, ns); // its finalizer needs the operator
        const code = await child.stop();
        assert.equal(code, 0, `the ${operator} operator stops cleanly: ${child.output().slice(-2000)}`);
      }
    });
  }
});
