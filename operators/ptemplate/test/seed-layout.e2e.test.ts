/**
 * The seed's layout and make targets on the real local cluster: `make install` registers the CRD
 * from config/crd/bases/pt.example.com_ptemplates.yaml; `make deploy` creates namespace
 * ptemplate-operator-system, ClusterRole ptemplate-operator-manager-role and Deployment
 * ptemplate-operator-controller-manager (pods ptemplate-operator-controller-manager-*) running
 * IMG; the operator, run as that Deployment's ServiceAccount with only config/ RBAC, watches every
 * namespace, holds its Lease in ptemplate-operator-system and serves the seed's example.yaml;
 * `make undeploy` and `make uninstall` remove what they made.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ifFound, isNotFound, Kinds, type KubeObject, type ResourceType } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, spawnOperator, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import type { DaemonSetObject } from '../src/resources/daemonset.ts';

const run = promisify(execFile);
const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const exampleFile = path.join(operatorDir, 'deploy/crds/pt_v1alpha1_ptemplate_cr.yml');
const SYSTEM_NS = 'ptemplate-operator-system';
const IMG = 'registry.example.com/ptemplate-operator:seed-layout';
const CRD = 'ptemplates.pt.example.com';

let env: TestEnv;
let kubectl: string;
let scratch: string;

async function make(target: string, ...vars: string[]): Promise<string> {
  const { stdout } = await run('make', ['--no-print-directory', '-C', operatorDir, target, `KUBECTL=${kubectl}`, ...vars], {
    env: { ...process.env, KUBECONFIG: env.kubeconfigPath },
  });
  return stdout;
}

async function kubectlRun(...args: string[]): Promise<string> {
  return (await run(kubectl, ['--kubeconfig', env.kubeconfigPath, ...args])).stdout;
}

async function exists(type: ResourceType, name: string, namespace?: string): Promise<boolean> {
  return (await ifFound(env.client.get(type, name, namespace))) !== undefined;
}

describe('the seed layout: make install / deploy / undeploy / uninstall', () => {
  before(async () => {
    env = await localTestEnv();
    kubectl = path.join((await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
    scratch = await mkdtemp(path.join(os.tmpdir(), 'ptemplate-seed-'));
    await make('undeploy'); // a clean start even after an interrupted run
  });

  after(async () => {
    await make('undeploy').catch(() => undefined);
    await env?.cleanup();
    await rm(scratch, { recursive: true, force: true });
  });

  test('make install registers the CRD from config/crd/bases', async () => {
    await make('install');
    await env.waitFor(`CRD ${CRD} established`, async () => {
      const crd = await env.client.get<KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }>(Kinds.CustomResourceDefinition, CRD);
      return { done: crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false, value: crd, seen: crd.status };
    });
  });

  test('make deploy: namespace, ClusterRole ptemplate-operator-manager-role, Deployment running IMG', async () => {
    await make('deploy', `IMG=${IMG}`);
    assert.match(await kubectlRun('get', 'clusterrole', 'ptemplate-operator-manager-role', '-o', 'name'), /clusterrole.rbac.authorization.k8s.io\/ptemplate-operator-manager-role/);
    assert.ok(await exists(Kinds.Role, 'ptemplate-operator-leader-election-role', SYSTEM_NS));
    const deployment = await env.client.get<KubeObject & { spec: { template: { spec: { serviceAccountName: string; containers: Array<{ image: string }> } } } }>(
      Kinds.Deployment,
      'ptemplate-operator-controller-manager',
      SYSTEM_NS,
    );
    assert.equal(deployment.spec.template.spec.containers[0]!.image, IMG);
    assert.equal(deployment.spec.template.spec.serviceAccountName, 'ptemplate-operator-controller-manager');
    const pods = await env.waitFor('a Running pod ptemplate-operator-controller-manager-* in ptemplate-operator-system', async () => {
      const out = await kubectlRun('get', 'pods', '-n', SYSTEM_NS, '--no-headers');
      return { done: /^ptemplate-operator-controller-manager-\S+\s+1\/1\s+Running/m.test(out), value: out, seen: out };
    });
    assert.match(pods, /^ptemplate-operator-controller-manager-[a-z0-9]+-[a-z0-9]+\s/m);
  });

  test("the deployed ServiceAccount runs the operator on every namespace: the seed's example.yaml gets its DaemonSet", async () => {
    const rendered = await kubectlRun('kustomize', path.join(operatorDir, 'config/default'));
    const accountFile = path.join(scratch, 'service-account.yaml');
    const account = rendered.split(/^---$/m).find((doc) => /^kind: ServiceAccount$/m.test(doc));
    assert.ok(account, 'config/default renders a ServiceAccount');
    await writeFile(accountFile, account);
    const kubeconfig = await serviceAccountKubeconfig(env, SYSTEM_NS, [accountFile]);
    assert.equal(kubeconfig.serviceAccount, 'ptemplate-operator-controller-manager');
    const ns = await env.namespace('pt-seed');
    const operator = spawnOperator(['--import', 'tsx', 'operators/ptemplate/src/main.ts', '--leader-elect', '--metrics-bind-address', '0'], {
      KUBECONFIG: kubeconfig.file,
      WATCH_NAMESPACE: '',
      POD_NAMESPACE: SYSTEM_NS,
      LOG_LEVEL: 'warn',
    });
    let code: number | null;
    try {
      await kubectlRun('apply', '-n', ns, '-f', exampleFile);
      const daemonSet = await env.waitFor('DaemonSet consumer-pod-consumer made by the deployed identity', async () => {
        try {
          return { done: true, value: await env.client.get<DaemonSetObject>(Kinds.DaemonSet, 'consumer-pod-consumer', ns) };
        } catch (err) {
          if (isNotFound(err)) return { done: false, value: undefined, seen: operator.output().slice(-500) };
          throw err;
        }
      }, { timeoutMs: 60_000 });
      assert.equal(daemonSet?.spec?.template.spec?.containers[0]?.image, 'quay.io/chrisp262/pt-device-plugin:consumer-latest');
      assert.ok(await exists(Kinds.Lease, 'ptemplate-operator-leader', SYSTEM_NS), 'the Lease lives in ptemplate-operator-system');
    } finally {
      code = await operator.stop();
      await kubeconfig.cleanup();
    }
    assert.equal(code, 0, `operator exit code (stderr: ${operator.output().slice(-2000)})`);
  });

  test('make undeploy and make uninstall remove the operator and the CRD', async () => {
    await make('undeploy');
    assert.equal(await exists(Kinds.ClusterRole, 'ptemplate-operator-manager-role'), false);
    await env.waitFor(`namespace ${SYSTEM_NS} gone`, async () => ({ done: !(await exists(Kinds.Namespace, SYSTEM_NS)), value: true }), { timeoutMs: 90_000 });
    await make('uninstall');
    await env.waitFor(`CRD ${CRD} gone`, async () => ({ done: !(await exists(Kinds.CustomResourceDefinition, CRD)), value: true }), { timeoutMs: 60_000 });
  });
});
