// The operator's Helm chart (chart/armada-operator) installed with the real `helm install` on the
// local cluster: the objects it creates, that its CRDs are the ones deploy/ has, that the
// operator running as the chart's ServiceAccount (only the chart's RBAC) installs and uninstalls
// the examples' releases, and that `helm uninstall` removes what it installed (CRDs stay, as Helm
// does with a chart's crds/).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { parse as parseYaml, parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { customResource, isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';

const run = promisify(execFile);
const operatorDir = path.join(repoRoot, 'operators/armada');
const chart = path.join(operatorDir, 'chart/armada-operator');
const CRD_NAMES = ['armadacharts.armada.airshipit.org', 'armadachartgroups.armada.airshipit.org', 'armadamanifests.armada.airshipit.org'];
const ArmadaManifest = customResource('armada.airshipit.org', 'v1alpha1', 'ArmadaManifest', 'armadamanifests');

let env: TestEnv;
let helm: string;
let kubectl: string;

function helmCmd(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(helm, ['--kubeconfig', env.kubeconfigPath, ...args], { timeout: 300_000 });
}

interface Container {
  image: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
}
type Deployment = KubeObject & {
  spec: { template: { spec: { serviceAccountName: string; containers: Container[] } } };
  status?: { readyReplicas?: number };
};
type ClusterRole = KubeObject & { rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> };
type RoleBinding = KubeObject & { subjects: Array<{ kind: string; name: string; namespace: string }>; roleRef: { kind: string; name: string } };

/** A kubeconfig for the test cluster that authenticates as `namespace/serviceAccount` only (a TokenRequest token). */
async function serviceAccountKubeconfig(namespace: string, serviceAccount: string): Promise<{ file: string; remove: () => Promise<void> }> {
  const request = await env.client.raw<{ status?: { token?: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  });
  assert.ok(request.status?.token, `a token for ServiceAccount ${namespace}/${serviceAccount}`);
  const admin = parseYaml(await readFile(env.kubeconfigPath, 'utf8')) as { clusters: Array<{ cluster: Record<string, unknown> }> };
  const dir = await mkdtemp(path.join(os.tmpdir(), 'armada-chart-sa-'));
  const file = path.join(dir, 'kubeconfig.yaml');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: admin.clusters[0]!.cluster }],
    users: [{ name: serviceAccount, user: { token: request.status.token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: serviceAccount, namespace } }],
    'current-context': 'test',
  };
  await writeFile(file, stringifyYaml(config), { mode: 0o600 });
  return { file, remove: () => rm(dir, { recursive: true, force: true }) };
}

async function helmReleases(namespace: string): Promise<Array<[string, string]>> {
  const { stdout } = await helmCmd(['list', '--namespace', namespace, '--all', '--output', 'json']);
  return (JSON.parse(stdout) as Array<{ name: string; status: string }>).map((r) => [r.name, r.status] as [string, string]).sort();
}

before(async () => {
  env = await localTestEnv();
  helm = (await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
  kubectl = path.join((await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
});

after(async () => {
  await env?.cleanup();
});

describe('the operator chart', () => {
  it('lints clean, carries every CRD file of deploy/, and a ServiceMonitor only where its API is served', async () => {
    const { stdout } = await run(helm, ['lint', '--strict', chart, '--kube-version', '1.33.0']);
    assert.match(stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    const deployed = readdirSync(path.join(operatorDir, 'deploy/crds')).sort();
    // npm run generate writes each CRD to both (its check holds the contents equal): no other file is there.
    assert.deepEqual(readdirSync(path.join(chart, 'crds')).sort(), deployed, 'the chart has a copy of every CRD file of deploy/crds');
    // Watching every namespace (the default), the rights are bound cluster-wide.
    const { stdout: rendered } = await run(helm, ['template', 'ao', chart, '--namespace', 'armada-system', '--kube-version', '1.33.0']);
    const kinds = parseAllDocuments(rendered).map((d) => (d.toJSON() as KubeObject | null)?.kind).filter(Boolean);
    assert.deepEqual(kinds.sort(), ['ClusterRole', 'ClusterRoleBinding', 'Deployment', 'Service', 'ServiceAccount']);
    // Where the Prometheus Operator's API is served, a ServiceMonitor scrapes that Service.
    const { stdout: withApi } = await run(helm, ['template', 'ao', chart, '--namespace', 'armada-system', '--kube-version', '1.33.0', '--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor']);
    const monitor = parseAllDocuments(withApi).map((d) => d.toJSON() as (KubeObject & { spec: { endpoints: Array<{ port: string }> } }) | null).find((o) => o?.kind === 'ServiceMonitor');
    assert.deepEqual(monitor?.spec.endpoints.map((e) => e.port), ['http']);
  });

  it('helm install creates the CRDs, ServiceAccount, RBAC, Service and a Deployment; as that ServiceAccount the operator installs and uninstalls the examples; helm uninstall removes it all', async () => {
    const ns = await env.namespace('armada-chart');
    const release = 'armada-operator';
    await helmCmd(['install', release, chart, '--namespace', ns, '--set', 'image.tag=1.2.3', '--set', `watchNamespace=${ns}`, '--wait', '--timeout', '120s']);

    const { stdout: listed } = await helmCmd(['list', '--namespace', ns, '--output', 'json']);
    const releases = JSON.parse(listed) as Array<{ name: string; status: string; chart: string }>;
    assert.deepEqual(releases.map((r) => [r.name, r.status, r.chart]), [[release, 'deployed', 'armada-operator-0.1.0']]);

    for (const name of CRD_NAMES) {
      const crd = await env.client.get(Kinds.CustomResourceDefinition, name);
      const established = (crd.status as { conditions?: Array<{ type: string; status: string }> }).conditions?.some((c) => c.type === 'Established' && c.status === 'True');
      assert.ok(established, `CRD ${name} is Established`);
    }

    await env.client.get(Kinds.ServiceAccount, 'armada-operator', ns);
    const role = (await env.client.get(Kinds.ClusterRole, `armada-operator-${ns}`)) as ClusterRole;
    const deployRole = parseYaml(readFileSync(path.join(operatorDir, 'deploy/role.yml'), 'utf8')) as ClusterRole;
    assert.deepEqual(role.rules, deployRole.rules, "the ClusterRole's rules are deploy/role.yml's");
    // Watching one namespace, the rights are bound in that namespace only.
    const binding = (await env.client.get(Kinds.RoleBinding, `armada-operator-${ns}`, ns)) as RoleBinding;
    assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `armada-operator-${ns}` });
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'armada-operator', namespace: ns }]);
    await env.client.get(Kinds.Service, 'armada-operator', ns);

    const deployment = (await env.client.get(Kinds.Deployment, 'armada-operator', ns)) as Deployment;
    assert.equal(deployment.status?.readyReplicas, 1, 'helm --wait returned with the Deployment available (kwok runs its pod)');
    const pod = deployment.spec.template.spec;
    assert.equal(pod.serviceAccountName, 'armada-operator');
    const container = pod.containers[0]!;
    assert.equal(container.image, 'registry.example.com/armada/armada-operator:1.2.3');
    assert.deepEqual(container.args, ['--leader-elect', '--metrics-bind-address=0.0.0.0:8080', '--log-level=info']);
    assert.deepEqual(container.env?.find((e) => e.name === 'WATCH_NAMESPACE'), { name: 'WATCH_NAMESPACE', value: ns });
    assert.deepEqual(container.env?.find((e) => e.name === 'POD_NAMESPACE'), { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } });

    // The operator as the chart runs it: its ServiceAccount, nothing but the chart's RBAC. It runs
    // from the checkout (kwok runs no container), in operators/armada as the README shows.
    const kubeconfig = await serviceAccountKubeconfig(ns, 'armada-operator');
    const operator = spawn(process.execPath, ['bin/armada-operator.js', '--namespace', ns, '--metrics-bind-address', '0', '--log-level', 'warn'], {
      cwd: operatorDir,
      env: { ...process.env, KUBECONFIG: kubeconfig.file, HELM_BINARY: helm },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let operatorLog = '';
    operator.stderr.on('data', (d: Buffer) => (operatorLog += d.toString()));
    try {
      await run(kubectl, ['--kubeconfig', env.kubeconfigPath, 'create', '--namespace', ns, '-f', 'examples/armada'], { cwd: operatorDir });
      await env.waitFor(
        'ArmadaManifest simple-armada to be satisfied (the operator runs as the chart\'s ServiceAccount)',
        async () => {
          const amf = (await env.client.get(ArmadaManifest, 'simple-armada', ns)) as KubeObject & { status?: { satisfied?: boolean; reason?: string } };
          return { done: amf.status?.satisfied === true, value: amf, seen: { status: amf.status, operatorLog: operatorLog.slice(-1500) } };
        },
        { timeoutMs: 180_000 },
      );
      assert.deepEqual(await helmReleases(ns), [['armada-operator', 'deployed'], ['blog-1', 'deployed'], ['blog-2', 'deployed']]);
      await run(kubectl, ['--kubeconfig', env.kubeconfigPath, 'delete', '--namespace', ns, '-f', 'examples/armada', '--timeout=180s'], { cwd: operatorDir });
      assert.deepEqual(await helmReleases(ns), [['armada-operator', 'deployed']], 'deleting the examples uninstalled their releases');
      assert.equal(operator.exitCode, null, `the operator is still running; its log: ${operatorLog.slice(-1500)}`);
    } finally {
      operator.kill('SIGTERM');
      await kubeconfig.remove();
    }

    await helmCmd(['uninstall', release, '--namespace', ns, '--wait', '--timeout', '120s']);
    for (const [type, name, namespace] of [
      [Kinds.Deployment, 'armada-operator', ns],
      [Kinds.ServiceAccount, 'armada-operator', ns],
      [Kinds.Service, 'armada-operator', ns],
      [Kinds.ClusterRole, `armada-operator-${ns}`, undefined],
      [Kinds.RoleBinding, `armada-operator-${ns}`, ns],
    ] as const) {
      await env.waitFor(`${type.kind} ${name} to be removed by helm uninstall`, async () => {
        try {
          await env.client.get(type, name, namespace);
          return { done: false, value: undefined, seen: 'still there' };
        } catch (err) {
          if (isNotFound(err)) return { done: true, value: undefined };
          throw err;
        }
      });
    }
    for (const name of CRD_NAMES) await env.client.get(Kinds.CustomResourceDefinition, name);
  });
});
