/**
 * `npm start`: the quick start. Finds a cluster (the configured one if it answers, otherwise the
 * embedded local control plane, which it starts), installs the IoTService CRD and the landscape
 * (namespace + image-pull-secret from deploy/namespace.yml), runs the operator, applies the
 * example instance and reports its status until it is Available. The operator then keeps
 * running until Ctrl-C.
 *
 * Guarantees: objects that already exist (a landscape secret with real credentials, a changed
 * example) are never overwritten; every step says what it does, and the first run's build of the
 * control plane shows its progress as it goes (local-cluster.ts); a failure names the step.
 * SIGINT (Ctrl-C) or SIGTERM, at any moment: stops what runs (the cluster build and every process
 * of it, the operator) and exits within 5 s — with 128 + the signal's number before the example is
 * Available, with 0 when it stops the operator as the last line invites. The cluster itself is
 * left running (later runs reuse it).
 * Flags: --local (always use the embedded cluster), --exit-when-available (stop once Available);
 * any other argument is refused with the list of known flags (exit 2) before anything starts.
 */
import { constants } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kinds, KubeClient, isAlreadyExists, type KubeObject, type Manager, type ResourceType } from '@iot-operator/runtime';
import { TestEnv } from '@iot-operator/runtime/testing';
import { IoTServiceType } from './controller.ts';
import { createIoTOperator } from './operator.ts';
import type { IoTServiceStatus } from './api/iotservice.ts';
import { startLocalCluster, type LocalClusterStart } from './local-cluster.ts';

const operatorDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = path.resolve(operatorDir, '../..');
const deployFile = (name: string) => path.join(operatorDir, 'deploy', name);

const KNOWN_FLAGS = ['--local', '--exit-when-available'];
const args = new Set(process.argv.slice(2));
const unknown = [...args].filter((arg) => !KNOWN_FLAGS.includes(arg));
if (unknown.length > 0) {
  console.error(`[iot-operator] unknown argument${unknown.length > 1 ? 's' : ''} ${unknown.map((a) => `'${a}'`).join(', ')} (known: ${KNOWN_FLAGS.join(', ')})`);
  process.exit(2);
}
const landscape = process.env.OPERATOR_NAME || 'devawsk8s';
const say = (text: string) => console.log(`[iot-operator] ${text}`);

/** What runs and has to be stopped on SIGINT/SIGTERM. */
let localCluster: LocalClusterStart | undefined;
let manager: Manager | undefined;
let available = false;
let stopping = false;

function stopOnSignal(signal: NodeJS.Signals): void {
  // One stop only: npm forwards the terminal's Ctrl-C to us as well, and the stop is bounded anyway.
  if (stopping) return;
  stopping = true;
  const code = available ? 0 : 128 + constants.signals[signal];
  const what = [localCluster && 'cluster/up.sh and its build', manager && 'the operator'].filter(Boolean).join(' and ');
  say(`${signal}: stopping${what ? ` ${what}` : ''}`);
  setTimeout(() => process.exit(code), 4500); // in-flight reconciles are cut short past this
  void Promise.allSettled([localCluster?.stop(), manager?.stop()]).then(() => process.exit(code));
}
process.on('SIGINT', stopOnSignal);
process.on('SIGTERM', stopOnSignal);

async function reachable(kubeconfigPath?: string): Promise<boolean> {
  try {
    const client = await KubeClient.fromKubeconfig({ kubeconfigPath });
    try {
      await client.raw({ method: 'GET', path: '/version', timeoutMs: 5000 });
      return true;
    } finally {
      client.close();
    }
  } catch {
    return false;
  }
}

async function chooseCluster(): Promise<string | undefined> {
  if (!args.has('--local') && (await reachable())) {
    say('using the configured cluster (KUBECONFIG or ~/.kube/config)');
    return undefined;
  }
  say('starting the embedded local cluster (the first run builds it from Go modules; later runs reuse it)');
  localCluster = startLocalCluster(path.join(repoDir, 'cluster/up.sh'));
  const kubeconfig = await localCluster.kubeconfig;
  localCluster = undefined;
  say(`local cluster ready: export KUBECONFIG=${kubeconfig}`);
  return kubeconfig;
}

const quickstartTypes: Readonly<Record<string, ResourceType>> = { Namespace: Kinds.Namespace, Secret: Kinds.Secret, IoTService: IoTServiceType };

/** Creates a deploy/ object in this landscape unless it exists; existing objects are left as they are. */
async function createIfAbsent(client: KubeClient, obj: KubeObject): Promise<void> {
  const type = quickstartTypes[obj.kind ?? ''];
  if (!type) throw new Error(`the quick start does not know how to create a ${obj.kind}`);
  const metadata = type === Kinds.Namespace ? { ...obj.metadata, name: landscape } : { ...obj.metadata, namespace: landscape };
  try {
    await client.create(type, { ...obj, metadata });
    say(`created ${obj.kind} ${metadata.name}`);
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
    say(`${obj.kind} ${metadata.name} already exists; left as it is`);
  }
}

async function watchUntilAvailable(client: KubeClient, name: string): Promise<void> {
  let last = '';
  for (;;) {
    const iot = await client.get<KubeObject & { status?: IoTServiceStatus }>(IoTServiceType, name, landscape);
    const status = iot.status;
    const line = status?.phase ? `${name}: ${status.phase} ${status.ready ?? ''}${status.reason ? ` (${status.reason})` : ''}` : `${name}: waiting for the operator`;
    if (line !== last) say((last = line));
    if (status?.phase === 'Available' && status.observedGeneration === iot.metadata.generation) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function main(): Promise<void> {
  const kubeconfig = await chooseCluster();
  const client = await KubeClient.fromKubeconfig({ kubeconfigPath: kubeconfig });
  const [crd] = await TestEnv.readManifests(deployFile('crds/cp_v1alpha1_iotservice_crd.yml'));
  await client.apply(Kinds.CustomResourceDefinition, crd!, { fieldManager: 'iot-operator-quickstart', force: true });
  say('installed the IoTService CRD');
  for (const obj of await TestEnv.readManifests(deployFile('namespace.yml'))) await createIfAbsent(client, obj);
  await new Promise((r) => setTimeout(r, 1000)); // let the new CRD's API appear

  const mgr: Manager = (manager = await createIoTOperator({
    operatorName: landscape,
    watchNamespace: process.env.WATCH_NAMESPACE ?? '',
    defaultRegistry: 'registry.example.com/iot',
    maxConcurrentReconciles: 4,
    leaderElect: false,
    metricsBindAddress: '127.0.0.1:8080',
    logLevel: process.env.LOG_LEVEL ?? 'warn',
    kubeconfig,
    syncPeriodMs: 10 * 3_600_000,
  }));
  await mgr.start();
  say(`operator running for landscape ${landscape}; metrics and health on http://127.0.0.1:8080/metrics`);

  const [example] = await TestEnv.readManifests(deployFile('crds/example-iotservice.yml'));
  await createIfAbsent(client, example!);
  await watchUntilAvailable(client, example!.metadata.name!);
  const kubectl = kubeconfig ? `KUBECONFIG=${kubeconfig} kubectl` : 'kubectl';
  say(`see it with: ${kubectl} -n ${landscape} get iots; ${kubectl} -n ${landscape}-${example!.metadata.name} get pods`);
  client.close();
  available = true;
  if (args.has('--exit-when-available')) {
    await mgr.stop();
    return;
  }
  say('the operator keeps running; Ctrl-C stops it');
  await mgr.done;
}

main().catch((err: unknown) => {
  if (stopping) return; // what a stop interrupted fails; stopOnSignal says so and exits
  console.error(`[iot-operator] failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
