/**
 * Seed 002's memcached walkthrough, replayed verbatim on the real local cluster from a copy of
 * operators/memcached (the seed edits deploy/operator.yaml in place): the seed's `kubectl` and
 * `sed` command lines, run by a shell in that directory with the test namespace as the current
 * context's namespace, and the output columns the seed shows. `operator-sdk up local` is replaced
 * by our equivalent, the operator's bin run with OPERATOR_NAME and --namespace; since the local
 * cluster's pods run no containers, that process runs as the Deployment's pod (its ServiceAccount
 * token, POD_NAME) so that it also creates the seed's metrics Service.
 */
import assert from 'node:assert/strict';
import { exec as execCallback } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { ifFound, Kinds } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, spawnOperator, type OperatorProcess, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';

const exec = promisify(execCallback);
const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const CRD = 'memcacheds.cache.example.com';

let env: TestEnv;
let ns: string;
let workdir: string;
let kubeconfigFile: string;
let binDir: string;
let operator: OperatorProcess | undefined;
let serviceAccount: ServiceAccountKubeconfig | undefined;

/** Runs a seed command line in the copy of operators/memcached, kubectl being ours. */
async function seed(command: string): Promise<string> {
  const { stdout } = await exec(command, { cwd: workdir, env: { ...process.env, KUBECONFIG: kubeconfigFile, PATH: `${binDir}:${process.env.PATH}` } });
  return stdout;
}

/** The rows of a kubectl table, as arrays of cells, header first. */
function table(output: string): string[][] {
  return output.trim().split('\n').map((line) => line.trim().split(/\s+/));
}

async function crdGone(): Promise<boolean> {
  return (await ifFound(env.client.get(Kinds.CustomResourceDefinition, CRD))) === undefined;
}

describe("seed 002: the memcached walkthrough, verbatim", () => {
  before(async () => {
    env = await localTestEnv();
    binDir = (await exec(`bash ${path.join(repoRoot, 'cluster/engines/build.sh')} control-plane`)).stdout.trim().split('\n').at(-1)!;
    ns = await env.namespace('seed-memcached');
    workdir = await mkdtemp(path.join(os.tmpdir(), 'memcached-seed-'));
    await cp(path.join(operatorDir, 'deploy'), path.join(workdir, 'deploy'), { recursive: true });
    const config = parse(await readFile(env.kubeconfigPath, 'utf8'));
    for (const context of config.contexts) context.context.namespace = ns;
    kubeconfigFile = path.join(workdir, 'kubeconfig.yaml');
    await writeFile(kubeconfigFile, stringify(config), { mode: 0o600 });
    // The seed's `kubectl create` of the CRD needs a cluster without it.
    if (!(await crdGone())) {
      await env.client.delete(Kinds.CustomResourceDefinition, CRD);
      await env.waitFor(`CRD ${CRD} gone`, async () => ({ done: await crdGone(), value: true }), { timeoutMs: 60_000 });
    }
  });

  after(async () => {
    await operator?.stop();
    await serviceAccount?.cleanup();
    await env?.cleanup();
    if (workdir) await rm(workdir, { recursive: true, force: true });
  });

  test('register the CRD, then deploy the operator: kubectl create -f deploy/...', async () => {
    await seed('kubectl create -f deploy/crds/cache_v1alpha1_memcached_crd.yaml');
    await seed('kubectl wait --for=condition=Established crd/memcacheds.cache.example.com --timeout=60s');
    await seed("sed -i 's|REPLACE_IMAGE|quay.io/example/memcached-operator:v0.0.1|g' deploy/operator.yaml");
    assert.match(await readFile(path.join(workdir, 'deploy/operator.yaml'), 'utf8'), /image: quay\.io\/example\/memcached-operator:v0\.0\.1/);
    for (const file of ['service_account', 'role', 'role_binding', 'operator']) await seed(`kubectl create -f deploy/${file}.yaml`);
    const deployments = await env.waitFor('kubectl get deployment: memcached-operator 1/1 available', async () => {
      const rows = table(await seed('kubectl get deployment'));
      return { done: rows.some((r) => r[0] === 'memcached-operator' && r[1] === '1/1' && r[3] === '1'), value: rows, seen: rows };
    });
    assert.deepEqual(deployments[0], ['NAME', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'AGE']);
    const pods = table(await seed('kubectl get pod'));
    assert.ok(pods.some((r) => /^memcached-operator-[a-z0-9]+-[a-z0-9]{5}$/.test(r[0]!) && r[1] === '1/1' && r[2] === 'Running'), `kubectl get pod: ${JSON.stringify(pods)}`);
  });

  test('the operator (our `operator-sdk up local`) logs the seed\'s start-up lines', async () => {
    const podName = table(await seed('kubectl get pod --no-headers')).find((r) => r[0]!.startsWith('memcached-operator-'))![0]!;
    serviceAccount = await serviceAccountKubeconfig(env, ns, [path.join(workdir, 'deploy/service_account.yaml')]);
    operator = spawnOperator(['--import', 'tsx', 'operators/memcached/src/main.ts', `--namespace=${ns}`, '--metrics-bind-address', '127.0.0.1:0'], {
      KUBECONFIG: serviceAccount.file,
      OPERATOR_NAME: 'memcached-operator',
      POD_NAMESPACE: ns,
      POD_NAME: podName,
      LOG_LEVEL: 'info',
    }, { output: 'all' });
    const output = await env.waitFor('the log line "starting memcached operator"', async () => ({ done: operator!.output().includes('starting memcached operator'), value: operator!.output(), seen: operator!.output().slice(-500) }));
    assert.match(output, /"name":"memcached-operator"/);
  });

  test('kubectl apply -f deploy/crds/cache_v1alpha1_memcached_cr.yaml: example-memcached 3/3, pods named in status.nodes', async () => {
    assert.match(await seed('cat deploy/crds/cache_v1alpha1_memcached_cr.yaml'), /size: 3/);
    await seed('kubectl apply -f deploy/crds/cache_v1alpha1_memcached_cr.yaml');
    await env.waitFor('kubectl get deployment: example-memcached 3/3', async () => {
      const rows = table(await seed('kubectl get deployment'));
      return { done: rows.some((r) => r[0] === 'example-memcached' && r[1] === '3/3' && r[3] === '3'), value: rows, seen: rows };
    }, { timeoutMs: 90_000 });
    const memcached = await env.waitFor('status.nodes of kubectl get memcached/example-memcached -o yaml names the 3 pods', async () => {
      const object = parse(await seed('kubectl get memcached/example-memcached -o yaml'));
      return { done: object.status?.nodes?.length === 3, value: object, seen: object.status };
    });
    const pods = table(await seed('kubectl get pods --no-headers')).filter((r) => r[0]!.startsWith('example-memcached-') && r[2] === 'Running').map((r) => r[0]);
    assert.deepEqual([...memcached.status.nodes].sort(), pods.sort());
    assert.equal(memcached.spec.size, 3);
  });

  test('size 3 -> 4 in the file, kubectl apply: example-memcached 4/4', async () => {
    await seed("sed -i 's|size: 3|size: 4|' deploy/crds/cache_v1alpha1_memcached_cr.yaml");
    await seed('kubectl apply -f deploy/crds/cache_v1alpha1_memcached_cr.yaml');
    await env.waitFor('kubectl get deployment: example-memcached 4/4', async () => {
      const rows = table(await seed('kubectl get deployment'));
      return { done: rows.some((r) => r[0] === 'example-memcached' && r[1] === '4/4'), value: rows, seen: rows };
    }, { timeoutMs: 90_000 });
  });

  test('cleanup: kubectl delete -f deploy/crds/cache_v1alpha1_memcached_cr.yaml and deploy/operator.yaml', async () => {
    await seed('kubectl delete -f deploy/crds/cache_v1alpha1_memcached_cr.yaml');
    await seed('kubectl delete -f deploy/operator.yaml');
    await env.waitFor('no Deployment left', async () => {
      const out = await seed('kubectl get deployment --no-headers --ignore-not-found');
      return { done: out.trim() === '', value: true, seen: out };
    }, { timeoutMs: 60_000 });
    assert.equal(await operator!.stop(), 0, `operator exit code (output: ${operator!.output().slice(-1500)})`);
    operator = undefined;
  });
});
