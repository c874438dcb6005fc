/**
 * Seeds 000/001's IoT operator walkthrough, replayed verbatim on the real local cluster from a copy
 * of operators/iot: the seed's `kubectl` and `sed` command lines in that directory, after the step
 * the seed asks for ("specify that namespace correctly in each of the manifests": devawsk8s becomes
 * the test's landscape), and the output columns the seed shows. The local cluster's pods run no
 * containers, so the operator Deployment's pod is simulated and the operator runs as a process with
 * only that Deployment's ServiceAccount token (deploy/ RBAC and admission policy in force).
 */
// run-tests: alone among the IoT files: it applies the CRD as shipped (conversion naming a Service) with the seed's kubectl commands.
import assert from 'node:assert/strict';
import { exec as execCallback } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Kinds, customResource, type KubeObject } from '@iot-operator/runtime';
import { TestEnv as TestEnvClass, serviceAccountKubeconfig, waitFor, type OperatorProcess, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { restoreShippedConversion, serveIoTConversion, spawnOperator } from './e2e-support.ts';

const exec = promisify(execCallback);
const operatorDir = path.join(repoRoot, 'operators/iot');
const landscape = `seed-${randomBytes(3).toString('hex')}`;
const version = '20160702-152019.75c54f5'; // the seed's example version
const AdmissionTypes: Record<string, ReturnType<typeof customResource>> = {
  ValidatingAdmissionPolicy: customResource('admissionregistration.k8s.io', 'v1', 'ValidatingAdmissionPolicy', 'validatingadmissionpolicies', false),
  ValidatingAdmissionPolicyBinding: customResource('admissionregistration.k8s.io', 'v1', 'ValidatingAdmissionPolicyBinding', 'validatingadmissionpolicybindings', false),
};

let env: TestEnv;
let workdir: string;
let binDir: string;
let operator: OperatorProcess | undefined;
let serviceAccount: ServiceAccountKubeconfig | undefined;
const policyObjects: KubeObject[] = [];

/** Runs a seed command line in the copy of operators/iot, kubectl being ours. */
async function seed(command: string): Promise<string> {
  const { stdout } = await exec(command, { cwd: workdir, env: { ...process.env, KUBECONFIG: env.kubeconfigPath, PATH: `${binDir}:${process.env.PATH}` } });
  return stdout;
}

/** The rows of a kubectl table, as arrays of cells, header first. */
function table(output: string): string[][] {
  return output.trim().split('\n').map((line) => line.trim().split(/\s+/));
}

describe('seeds 000/001: the IoT operator walkthrough, verbatim', () => {
  before(async () => {
    env = await localTestEnv();
    binDir = (await exec(`bash ${path.join(repoRoot, 'cluster/engines/build.sh')} control-plane`)).stdout.trim().split('\n').at(-1)!;
    workdir = await mkdtemp(path.join(os.tmpdir(), 'iot-seed-'));
    await cp(path.join(operatorDir, 'deploy'), path.join(workdir, 'deploy'), { recursive: true });
    await seed(`sed -i 's/devawsk8s/${landscape}/g' deploy/*.yml deploy/crds/example-iotservice.yml`);
  });

  after(async () => {
    await seed('kubectl delete --ignore-not-found --wait=false -f deploy/crds/example-iotservice.yml').catch(() => undefined);
    await operator?.stop();
    await serviceAccount?.cleanup().catch(() => undefined);
    for (const obj of policyObjects.reverse()) await env.client.delete(AdmissionTypes[obj.kind!]!, obj.metadata.name!).catch(() => undefined);
    await env.client.delete(Kinds.Namespace, landscape).catch(() => undefined);
    await env.client.delete(Kinds.Namespace, `${landscape}-example-iotservice`).catch(() => undefined);
    if (workdir) await rm(workdir, { recursive: true, force: true });
  });

  test('kubectl apply -f deploy/crds/cp_v1alpha1_iotservice_crd.yml (the seed’s path, client-side as the seed runs it) registers the IoTService CRD', async () => {
    // The CRD may be installed already, its conversion pointed at a test process's URL; put back
    // what the file says first, or applying it would set a Service beside that URL.
    await restoreShippedConversion(env);
    await seed('kubectl apply -f deploy/crds/cp_v1alpha1_iotservice_crd.yml');
    await seed('kubectl wait --for=condition=Established crd/iotservices.cp.iotservices.io --timeout=60s');
    // The operator's pod would serve the conversion the CRD names; on this cluster it runs no
    // container, so this test process serves it.
    await serveIoTConversion(env);
  });

  test("sed REPLACE_VERSION, then namespace, RBAC and operator: kubectl --namespace <operator-namespace> get deployments shows iot-operator", async () => {
    await seed(`sed -i 's|REPLACE_VERSION|${version}|g' deploy/operator.yml`);
    assert.match(await readFile(path.join(workdir, 'deploy/operator.yml'), 'utf8'), new RegExp(`image: \\S+/iot-operator:${version.replace('.', '\\.')}`));
    for (const file of ['namespace', 'service_account', 'role', 'role_binding']) await seed(`kubectl apply -f deploy/${file}.yml`);
    for (const obj of await TestEnvClass.readManifests(path.join(workdir, 'deploy/admission_policy.yml'))) policyObjects.push(obj);
    await seed('kubectl apply -f deploy/admission_policy.yml');
    await seed('kubectl apply -f deploy/operator.yml');
    const rows = await waitFor('kubectl get deployments: iot-operator 1/1 available', async () => {
      const current = table(await seed(`kubectl --namespace ${landscape} get deployments`));
      return { done: current.some((r) => r[0] === 'iot-operator' && r[1] === '1/1' && r[3] === '1'), value: current, seen: current };
    });
    assert.deepEqual(rows[0], ['NAME', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'AGE']);
  });

  test('the operator, as the deployed ServiceAccount, runs the seed\'s example: kubectl get iotservice', async () => {
    serviceAccount = await serviceAccountKubeconfig(env, landscape, [path.join(workdir, 'deploy/service_account.yml')]);
    operator = spawnOperator(env, landscape, [], { KUBECONFIG: serviceAccount.file });
    await seed('kubectl apply -f deploy/crds/example-iotservice.yml');
    const listed = table(await seed(`kubectl --namespace ${landscape} get iotservice`));
    assert.equal(listed[1]?.[0], 'example-iotservice');
    const rows = await waitFor('kubectl get iots: example-iotservice Available 7/7 2.4.1', async () => {
      const current = table(await seed(`kubectl --namespace ${landscape} get iots`));
      return { done: current.some((r) => r[0] === 'example-iotservice' && r[1] === 'Available' && r[2] === '7/7' && r[3] === '2.4.1'), value: current, seen: [current, operator!.output().slice(-600)] };
    }, { timeoutMs: 120_000 });
    assert.deepEqual(rows[0]!.slice(0, 4), ['NAME', 'PHASE', 'READY', 'VERSION']);
    const pods = table(await seed(`kubectl --namespace ${landscape}-example-iotservice get pods --no-headers`));
    assert.equal(pods.filter((r) => r[2] === 'Running').length, 7, `pods: ${JSON.stringify(pods)}`);
  });

  test('kubectl delete of the example removes its namespace, then the IoTService', async () => {
    await seed('kubectl delete --wait=false -f deploy/crds/example-iotservice.yml');
    await waitFor('the example and its namespace gone', async () => {
      const left = (await seed(`kubectl get namespace ${landscape}-example-iotservice --ignore-not-found -o name`)) + (await seed(`kubectl --namespace ${landscape} get iotservice --ignore-not-found -o name`));
      return { done: left.trim() === '', value: true, seen: left };
    }, { timeoutMs: 120_000 });
    assert.equal(await operator!.stop(), 0, `operator exit code (output: ${operator!.output().slice(-1500)})`);
    operator = undefined;
  });
});
