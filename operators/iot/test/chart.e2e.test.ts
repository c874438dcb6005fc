// run-tests: alone among the IoT files: it applies the CRD as shipped (conversion naming a Service) for a server-side dry run.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { installServiceMonitorApi, removeServiceMonitorApi, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { installIoTCrd, restoreShippedConversion, serveIoTConversion } from './e2e-support.ts';

const run = promisify(execFile);
const chart = path.join(repoRoot, 'operators/iot/chart/iot-operator');
let env: TestEnv;

function runWithInput(command: string, args: string[], input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${path.basename(command)} exited ${code}: ${err}`))));
    child.stdin.end(input);
  });
}
let helm: string;
let kubectl: string;

before(async () => {
  env = await localTestEnv();
  await installIoTCrd(env);
  helm = (await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
  kubectl = path.join((await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
});

after(async () => {
  await env?.cleanup();
});

describe('the Helm chart', () => {
  it('renders objects the API server accepts, scoped to the release namespace', async () => {
    const landscape = await env.namespace('chart');
    const { stdout: rendered } = await run(helm, ['template', 'iot', chart, '--namespace', landscape, '--kube-version', '1.33.0', '--include-crds',
      '--set', 'imagePullSecret.create=true', '--set', 'imagePullSecret.dockerconfigjson=e30=', '--set', 'image.tag=1.2.3']);
    const objects = parseAllDocuments(rendered).map((d) => d.toJSON() as { kind: string; metadata: { name: string; namespace?: string } }).filter(Boolean);
    assert.deepEqual(objects.map((o) => o.kind).sort(), [
      'ClusterRole', 'ClusterRole', 'ClusterRole', 'ClusterRoleBinding', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Deployment', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Secret', 'Secret', 'Secret', 'Service', 'Service', 'ServiceAccount',
      'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'ValidatingWebhookConfiguration',
    ]);
    for (const o of objects.filter((o) => ['Deployment', 'Role', 'RoleBinding', 'Secret', 'Service', 'ServiceAccount'].includes(o.kind))) assert.equal(o.metadata.namespace, landscape, `${o.kind} in the release namespace`);
    assert.match(rendered, new RegExp(`request\\.userInfo\\.username == 'system:serviceaccount:${landscape}:iot-operator'`), 'the policy confines this release’s ServiceAccount');
    assert.match(rendered, /image: "registry\.example\.com\/iot\/iot-operator:1\.2\.3"/);
    assert.match(rendered, /- --leader-elect/);
    assert.match(rendered, /- --allowed-service-types=ClusterIP/);
    assert.match(rendered, /- --stuck-pod-timeout=5m/);

    // The installed CRD's conversion points at this test process's URL; the chart's CRD names a
    // Service, and applying it beside that URL would be refused: dry-run against the CRD as shipped.
    await restoreShippedConversion(env);
    const stdout = await runWithInput(kubectl, ['--kubeconfig', env.kubeconfigPath, 'apply', '--dry-run=server', '-f', '-'], rendered).finally(() => serveIoTConversion(env));
    for (const kind of ['serviceaccount', 'secret', 'service', 'clusterrole', 'clusterrolebinding', 'role', 'rolebinding', 'validatingadmissionpolicy', 'validatingadmissionpolicybinding', 'validatingwebhookconfiguration', 'deployment', 'poddisruptionbudget']) assert.match(stdout, new RegExp(`${kind}[^\\n]*(created|configured|unchanged) \\(server dry run\\)`));
  });

  it('a metrics Service always; a ServiceMonitor only where the Prometheus Operator API is served', async () => {
    const landscape = await env.namespace('chart-metrics');
    const render = async (...extra: string[]) =>
      (await run(helm, ['template', 'iot', chart, '--namespace', landscape, '--kube-version', '1.33.0', '--show-only', 'templates/metrics-service.yaml', ...extra])).stdout;
    const kinds = (rendered: string) => parseAllDocuments(rendered).map((d) => (d.toJSON() as { kind: string } | null)?.kind).filter(Boolean);
    assert.deepEqual(kinds(await render()), ['Service']);
    const withApi = await render('--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor');
    assert.deepEqual(kinds(withApi), ['Service', 'ServiceMonitor']);
    assert.deepEqual(kinds(await render('--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor', '--set', 'metrics.serviceMonitor=false')), ['Service']);
    const deployFiles = ['metrics_service.yml', 'service_monitor.yml'].map((f) => path.join(repoRoot, 'operators/iot/deploy', f));
    const deployed = (await Promise.all(deployFiles.map((f) => readFile(f, 'utf8')))).join('\n---\n').replaceAll('devawsk8s', landscape);

    // Without the API the ServiceMonitor is refused by name; with it (a stand-in CRD) both are accepted.
    await removeServiceMonitorApi(env);
    await assert.rejects(runWithInput(kubectl, ['--kubeconfig', env.kubeconfigPath, 'apply', '--dry-run=server', '-f', '-'], deployed), /no matches for kind "ServiceMonitor"/);
    await installServiceMonitorApi(env);
    try {
      for (const manifests of [withApi, deployed]) {
        const stdout = await runWithInput(kubectl, ['--kubeconfig', env.kubeconfigPath, 'apply', '--dry-run=server', '-f', '-'], manifests);
        assert.match(stdout, /service\/iot-operator-metrics created \(server dry run\)/);
        assert.match(stdout, /servicemonitor\.monitoring\.coreos\.com\/iot-operator-metrics created \(server dry run\)/);
      }
    } finally {
      await removeServiceMonitorApi(env);
    }
  });

  it('refuses to render a pull secret without credentials', async () => {
    await assert.rejects(run(helm, ['template', 'iot', chart, '--kube-version', '1.33.0', '--set', 'imagePullSecret.create=true']), /imagePullSecret\.dockerconfigjson is required/);
  });
});
