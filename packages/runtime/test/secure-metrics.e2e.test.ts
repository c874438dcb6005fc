// Secure metrics on the real cluster: /metrics over HTTPS answers a ServiceAccount that RBAC allows
// `get /metrics` (nonResourceURLs), refuses one without that right (403) and callers without a
// valid token (401), while /healthz stays open for probes. The scraped text carries the process
// metrics, the host label of the client metrics and the work-queue progress gauges.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { localTestEnv } from '@iot-operator/local-cluster';
import { Kinds, type Manager } from '../src/index.ts';
import { serviceAccountKubeconfig, type ServiceAccountKubeconfig, type TestEnv } from '../src/testing/index.ts';
import { derivedName, startDeriveOperator } from '../examples/derive-operator.ts';
import { makeCertificates, type TestCertificates } from './certificates.ts';

let env: TestEnv;
let ns: string;
let dir: string;
let certs: TestCertificates;
let mgr: Manager | undefined;
const accounts: ServiceAccountKubeconfig[] = [];

before(async () => {
  env = await localTestEnv();
  ns = await env.namespace('rt-secure-metrics');
  dir = await mkdtemp(path.join(os.tmpdir(), 'secure-metrics-'));
  certs = makeCertificates(dir, ['IP:127.0.0.1', 'DNS:localhost']);
});
after(async () => {
  await mgr?.stop();
  for (const account of accounts) await account.cleanup();
  await env?.cleanup();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A ServiceAccount in the test namespace (with `rules` as a ClusterRole bound to it, if any) and its token. */
async function serviceAccountToken(name: string, rules?: unknown[]): Promise<string> {
  const docs: unknown[] = [{ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } }];
  if (rules) {
    const role = `iot-operator-test-${name}`;
    docs.push(
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: role }, rules },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
      },
    );
  }
  const manifest = path.join(dir, `${name}.yaml`);
  await writeFile(manifest, docs.map((d) => JSON.stringify(d)).join('\n---\n'));
  const account = await serviceAccountKubeconfig(env, ns, [manifest]);
  accounts.push(account);
  const config = parse(await readFile(account.file, 'utf8')) as { users: Array<{ user: { token: string } }> };
  return config.users[0]!.user.token;
}

function get(port: number, urlPath: string, token?: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path: urlPath, ca: certs.ca, headers: token ? { Authorization: `Bearer ${token}` } : {} }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

describe('secure metrics', () => {
  it('serves /metrics over HTTPS to callers allowed "get /metrics" only', async () => {
    const reader = await serviceAccountToken('metrics-reader', [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
    const stranger = await serviceAccountToken('no-metrics');
    mgr = await startDeriveOperator({ kubeconfigPath: env.kubeconfigPath, namespace: ns, secureMetrics: { certFile: certs.certFile, keyFile: certs.keyFile } });
    const port = mgr.httpPort!;
    await env.client.create(Kinds.ConfigMap, { metadata: { name: 'app', namespace: ns, labels: { derive: 'true' } }, data: { k: 'v' } });
    await env.waitFor(`secret ${derivedName('app')}`, async () => {
      const secret = await env.client.get(Kinds.Secret, derivedName('app'), ns).catch(() => undefined);
      return { done: secret !== undefined, value: secret };
    });

    const allowed = await get(port, '/metrics', reader);
    assert.equal(allowed.code, 200, allowed.body);
    for (const series of ['process_resident_memory_bytes', 'process_cpu_seconds_total', 'process_open_fds', 'process_start_time_seconds', 'controller_runtime_terminal_reconcile_errors_total']) {
      assert.match(allowed.body, new RegExp(`^${series}`, 'm'), `${series} is scraped`);
    }
    assert.match(allowed.body, /^workqueue_unfinished_work_seconds\{name="configmap"\} \d/m);
    assert.match(allowed.body, /^workqueue_longest_running_processor_seconds\{name="configmap"\} \d/m);
    const host = new URL(env.client.server).host;
    assert.match(allowed.body, new RegExp(`^rest_client_requests_total\\{code="201",host="${host}",method="PATCH"|^rest_client_requests_total\\{code="200",host="${host}",method="PATCH"`, 'm'));

    const refused = await get(port, '/metrics', stranger);
    assert.equal(refused.code, 403);
    assert.match(refused.body, /no-metrics may not get \/metrics/);
    assert.equal((await get(port, '/metrics')).code, 401, 'no token');
    assert.equal((await get(port, '/metrics', 'not-a-token')).code, 401, 'a token the API server does not know');
    assert.equal((await get(port, '/healthz')).code, 200, 'probes need no token');
    await assert.rejects(fetch(`http://127.0.0.1:${port}/metrics`), 'plain HTTP is not served');
  });
});
