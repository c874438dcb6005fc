/**
 * What a new user does, in a temporary directory, with nothing from this repository but the two
 * packed tarballs: `npm pack` the runtime and the SDK; `operator-ts init` from the SDK tarball
 * (npm exec); `npm install` (the runtime arrives as a real package of compiled JavaScript, not a
 * workspace link); the project's tests pass as generated; `create api` of a namespaced and a
 * cluster-scoped kind; the RBAC check fails until `generate crd` and `generate rbac` have run;
 * `generate bundle` makes the project's OLM bundle; then the new project's own `npm test` —
 * type-check, unit tests (the bundle checked too) and end-to-end tests on the local cluster as
 * the operator's ServiceAccount — passes; `npm start` runs the operator
 * on the local cluster; `deploy` and `undeploy` put it on and take it off the cluster of a
 * kubeconfig, and `install` fails clearly when the server is unreachable or RBAC is missing.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { customResource, isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
let workDir: string;
let projectDir: string;
let runtimeTarball: string;
let sdkTarball: string;
let env: TestEnv;

/** The environment of a user's shell: without the variable that makes node's test runner in a child report to this one. */
const { NODE_TEST_CONTEXT: _testContext, ...userEnv } = process.env;

function run(command: string, args: string[], cwd: string) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, env: { ...userEnv, npm_config_update_notifier: 'false' } });
  return { status: result.status, stdout: result.stdout, output: `${result.stdout}\n${result.stderr}` };
}

function succeed(command: string, args: string[], cwd: string): string {
  const result = run(command, args, cwd);
  assert.equal(result.status, 0, `${command} ${args.join(' ')} failed:\n${result.output.slice(-6000)}`);
  return result.stdout;
}

/** The pass and fail counts of the unit and the e2e run, in that order, from the TAP summaries. */
function testCounts(output: string) {
  const counts = (what: string) => [...output.matchAll(new RegExp(`^# ${what} (\\d+)$`, 'gm'))].map((m) => Number(m[1]));
  return { passed: counts('pass'), failed: counts('fail') };
}

describe('the operator-ts workflow of a new user', () => {
  before(() => {
    workDir = mkdtempSync(path.join(os.tmpdir(), 'operator-ts-workflow-'));
    projectDir = path.join(workDir, 'demo-operator');
  });

  after(async () => {
    await env?.cleanup();
    rmSync(workDir, { recursive: true, force: true });
  });

  test('npm pack makes a runtime and an sdk tarball', () => {
    const packDir = path.join(workDir, 'packs');
    mkdirSync(packDir);
    const packed = JSON.parse(succeed('npm', ['pack', '--json', '-w', '@iot-operator/runtime', '-w', '@iot-operator/sdk', '--pack-destination', packDir], repoRoot)) as Array<{ name: string; filename: string }>;
    const byName = Object.fromEntries(packed.map((p) => [p.name, path.join(packDir, path.basename(p.filename))]));
    runtimeTarball = byName['@iot-operator/runtime']!;
    sdkTarball = byName['@iot-operator/sdk']!;
    assert.deepEqual(readdirSync(packDir).sort(), [path.basename(runtimeTarball), path.basename(sdkTarball)].sort());
  });

  test('operator-ts init, run from the sdk tarball, writes a project that installs from the tarballs', () => {
    succeed('npm', ['exec', '--yes', `--package=${sdkTarball}`, '--', 'operator-ts', 'init', 'demo-operator', '--runtime-version', `file:${runtimeTarball}`, '--sdk-version', `file:${sdkTarball}`], workDir);
    succeed('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], projectDir);
    const runtimeDir = path.join(projectDir, 'node_modules/@iot-operator/runtime');
    assert.equal(lstatSync(runtimeDir).isSymbolicLink(), false, 'the runtime is an installed package, not a link');
    const manifest = JSON.parse(readFileSync(path.join(runtimeDir, 'package.json'), 'utf8')) as { exports: Record<string, { default: string }> };
    assert.equal(manifest.exports['.']?.default, './dist/index.js');
    assert.deepEqual(readdirSync(runtimeDir).sort(), ['README.md', 'dist', 'package.json']);
    // The packed control plane is the repository's, kwok Stages included (up keeps one Stage
    // block per cluster: a package without them would rewrite the block of a shared cluster).
    const shippedCluster = path.join(projectDir, 'node_modules/@iot-operator/sdk/cluster');
    const repoCluster = path.join(repoRoot, 'cluster');
    // Everything but the tests and the repository's TypeScript harness: an up of a cluster with a
    // real node builds and starts its parts.
    assert.deepEqual(readdirSync(shippedCluster).sort(), readdirSync(repoCluster).filter((e) => !['test', 'src', 'package.json', 'tsconfig.json'].includes(e)).sort());
    const needed = [
      ...['lib.sh', 'cli/cluster.ts', 'engines/build.sh', 'engines/versions.env', 'parts/run.sh'],
      ...['control-plane', 'control-plane/kwok-stages', 'node', 'registry', 'dns', 'volumes', 'network-policy', 'olm', 'sharder', 'cert-manager']
        .flatMap((dir) => readdirSync(path.join(repoCluster, 'parts', dir), { withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join('parts', dir, e.name))),
    ];
    for (const file of needed) assert.equal(readFileSync(path.join(shippedCluster, file), 'utf8'), readFileSync(path.join(repoCluster, file), 'utf8'), `cluster/${file} is shipped as it is`);
  });

  test("right after init, the project's npm test passes", () => {
    assert.deepEqual(testCounts(succeed('npm', ['test'], projectDir)), { passed: [4, 1], failed: [0, 0] });
  });

  test('an e2e test run without `operator-ts cluster exec` says how to run it', () => {
    const { IOT_TEST_USE_KUBECONFIG: _use, ...env } = userEnv;
    const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', 'test/operator.e2e.test.ts'], { cwd: projectDir, encoding: 'utf8', env });
    assert.equal(result.status, 1);
    assert.match(result.stdout, /no cluster is named for the tests: run them through `operator-ts cluster exec -- <command>`/);
  });

  test('create api adds a namespaced and a cluster-scoped API; the committed RBAC then fails its check until generated', () => {
    succeed('npx', ['--no-install', 'operator-ts', 'create', 'api', '--group', 'demo', '--version', 'v1alpha1', '--kind', 'Widget'], projectDir);
    succeed('npx', ['--no-install', 'operator-ts', 'create', 'api', '--api-version', 'tenancy.example.com/v1', '--kind', 'Tenant', '--namespaced=false'], projectDir);
    const check = run('npx', ['--no-install', 'operator-ts', 'generate', 'rbac', '--check'], projectDir);
    assert.equal(check.status, 1);
    assert.match(check.output, /deploy\/role\.yaml differs from what `operator-ts generate rbac` writes/);

    assert.match(succeed('npx', ['--no-install', 'operator-ts', 'generate', 'crd'], projectDir), /wrote deploy\/crds\/demo_v1alpha1_widget_crd\.yaml\nwrote deploy\/crds\/tenancy_v1_tenant_crd\.yaml/);
    assert.match(succeed('npx', ['--no-install', 'operator-ts', 'generate', 'rbac'], projectDir), /wrote deploy\/role\.yaml\nwrote deploy\/role_binding\.yaml/);
    const role = readFileSync(path.join(projectDir, 'deploy/role.yaml'), 'utf8');
    assert.match(role, /^kind: ClusterRole$/m, 'a cluster-scoped kind needs a ClusterRole');
    assert.match(role, /# owns\(Namespace\)\n\s+- apiGroups: \[""\]\n\s+resources: \[namespaces\]/);
    assert.match(role, /# for\(Widget\)\n\s+- apiGroups: \[demo\.example\.com\]\n\s+resources: \[widgets\]\n\s+verbs: \[get, list, watch\]/);
    assert.match(role, /# owns\(ConfigMap\)\n\s+- apiGroups: \[""\]\n\s+resources: \[configmaps\]\n\s+verbs: \[get, list, watch, create, update, patch, delete\]/);
    succeed('npx', ['--no-install', 'operator-ts', 'generate', 'rbac', '--check'], projectDir);
  });

  test("generate bundle makes the project's OLM bundle from deploy/ and package.json: both APIs owned, the ClusterRole as clusterPermissions", () => {
    assert.match(succeed('npx', ['--no-install', 'operator-ts', 'generate', 'bundle'], projectDir), /wrote bundle\/0\.1\.0\/manifests\/demo-operator\.clusterserviceversion\.yaml/);
    const csv = parse(readFileSync(path.join(projectDir, 'bundle/0.1.0/manifests/demo-operator.clusterserviceversion.yaml'), 'utf8'));
    assert.deepEqual(csv.spec.customresourcedefinitions.owned.map((o: { name: string }) => o.name).sort(), ['tenants.tenancy.example.com', 'widgets.demo.example.com']);
    const role = parse(readFileSync(path.join(projectDir, 'deploy/role.yaml'), 'utf8'));
    assert.deepEqual(csv.spec.install.spec.clusterPermissions, [{ serviceAccountName: 'demo-operator', rules: role.rules }]);
  });

  test("the new project's npm test passes: type-check, unit tests, end-to-end tests on the local cluster", () => {
    // unit: 4 generated-file checks + 3 Widget + 3 Tenant reconcile tests; e2e: 1 operator test + 4 Widget + 3 Tenant tests.
    assert.deepEqual(testCounts(succeed('npm', ['test'], projectDir)), { passed: [10, 8], failed: [0, 0] });
  });

  test('npm start runs the operator on the local cluster with its CRDs installed; it reconciles and stops on SIGINT', async () => {
    env = await localTestEnv();
    const ns = await env.namespace('sdk-start');
    const operator = spawn('npm', ['start', '--', '--metrics-bind-address', '127.0.0.1:0'], { cwd: projectDir, env: userEnv, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    operator.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    operator.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    // 'close': npm has exited and every process holding its output (the operator) has too.
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => operator.once('close', (code, signal) => resolve({ code, signal })));
    try {
      await env.waitFor('the operator to start its Widget controller', async () => ({ done: /"controller":"widget".*"msg":"controller started"/.test(output), value: true, seen: output.slice(-1000) }));
      assert.match(output, /installed deploy\/crds\/demo_v1alpha1_widget_crd\.yaml/);
      await env.client.create(customResource('demo.example.com', 'v1alpha1', 'Widget', 'widgets'), {
        apiVersion: 'demo.example.com/v1alpha1',
        kind: 'Widget',
        metadata: { name: 'started', namespace: ns },
        spec: { message: 'from npm start' },
      });
      const configMap = await env.waitFor('the ConfigMap of the Widget', async () => {
        const found = await env.client.get(Kinds.ConfigMap, 'started-widget', ns);
        return { done: true, value: found };
      });
      assert.deepEqual(configMap.data, { message: 'from npm start' });
    } finally {
      process.kill(-operator.pid!, 'SIGINT');
    }
    // Ctrl-C reaches the whole foreground group: npm ends by the signal, the operator stops gracefully.
    const { code, signal } = await exited;
    assert.ok(code === 0 || signal === 'SIGINT', `npm start ended with code ${code}, signal ${signal}`);
    assert.match(output, /"exitCode":0,"msg":"manager stopped"/);
  });

  test('deploy puts the CRDs and the operator on the cluster of a kubeconfig, undeploy removes them', async () => {
    const ns = await env.namespace('sdk-deploy');
    const target = ['--kubeconfig', env.kubeconfigPath, '--namespace', ns];
    const deployed = succeed('npx', ['--no-install', 'operator-ts', 'deploy', ...target, '--image', 'registry.example.com/demo-operator:v1'], projectDir);
    assert.match(deployed, /installed CustomResourceDefinition widgets\.demo\.example\.com/);
    const deployment = await env.client.get<KubeObject & { spec: { template: { spec: { serviceAccountName: string; containers: Array<{ image: string }> } } } }>(Kinds.Deployment, 'demo-operator', ns);
    assert.equal(deployment.spec.template.spec.containers[0]?.image, 'registry.example.com/demo-operator:v1');
    assert.equal(deployment.spec.template.spec.serviceAccountName, 'demo-operator');
    const binding = await env.client.get<KubeObject & { subjects: Array<{ name: string; namespace: string }> }>(Kinds.ClusterRoleBinding, 'demo-operator');
    assert.deepEqual(binding.subjects.map((subject) => `${subject.namespace}/${subject.name}`), [`${ns}/demo-operator`]);

    const undeployed = succeed('npx', ['--no-install', 'operator-ts', 'undeploy', ...target], projectDir);
    assert.match(undeployed, /deleted Deployment .*\n(.*\n)*deleted CustomResourceDefinition widgets\.demo\.example\.com/);
    await assert.rejects(env.client.get(Kinds.Deployment, 'demo-operator', ns), (err) => isNotFound(err));
    await assert.rejects(env.client.get(Kinds.ClusterRoleBinding, 'demo-operator'), (err) => isNotFound(err));
    await env.waitFor('the Widget CRD to be gone', async () => {
      const crd = await env.client.get(Kinds.CustomResourceDefinition, 'widgets.demo.example.com').catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      });
      return { done: crd === undefined, value: undefined, seen: crd?.metadata.deletionTimestamp };
    });
  });

  test('install fails clearly on an unreachable API server and on missing RBAC, writing nothing', async () => {
    const unreachable = path.join(workDir, 'unreachable.kubeconfig');
    writeFileSync(unreachable, readFileSync(env.kubeconfigPath, 'utf8').replace(/server: .*/g, 'server: https://127.0.0.1:1'));
    const offline = run('npx', ['--no-install', 'operator-ts', 'install', '--kubeconfig', unreachable], projectDir);
    assert.equal(offline.status, 1);
    assert.match(offline.output, /operator-ts: install failed: cannot reach the API server https:\/\/127\.0\.0\.1:1 \(kubeconfig .*unreachable\.kubeconfig\)/);

    // A ServiceAccount bound to nothing may not create CustomResourceDefinitions.
    const ns = await env.namespace('sdk-norbac');
    const account = await serviceAccountKubeconfig(env, ns, [path.join(projectDir, 'deploy/service_account.yaml')]);
    try {
      const refused = run('npx', ['--no-install', 'operator-ts', 'install', '--kubeconfig', account.file], projectDir);
      assert.equal(refused.status, 1);
      assert.match(refused.output, /not allowed to apply CustomResourceDefinition widgets\.demo\.example\.com with the credentials of .* \(RBAC\): .*cannot patch resource "customresourcedefinitions"/);
    } finally {
      await account.cleanup();
    }
    await assert.rejects(env.client.get(Kinds.CustomResourceDefinition, 'widgets.demo.example.com'), (err) => isNotFound(err), 'no CRD was written');
  });
});
