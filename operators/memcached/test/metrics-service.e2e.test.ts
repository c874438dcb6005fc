/**
 * The memcached operator makes its metrics discoverable as the seed's operator does, on the real
 * local cluster: deployed from deploy/ (its pod simulated by kwok) and run as that pod — its
 * ServiceAccount's token, POD_NAMESPACE / POD_NAME — it creates Service memcached-operator-metrics
 * selecting the Deployment's pods and owned by the Deployment; without the Prometheus Operator's
 * API it logs that no ServiceMonitor could be created and keeps running; with the API (a
 * stand-in CRD of our own) it creates the ServiceMonitor. OPERATOR_NAME renames the Service,
 * the ServiceMonitor and the Lease.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { ifFound, Kinds, ServiceMonitor, type KubeObject, type OwnerReference, type ResourceType } from '@iot-operator/runtime';
import { installServiceMonitorApi, removeServiceMonitorApi, serviceAccountKubeconfig, spawnOperator, type OperatorProcess, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { MEMCACHED_CRD_FILE } from '../src/api/crd.ts';

const deployDir = fileURLToPath(new URL('../deploy/', import.meta.url));
const memcachedCrdFile = fileURLToPath(new URL(`../${MEMCACHED_CRD_FILE}`, import.meta.url));

interface ServiceObject extends KubeObject {
  metadata: KubeObject['metadata'] & { ownerReferences?: OwnerReference[] };
  spec: { selector: Record<string, string>; ports: Array<{ name: string; port: number }> };
}

let env: TestEnv;
let ns: string;
let kubeconfig: ServiceAccountKubeconfig;
let podName: string;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function getOrUndefined<T extends KubeObject>(type: ResourceType, name: string): Promise<T | undefined> {
  return ifFound(env.client.get<T>(type, name, ns));
}

/** The operator run as its Deployment's pod would run it. */
function runAsPod(port: number, extraEnv: Record<string, string> = {}): OperatorProcess {
  return spawnOperator(['--import', 'tsx', 'operators/memcached/src/main.ts', '--leader-elect', '--metrics-bind-address', `127.0.0.1:${port}`], {
    KUBECONFIG: kubeconfig.file,
    WATCH_NAMESPACE: ns,
    POD_NAMESPACE: ns,
    POD_NAME: podName,
    LOG_LEVEL: 'info',
    ...extraEnv,
  }, { output: 'all' });
}

async function stopped(operator: OperatorProcess): Promise<void> {
  const code = await operator.stop();
  assert.equal(code, 0, `operator exit code (output: ${operator.output().slice(-2000)})`);
}

describe('memcached operator: metrics Service and ServiceMonitor', () => {
  before(async () => {
    env = await localTestEnv();
    await removeServiceMonitorApi(env);
    await env.installCrd(memcachedCrdFile);
    ns = await env.namespace('mc-metrics');
    kubeconfig = await serviceAccountKubeconfig(env, ns, ['service_account.yaml', 'role.yaml', 'role_binding.yaml'].map((f) => path.join(deployDir, f)));
    const deployment = parse((await readFile(path.join(deployDir, 'operator.yaml'), 'utf8')).replace('REPLACE_IMAGE', 'registry.example.com/memcached-operator:test')) as KubeObject;
    await env.client.create(Kinds.Deployment, { ...deployment, metadata: { ...deployment.metadata, namespace: ns } });
    podName = await env.waitFor('a Running pod of the memcached-operator Deployment (kwok)', async () => {
      const pods = await env.client.list(Kinds.Pod, { namespace: ns, labelSelector: 'app.kubernetes.io/name=memcached-operator' });
      const running = pods.items.find((p) => (p as KubeObject & { status?: { phase?: string } }).status?.phase === 'Running');
      return { done: running !== undefined, value: running?.metadata.name ?? '', seen: pods.items.map((p) => p.metadata.name) };
    });
  });

  after(async () => {
    await kubeconfig?.cleanup();
    await removeServiceMonitorApi(env).catch(() => undefined);
    await env?.cleanup();
  });

  test('without the ServiceMonitor API: the Service is created, owned by the Deployment, and the missing API is logged', async () => {
    const port = await freePort();
    const operator = runAsPod(port);
    try {
      const service = await env.waitFor('Service memcached-operator-metrics', async () => {
        const svc = await getOrUndefined<ServiceObject>(Kinds.Service, 'memcached-operator-metrics');
        return { done: svc !== undefined, value: svc!, seen: operator.output().slice(-500) };
      });
      assert.deepEqual(service.spec.selector, { 'app.kubernetes.io/name': 'memcached-operator' }, 'selects the Deployment\'s pods, whatever their template hash');
      assert.deepEqual(service.spec.ports.map((p) => [p.name, p.port]), [['http-metrics', port]]);
      const deployment = await env.client.get(Kinds.Deployment, 'memcached-operator', ns);
      assert.deepEqual(service.metadata.ownerReferences?.map((o) => [o.kind, o.name, o.uid]), [['Deployment', 'memcached-operator', deployment.metadata.uid]]);
      await env.waitFor('the log lines of the missing ServiceMonitor API', async () => {
        const output = operator.output();
        return { done: output.includes('Install prometheus-operator in your cluster to create ServiceMonitor objects'), value: output, seen: output.slice(-800) };
      });
      const output = operator.output();
      assert.match(output, /"Service\.Name":"memcached-operator-metrics","Service\.Namespace":"[^"]+","msg":"Metrics Service object created"/);
      assert.match(output, /"error":"no ServiceMonitor registered with the API","msg":"Could not create ServiceMonitor object"/);
      assert.equal(operator.exitCode, null, 'the operator keeps running');
    } finally {
      await stopped(operator);
    }
  });

  test('with the ServiceMonitor API and OPERATOR_NAME: Service, ServiceMonitor and Lease are named after the operator', async () => {
    await installServiceMonitorApi(env);
    const port = await freePort();
    const operator = runAsPod(port, { OPERATOR_NAME: 'cache-operator' });
    try {
      const monitor = await env.waitFor('ServiceMonitor cache-operator-metrics', async () => {
        const sm = await getOrUndefined<KubeObject & { spec: { selector: { matchLabels: Record<string, string> }; endpoints: Array<{ port: string }> } }>(ServiceMonitor, 'cache-operator-metrics');
        return { done: sm !== undefined, value: sm!, seen: operator.output().slice(-500) };
      });
      const service = await env.client.get<ServiceObject>(Kinds.Service, 'cache-operator-metrics', ns);
      assert.deepEqual(monitor.spec.endpoints.map((e) => e.port), ['http-metrics']);
      for (const [key, value] of Object.entries(monitor.spec.selector.matchLabels)) assert.equal(service.metadata.labels?.[key], value, `the ServiceMonitor selects the Service (${key})`);
      await env.waitFor('Lease cache-operator-leader', async () => ({ done: (await getOrUndefined(Kinds.Lease, 'cache-operator-leader')) !== undefined, value: true }));
      assert.match(operator.output(), /"msg":"ServiceMonitor object created"/);
    } finally {
      await stopped(operator);
    }
  });
});
