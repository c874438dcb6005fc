/**
 * Seed 002's Operator Lifecycle Manager walkthrough on the real local cluster with the real OLM
 * operator (cluster up with CLUSTER_OLM=1 starts it if it is not running): an OperatorGroup;
 * CSV 0.0.1 stays Pending / RequirementsNotMet until its ServiceAccount and RBAC exist, then
 * Succeeds and OLM creates the operator Deployment; two Memcached CRs (wordpress, drupal) get
 * their memcached Deployments; CSV 0.0.2 `replaces` 0.0.1, which OLM removes, and moves the
 * operator Deployment to the 0.0.2 image, while both CRs, their Deployments and pods keep their
 * uids; a CSV owning a CRD that does not exist stays Pending with OLM's reason; both committed
 * CSVs pass the CSV CRD's schema on the API server (server-side dry run).
 *
 * The walkthrough's commands are those of operators/memcached/README.md, run verbatim with the
 * pinned kubectl (each is checked to appear in the README) in a fresh namespace ($NS).
 *
 * kwok runs no containers: the pod of OLM's Deployment is scheduled and reported Running, but no
 * operator runs in it. The memcached Deployments of the CRs are made by the memcached operator
 * run by the test as a process, with a kubeconfig holding only the token of the ServiceAccount
 * the CSV names, watching $NS: what the pod would do.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { ApiError, customResource, ifFound, isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, spawnOperator, type OperatorProcess, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';

const run = promisify(execFile);
const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(path.join(operatorDir, 'README.md'), 'utf8');
const deployDir = path.join(operatorDir, 'deploy');
const csvFile = (version: string) => path.join(operatorDir, 'bundle', version, 'manifests', 'memcachedoperator.clusterserviceversion.yaml');

const ClusterServiceVersion = customResource('operators.coreos.com', 'v1alpha1', 'ClusterServiceVersion', 'clusterserviceversions');
const OperatorGroup = customResource('operators.coreos.com', 'v1', 'OperatorGroup', 'operatorgroups');
const Memcached = customResource('cache.example.com', 'v1alpha1', 'Memcached', 'memcacheds');

interface CsvStatus {
  phase?: string;
  reason?: string;
  message?: string;
  requirementStatus?: Array<{ group: string; kind: string; name: string; status: string; message?: string }>;
}
type Csv = KubeObject & { spec: Record<string, any>; status?: CsvStatus };
type Deployment = KubeObject & { spec: { template: { spec: { containers: Array<{ image: string }> } } }; status?: { readyReplicas?: number } };

let env: TestEnv;
let ns: string;
let brokenNs: string;
let kubectlPath: string;
let operator: OperatorProcess | undefined;
let operatorKubeconfig: ServiceAccountKubeconfig | undefined;

/** Runs one command of the README's walkthrough, verbatim, with $NS set to the test namespace. */
async function walkthrough(command: string, namespace = ns): Promise<string> {
  assert.ok(readme.includes(command), `the README's walkthrough has the command:\n${command}`);
  const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', command], {
    cwd: repoRoot,
    env: { ...process.env, KUBECONFIG: env.kubeconfigPath, PATH: `${kubectlPath}:${process.env.PATH}`, NS: namespace },
    timeout: 180_000,
  });
  return stdout;
}

function csv(name: string, namespace = ns): Promise<Csv | undefined> {
  return ifFound(env.client.get<Csv>(ClusterServiceVersion, name, namespace));
}

/** Pending past OLM's first step, which says `RequirementsUnknown` until it has checked the requirements. */
const pendingChecked = (c: Csv | undefined): boolean => c?.status?.phase === 'Pending' && c.status.reason !== 'RequirementsUnknown';

async function waitForCsv(name: string, expected: string, done: (c: Csv | undefined) => boolean, namespace = ns): Promise<Csv | undefined> {
  return env.waitFor(expected, async () => {
    const current = await csv(name, namespace);
    return { done: done(current), value: current, seen: current?.status ? { phase: current.status.phase, reason: current.status.reason, message: current.status.message } : current && 'no status yet' };
  }, { timeoutMs: 120_000, intervalMs: 500 });
}

/** uids of a Memcached, its Deployment and the Deployment's pods. */
async function instanceUids(name: string): Promise<{ memcached: string; deployment: string; pods: string[] }> {
  const memcached = await env.client.get(Memcached, name, ns);
  const deployment = await env.client.get(Kinds.Deployment, name, ns);
  const pods = await env.client.list(Kinds.Pod, { namespace: ns, labelSelector: `app=memcached,memcached_cr=${name}` });
  return { memcached: memcached.metadata.uid!, deployment: deployment.metadata.uid!, pods: pods.items.map((p) => p.metadata.uid!).sort() };
}

/** The README's CSV with its owned CRD renamed to one that is not installed. */
function csvOwningAMissingCrd(): Csv {
  const broken = parse(readFileSync(csvFile('0.0.1'), 'utf8')) as Csv;
  broken.metadata = { name: 'memcachedcluster-operator.v0.0.1', namespace: brokenNs };
  broken.spec.customresourcedefinitions.owned = [{ name: 'memcachedclusters.cache.example.com', version: 'v1alpha1', kind: 'MemcachedCluster', displayName: 'MemcachedCluster', description: 'Not installed.' }];
  broken.spec.install.spec.deployments[0].name = 'memcachedcluster-operator';
  delete broken.spec.install.spec.permissions;
  return broken;
}

describe('memcached operator on OLM (seed 002, second half)', () => {
  before(async () => {
    process.env.CLUSTER_OLM = '1'; // cluster up (run by localTestEnv) starts OLM unless it runs
    env = await localTestEnv();
    const { stdout } = await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane']);
    kubectlPath = stdout.trim().split('\n').at(-1)!;
    ns = await env.namespace('olm-memcached');
    brokenNs = await env.namespace('olm-broken');
  });

  after(async () => {
    await operator?.stop();
    await operatorKubeconfig?.cleanup();
    await env?.cleanup();
  });

  test('both committed CSVs pass the ClusterServiceVersion schema of the API server; a malformed one does not', async () => {
    for (const version of ['0.0.1', '0.0.2']) {
      const object = { ...(parse(readFileSync(csvFile(version), 'utf8')) as Csv), metadata: { name: `memcachedoperator.v${version}`, namespace: ns } };
      const accepted = await env.client.raw<Csv>({ method: 'POST', path: `/apis/operators.coreos.com/v1alpha1/namespaces/${ns}/clusterserviceversions`, query: { dryRun: 'All' }, body: object });
      assert.equal(accepted.metadata.name, `memcachedoperator.v${version}`);
    }
    assert.equal(await csv('memcachedoperator.v0.0.1'), undefined, 'a dry run creates nothing');
    const malformed = parse(readFileSync(csvFile('0.0.1'), 'utf8')) as Csv;
    malformed.metadata = { name: 'malformed', namespace: ns };
    malformed.spec.installModes[0].supported = 'yes';
    await assert.rejects(env.client.raw({ method: 'POST', path: `/apis/operators.coreos.com/v1alpha1/namespaces/${ns}/clusterserviceversions`, query: { dryRun: 'All' }, body: malformed }), (err: unknown) => {
      assert.ok(err instanceof ApiError && err.reason === 'Invalid', String(err));
      assert.match(err.message, /spec\.installModes\[0\]\.supported: Invalid value: "string": spec\.installModes\[0\]\.supported in body must be of type boolean/);
      return true;
    });
  });

  test('a CSV owning a CRD that does not exist waits in Pending with RequirementsNotMet', async () => {
    await env.client.create(OperatorGroup, { metadata: { name: 'broken-group', namespace: brokenNs }, spec: { targetNamespaces: [brokenNs] } });
    await env.client.create(ClusterServiceVersion, csvOwningAMissingCrd());
    const pending = await waitForCsv('memcachedcluster-operator.v0.0.1', 'the CSV owning a missing CRD to be Pending, its requirements checked', pendingChecked, brokenNs);
    assert.equal(pending!.status!.reason, 'RequirementsNotMet');
    assert.equal(pending!.status!.message, 'one or more requirements couldn\'t be found');
    const crdRequirement = pending!.status!.requirementStatus!.find((r) => r.kind === 'CustomResourceDefinition');
    assert.deepEqual({ name: crdRequirement?.name, status: crdRequirement?.status }, { name: 'memcachedclusters.cache.example.com', status: 'NotPresent' });
    // Re-checked at the end of the suite, after OLM has installed and upgraded the real operator.
  });

  test('OperatorGroup, then CSV 0.0.1: Pending with RequirementsNotMet while its ServiceAccount and RBAC are missing', async () => {
    await walkthrough(`cat <<EOF | kubectl apply -f -
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: memcached-operator-group
  namespace: $NS
spec:
  targetNamespaces:
  - $NS
EOF`);
    await walkthrough('kubectl apply -n $NS -f operators/memcached/bundle/0.0.1/manifests/memcachedoperator.clusterserviceversion.yaml');
    const pending = await waitForCsv('memcachedoperator.v0.0.1', 'CSV 0.0.1 to be Pending, its requirements checked', pendingChecked);
    assert.equal(pending!.status!.reason, 'RequirementsNotMet');
    const account = pending!.status!.requirementStatus!.find((r) => r.kind === 'ServiceAccount');
    assert.deepEqual({ name: account?.name, status: account?.status }, { name: 'memcached-operator', status: 'NotPresent' });
    assert.equal(
      await walkthrough(`kubectl get -n $NS csv memcachedoperator.v0.0.1 -o jsonpath='{.status.phase} {.status.reason}{"\\n"}'`),
      'Pending RequirementsNotMet\n',
    );
    const requirements = await walkthrough(`kubectl get -n $NS csv memcachedoperator.v0.0.1 -o jsonpath='{range .status.requirementStatus[*]}{.kind} {.name}: {.status}{"\\n"}{end}'`);
    assert.match(requirements, /^ServiceAccount memcached-operator: NotPresent$/m);
    await assert.rejects(env.client.get(Kinds.Deployment, 'memcached-operator', ns), (err: unknown) => isNotFound(err), 'OLM installs nothing yet');
  });

  test('with the CRD, ServiceAccount, Role and RoleBinding in place CSV 0.0.1 Succeeds and OLM runs the operator Deployment', async () => {
    await walkthrough('kubectl apply --server-side -f operators/memcached/deploy/crds/cache_v1alpha1_memcached_crd.yaml');
    await walkthrough('kubectl apply -n $NS -f operators/memcached/deploy/service_account.yaml');
    await walkthrough('kubectl apply -n $NS -f operators/memcached/deploy/role.yaml');
    await walkthrough('kubectl apply -n $NS -f operators/memcached/deploy/role_binding.yaml');
    await walkthrough(`kubectl wait -n $NS csv/memcachedoperator.v0.0.1 --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s`);
    const succeeded = await csv('memcachedoperator.v0.0.1');
    assert.equal(succeeded?.status?.reason, 'InstallSucceeded');

    const deployment = await env.client.get<Deployment>(Kinds.Deployment, 'memcached-operator', ns);
    assert.equal(deployment.metadata.labels?.['olm.owner'], 'memcachedoperator.v0.0.1');
    assert.equal(deployment.spec.template.spec.containers[0]!.image, 'registry.example.com/memcached-operator:v0.0.1');
    assert.equal(deployment.status?.readyReplicas, 1, 'its pod is Running and Ready (on a kwok node: nothing runs in it)');
    const ready = await walkthrough('kubectl get -n $NS deployment memcached-operator -o jsonpath=\'{.status.readyReplicas}{"\\n"}\'');
    assert.equal(ready, '1\n');
  });

  test('two Memcached CRs get their memcached Deployments from the operator run as the CSV ServiceAccount', async () => {
    operatorKubeconfig = await serviceAccountKubeconfig(env, ns, ['service_account.yaml', 'role.yaml', 'role_binding.yaml'].map((f) => path.join(deployDir, f)));
    operator = spawnOperator(['--import', 'tsx', 'operators/memcached/src/main.ts', '--metrics-bind-address', '127.0.0.1:0'], {
      KUBECONFIG: operatorKubeconfig.file,
      WATCH_NAMESPACE: ns,
      LOG_LEVEL: 'warn',
    });
    for (const app of ['wordpress', 'drupal']) {
      await walkthrough(`cat <<EOF | kubectl apply -n $NS -f -
apiVersion: "cache.example.com/v1alpha1"
kind: "Memcached"
metadata:
  name: "memcached-for-${app}"
spec:
  size: 1
EOF`);
    }
    await env.waitFor('both memcached Deployments with one ready pod each', async () => {
      const list = await env.client.list<Deployment>(Kinds.Deployment, { namespace: ns, labelSelector: 'app=memcached' });
      const ready = list.items.filter((d) => d.status?.readyReplicas === 1).map((d) => d.metadata.name).sort();
      return { done: ready.length === 2, value: ready, seen: ready };
    });
    const listed = await walkthrough('kubectl get -n $NS memcached');
    assert.match(listed, /memcached-for-drupal\s+1\s/);
    assert.match(listed, /memcached-for-wordpress\s+1\s/);
  });

  test('CSV 0.0.2 replaces 0.0.1: 0.0.1 goes, the operator Deployment runs 0.0.2, the CRs and their Deployments and pods are untouched', async () => {
    const before = { wordpress: await instanceUids('memcached-for-wordpress'), drupal: await instanceUids('memcached-for-drupal') };
    assert.deepEqual([before.wordpress.pods.length, before.drupal.pods.length], [1, 1], 'one memcached pod each');
    await walkthrough('kubectl apply -n $NS -f operators/memcached/bundle/0.0.2/manifests/memcachedoperator.clusterserviceversion.yaml');
    await walkthrough(`kubectl wait -n $NS csv/memcachedoperator.v0.0.2 --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s`);
    await walkthrough('kubectl wait -n $NS csv/memcachedoperator.v0.0.1 --for=delete --timeout=120s');
    const csvs = (await walkthrough('kubectl get -n $NS csv')).trim().split('\n');
    assert.equal(csvs.length, 2, `one CSV left:\n${csvs.join('\n')}`);
    assert.match(csvs[1]!, /^memcachedoperator\.v0\.0\.2\s+Memcached Operator\s+0\.0\.2\s+memcachedoperator\.v0\.0\.1\s+Succeeded$/);

    const deployment = await env.waitFor('the operator Deployment on 0.0.2 and ready', async () => {
      const d = await env.client.get<Deployment>(Kinds.Deployment, 'memcached-operator', ns);
      const image = d.spec.template.spec.containers[0]!.image;
      return { done: image.endsWith(':v0.0.2') && d.status?.readyReplicas === 1, value: d, seen: { image, ready: d.status?.readyReplicas } };
    });
    assert.equal(deployment.metadata.labels?.['olm.owner'], 'memcachedoperator.v0.0.2');
    assert.equal(
      await walkthrough(`kubectl get -n $NS deployment memcached-operator -o jsonpath='{.spec.template.spec.containers[0].image}{"\\n"}'`),
      'registry.example.com/memcached-operator:v0.0.2\n',
    );

    const afterUpgrade = { wordpress: await instanceUids('memcached-for-wordpress'), drupal: await instanceUids('memcached-for-drupal') };
    assert.deepEqual(afterUpgrade, before, 'the same Memcached objects, Deployments and pods (uids)');
  });

  test('the CSV owning a missing CRD is still Pending, and OLM never created its Deployment', async () => {
    const still = await walkthrough(
      `kubectl get -n $NS csv memcachedcluster-operator.v0.0.1 -o jsonpath='{.status.phase} {.status.reason}: {.status.message}{"\\n"}{range .status.requirementStatus[*]}{.kind} {.name}: {.status} ({.message}){"\\n"}{end}'`,
      brokenNs,
    );
    assert.match(still, /^Pending RequirementsNotMet: one or more requirements couldn't be found\n/);
    assert.match(still, /^CustomResourceDefinition memcachedclusters\.cache\.example\.com: NotPresent \(CRD is not present\)$/m);
    await assert.rejects(env.client.get(Kinds.Deployment, 'memcachedcluster-operator', brokenNs), (err: unknown) => isNotFound(err));
    assert.equal(operator?.exitCode, null, `the memcached operator process still runs (stderr: ${operator?.output().slice(-1000)})`);
    assert.doesNotMatch(operator!.output(), /forbidden/i, 'the CSV ServiceAccount\'s RBAC was enough');
  });
});
