/**
 * `npm start`: the quick start. Finds a cluster (the configured one if it answers, otherwise the
 * embedded local control plane, which it starts), installs the IoTService CRD and the landscape
 * (namespace + image-pull-secret from deploy/namespace.yml), runs the operator, applies the
 * example instance and reports its status until it is Available. The operator then keeps
 * running until Ctrl-C.
 *
 * The CRD stores v1beta1 and serves v1alpha1 too (the example is v1alpha1): the operator in this
 * process serves the conversion between them (local-conversion.ts: https://127.0.0.1:<a free
 * port>/convert, its CA kept across runs), and the CRD's spec.conversion points there before the
 * example is applied. Until then an installed CRD keeps the conversion webhook it names. When the
 * operator stops (Ctrl-C, --exit-when-available, a failure), the CRD, if it still names this
 * process, names the Service it named before again, where an in-cluster operator takes it over;
 * v1alpha1 requests fail until one serves it.
 *
 * Guarantees: objects that already exist (a landscape secret with real credentials, a changed
 * example) are never overwritten; every step says what it does, and the first run's build of the
 * control plane shows its progress as it goes (local-cluster.ts); a failure names the step.
 * SIGINT (Ctrl-C) or SIGTERM, at any moment: stops what runs (the cluster build and every process
 * of it, the operator) and exits within 5 s — with 128 + the signal's number before the example is
 * Available, with 0 when it stops the operator as the last line invites. The cluster itself is
 * left running (later runs reuse it).
 * On a cluster without a default StorageClass (the embedded one without its real node) the kwok
 * example keeps broker and database data in emptyDir (`storage: ephemeral`), saying so: claims
 * there could never bind and the example would never be Available.
 * Flags: --local (always use the embedded cluster), --exit-when-available (stop once Available);
 * any other argument is refused with the list of known flags (exit 2) before anything starts.
 *
 * --real-node: the embedded cluster with its real node (`cluster up --real-node`), the
 * reference IoT service's images (workloads/iot-service) built while the cluster comes up, then
 * pushed to the cluster's registry, the landscape's image-pull-secret set to that registry's credentials (the only
 * object it overwrites: the registry is the cluster's own), the operator's default registry set
 * to it, its tenant policy letting pods tolerate the real node's taint and select it by its label
 * (`node.iot-operator.dev/real`, besides the default node labels), and
 * deploy/crds/example-iotservice-real-node.yml applied instead of the kwok example.
 * Once it is Available, one simulated device registers through core's Service, sends a message
 * over MQTT and one over HTTP to the gateway's Service (over TLS, trusting ConfigMap gateway-ca,
 * as the example serves by default) and reads them back from core: the last
 * line of output is the simulator's `device <id>: sent <n>, stored <n>` (with
 * --exit-when-available too, which then exits after it). The device's messages not all stored
 * within 60 s is a failure (exit 1).
 */
import { constants, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { Kinds, KubeClient, apiVersionOf, ensureWebhookCertificate, isAlreadyExists, isNotFound, type KubeObject, type Manager, type ResourceType } from '@iot-operator/runtime';
import { REAL_NODE_LABEL, registryPullSecret } from '@iot-operator/local-cluster';
import { IoTServiceType, IoTServiceV1alpha1Type, StorageClassType } from '../src/iotservice-types.ts';
import { createIoTOperator } from '../src/operator.ts';
import { DEFAULT_NODE_LABEL_KEYS } from '../src/resources/placement-policy.ts';
import { defaultTenantPolicy } from '../src/resources/tenant-policy.ts';
import type { IoTServiceStatus } from '../src/api/iotservice.ts';
import { IOTSERVICE_CRD_NAME, iotServiceCrd } from '../src/api/crd.ts';
import type { CrdConversion } from '../src/webhooks/crd-conversion.ts';
import { localWebhookCertDir, pointConversionHere } from '../src/webhooks/local-conversion.ts';
import { startLocalCluster, startStep, type StartStep } from './start-step.ts';

const operatorDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = path.resolve(operatorDir, '../..');
const deployFile = (name: string) => path.join(operatorDir, 'deploy', name);
/** The objects of a manifest file of deploy/. */
const readManifests = async (file: string) => parseAllDocuments(await readFile(file, 'utf8')).map((doc) => doc.toJSON() as KubeObject).filter((obj) => obj && typeof obj === 'object');

const KNOWN_FLAGS = ['--local', '--real-node', '--exit-when-available'];
const args = new Set(process.argv.slice(2));
const unknown = [...args].filter((arg) => !KNOWN_FLAGS.includes(arg));
if (unknown.length > 0) {
  console.error(`[iot-operator] unknown argument${unknown.length > 1 ? 's' : ''} ${unknown.map((a) => `'${a}'`).join(', ')} (known: ${KNOWN_FLAGS.join(', ')})`);
  process.exit(2);
}
const realNode = args.has('--real-node');
const IMAGES_SCRIPT = path.join(repoDir, 'scripts/iot-service-images.ts');
const landscape = process.env.OPERATOR_NAME || 'devawsk8s';
const say = (text: string) => console.log(`[iot-operator] ${text}`);

/** What runs and has to be stopped on SIGINT/SIGTERM, and what each is. */
const steps = new Map<StartStep, string>();
let manager: Manager | undefined;
/** Points the CRD's conversion away from this process again, once it serves it (local-conversion.ts). */
let releaseConversion: (() => Promise<void>) | undefined;
let available = false;
let stopping = false;

function stopOnSignal(signal: NodeJS.Signals): void {
  // One stop only: npm forwards the terminal's Ctrl-C to us as well, and the stop is bounded anyway.
  if (stopping) return;
  stopping = true;
  const code = available ? 0 : 128 + constants.signals[signal];
  const what = [...steps.values(), manager && 'the operator'].filter(Boolean).join(' and ');
  say(`${signal}: stopping${what ? ` ${what}` : ''}`);
  setTimeout(() => process.exit(code), 4500); // in-flight reconciles are cut short past this
  void Promise.allSettled([...[...steps.keys()].map((running) => running.stop()), releaseConversion?.(), manager?.stop()]).then(() => process.exit(code));
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

/** Runs a step that Ctrl-C can stop; its result. */
async function runStep(started: StartStep, what: string): Promise<string> {
  steps.set(started, what);
  try {
    return await started.result;
  } finally {
    steps.delete(started);
  }
}

async function chooseCluster(): Promise<string | undefined> {
  if (!args.has('--local') && !realNode && (await reachable())) {
    say('using the configured cluster (KUBECONFIG or ~/.kube/config)');
    return undefined;
  }
  say(
    realNode
      ? 'starting the embedded local cluster with its real node (the first run builds it and its parts from Go modules; later runs reuse them)'
      : 'starting the embedded local cluster (the first run builds it from Go modules; later runs reuse it)',
  );
  const kubeconfig = await runStep(startLocalCluster(path.join(repoDir, 'cluster/cli/cluster.ts'), realNode ? ['--real-node'] : []), 'cluster up and its build');
  say(`local cluster ready: export KUBECONFIG=${kubeconfig}`);
  return kubeconfig;
}

/**
 * The reference images of `version`, built and pushed to the cluster's registry; the landscape's
 * pull secret gets the registry's credentials. Returns the registry the operator defaults to.
 */
async function referenceImages(client: KubeClient, kubeconfigPath: string, version: string): Promise<string> {
  say(`pushing the reference IoT service's images ${version} to the cluster's registry`);
  const registry = await runStep(startStep('the image push', process.execPath, ['--import', 'tsx', IMAGES_SCRIPT, '--version', version], repoDir), 'the image push');
  say(`images pushed: ${registry}/iot-<component>:${version}`);
  await registryPullSecret({ client, kubeconfigPath }, landscape, 'image-pull-secret');
  say(`Secret image-pull-secret holds the credentials of the cluster's registry`);
  return registry;
}

/**
 * One simulated device through the instance's Services (workloads/iot-service's simulator, as a
 * user runs it): over mqtts and https, trusting the instance CA of ConfigMap gateway-ca, when the
 * gateway serves them (the default), else over the plaintext protocols the example lists; resolves
 * with its last line, `device <id>: sent <n>, stored <n>`.
 */
async function sendDeviceMessage(client: KubeClient, namespace: string): Promise<string> {
  type Service = KubeObject & { spec: { clusterIP: string; ports?: { port: number }[] } };
  const service = async (name: string) => (await client.get(Kinds.Service, name, namespace)) as Service;
  const [gateway, core] = [await service('gateway'), (await service('core')).spec.clusterIP];
  const address = gateway.spec.clusterIP;
  const secret = (await client.get(Kinds.Secret, 'iot-credentials', namespace)) as KubeObject & { data?: Record<string, string> };
  const apiToken = Buffer.from(secret.data?.['api-token'] ?? '', 'base64').toString('utf8');
  const tls = (gateway.spec.ports ?? []).some((p) => p.port === 8883);
  const scratch = await mkdtemp(path.join(tmpdir(), 'iot-quickstart-'));
  try {
    const gatewayArgs = tls
      ? ['--gateway-http', `https://${address}:8443`, '--gateway-mqtt', `mqtts://${address}:8883`, '--ca', await gatewayCaFile(client, namespace, scratch)]
      : ['--gateway-http', `http://${address}:8080`, '--gateway-mqtt', `mqtt://${address}:1883`];
    say(`a simulated device registers through core (http://${core}:8080) and sends a message over ${tls ? 'MQTT and one over HTTPS (TLS, trusting ConfigMap gateway-ca)' : 'MQTT and one over HTTP'} to the gateway (${address})`);
    const simulator = path.join(repoDir, 'workloads/iot-service/src/simulator/main.ts');
    const simulate = ['--import', 'tsx', simulator, '--messages', '1', '--core', `http://${core}:8080`, ...gatewayArgs];
    // The token goes by the environment, not the command line, which every user of the machine can read.
    return await runStep(startStep('the device simulator', process.execPath, simulate, repoDir, { ...process.env, IOT_API_TOKEN: apiToken }), 'the device simulator');
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** The instance CA devices trust the gateway by (ConfigMap gateway-ca), written to a file in `dir`. */
async function gatewayCaFile(client: KubeClient, namespace: string, dir: string): Promise<string> {
  const configMap = (await client.get(Kinds.ConfigMap, 'gateway-ca', namespace)) as KubeObject & { data?: Record<string, string> };
  const file = path.join(dir, 'gateway-ca.crt');
  await writeFile(file, configMap.data?.['ca.crt'] ?? '');
  return file;
}

const quickstartTypes: readonly ResourceType[] = [Kinds.Namespace, Kinds.Secret, IoTServiceType, IoTServiceV1alpha1Type];

/** Creates a deploy/ object in this landscape unless it exists; existing objects are left as they are. */
async function createIfAbsent(client: KubeClient, obj: KubeObject): Promise<void> {
  const type = quickstartTypes.find((t) => t.kind === obj.kind && apiVersionOf(t) === obj.apiVersion);
  if (!type) throw new Error(`the quick start does not know how to create a ${obj.apiVersion} ${obj.kind}`);
  const metadata = type === Kinds.Namespace ? { ...obj.metadata, name: landscape } : { ...obj.metadata, namespace: landscape };
  try {
    await client.create(type, { ...obj, metadata });
    say(`created ${obj.kind} ${metadata.name}`);
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
    say(`${obj.kind} ${metadata.name} already exists; left as it is`);
  }
}

type Crd = KubeObject & { spec: { conversion?: CrdConversion } };

/**
 * Applies the IoTService CRD (deploy/'s file, generated from api/crd.ts). An installed CRD keeps
 * the conversion webhook it names until this process serves the conversion (local-conversion.ts):
 * applying the shipped Service beside a URL that someone else set would leave both, which the API
 * server refuses.
 */
async function installCrd(client: KubeClient): Promise<void> {
  const crd = iotServiceCrd() as Crd;
  const installed = await client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME).catch((err: unknown) => {
    if (isNotFound(err)) return undefined;
    throw err;
  });
  const conversion = installed?.spec.conversion?.strategy === 'Webhook' ? installed.spec.conversion : crd.spec.conversion;
  await client.apply(Kinds.CustomResourceDefinition, { ...crd, spec: { ...crd.spec, conversion } }, { fieldManager: 'iot-operator-quickstart', force: true });
}

/**
 * Creates the example (v1alpha1). The API server takes up the CRD's new conversion URL a moment
 * after the change; until then the create fails calling the webhook the CRD named before.
 */
async function createExample(client: KubeClient, example: KubeObject): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      return await createIfAbsent(client, example);
    } catch (err) {
      if (!(err instanceof Error && /conversion webhook for .* failed/.test(err.message)) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/**
 * On a cluster without a default StorageClass (the embedded one without its real node has no
 * volume provisioner) the example's broker and database claims would never bind: the example then
 * keeps their data in emptyDir instead (`storage: ephemeral`), and says so.
 */
async function withoutVolumesIfNoneCanBind(client: KubeClient, example: KubeObject): Promise<void> {
  const classes = await client.list<KubeObject>(StorageClassType);
  if (classes.items.some((c) => c.metadata.annotations?.['storageclass.kubernetes.io/is-default-class'] === 'true')) return;
  const spec = example.spec as Record<string, Record<string, unknown>>;
  for (const component of ['broker', 'database']) spec[component] = { ...spec[component], storage: 'ephemeral' };
  say('the cluster has no default StorageClass: the example keeps broker and database data in emptyDir (spec.broker.storage and spec.database.storage: ephemeral)');
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

/**
 * The reference images built (not pushed: the registry comes with the cluster) beside the
 * cluster's own build, so that a first run compiles and downloads at once.
 */
function buildReferenceImages(version: string): Promise<string> {
  say(`building the reference IoT service's images ${version} while the cluster starts (the first run builds the base images too)`);
  return runStep(startStep('the image build', process.execPath, ['--import', 'tsx', IMAGES_SCRIPT, '--version', version, '--build-only'], repoDir), 'the image build');
}

async function main(): Promise<void> {
  const [example] = await readManifests(deployFile(realNode ? 'crds/example-iotservice-real-node.yml' : 'crds/example-iotservice.yml'));
  const exampleSpec = example!.spec as { version: string };
  const [kubeconfig] = await Promise.all([chooseCluster(), realNode && buildReferenceImages(exampleSpec.version)]);
  const client = await KubeClient.fromKubeconfig({ kubeconfigPath: kubeconfig });
  await installCrd(client);
  say('installed the IoTService CRD (v1beta1 stored, v1alpha1 served)');
  for (const obj of await readManifests(deployFile('namespace.yml'))) await createIfAbsent(client, obj);
  const registry = realNode ? await referenceImages(client, kubeconfig!, exampleSpec.version) : 'registry.example.com/iot';
  await new Promise((r) => setTimeout(r, 1000)); // let the new CRD's API appear

  const certDir = localWebhookCertDir(landscape);
  const certificate = ensureWebhookCertificate(certDir, ['IP:127.0.0.1']);
  const mgr: Manager = (manager = await createIoTOperator({
    operatorName: landscape,
    watchNamespace: process.env.WATCH_NAMESPACE ?? '',
    defaultRegistry: registry,
    maxConcurrentReconciles: 4,
    leaderElect: false,
    metricsBindAddress: '127.0.0.1:8080',
    logLevel: process.env.LOG_LEVEL ?? 'warn',
    kubeconfig,
    syncPeriodMs: 10 * 3_600_000,
    webhook: { address: '127.0.0.1:0', certFile: path.join(certDir, 'tls.crt'), keyFile: path.join(certDir, 'tls.key') },
    ...(realNode
      ? { tenancy: { ...defaultTenantPolicy(registry), allowedTolerationKeys: [REAL_NODE_LABEL], allowedNodeLabelKeys: [...DEFAULT_NODE_LABEL_KEYS, REAL_NODE_LABEL] } }
      : {}),
  }));
  const startFailed = new AbortController();
  const started = mgr.start().catch((err: unknown) => {
    startFailed.abort();
    throw err;
  });
  started.catch(() => undefined); // awaited below; its failure is not unhandled meanwhile
  const conversion = await pointConversionHere(client, mgr, certificate.ca, startFailed.signal).catch(async (err: unknown) => {
    await started; // its error, when it failed
    throw err;
  });
  releaseConversion = conversion.release;
  await started;
  const conversionUrl = conversion.url;
  say(`operator running for landscape ${landscape}; metrics and health on http://127.0.0.1:8080/metrics`);
  say(`the CRD's v1alpha1 ⇄ v1beta1 conversion is served here: ${conversionUrl} (CA ${path.join(certDir, 'ca.crt')})`);

  if (!realNode) await withoutVolumesIfNoneCanBind(client, example!);
  await createExample(client, example!);
  const name = example!.metadata.name!;
  await watchUntilAvailable(client, name);
  const kubectl = kubeconfig ? `KUBECONFIG=${kubeconfig} kubectl` : 'kubectl';
  say(`see it with: ${kubectl} -n ${landscape} get iots; ${kubectl} -n ${landscape}-${name} get pods`);
  available = true;
  const keepRunning = !args.has('--exit-when-available');
  if (keepRunning) say('the operator keeps running; Ctrl-C stops it');
  if (realNode) console.log(await sendDeviceMessage(client, `${landscape}-${name}`));
  if (!keepRunning) {
    await Promise.all([releaseConversion?.(), mgr.stop()]);
    client.close();
    return;
  }
  await mgr.done;
}

main().catch((err: unknown) => {
  if (stopping) return; // what a stop interrupted fails; stopOnSignal says so and exits
  console.error(`[iot-operator] failed: ${err instanceof Error ? err.message : String(err)}`);
  setTimeout(() => process.exit(1), 4500);
  void Promise.allSettled([...[...steps.keys()].map((running) => running.stop()), releaseConversion?.(), manager?.stop()]).then(() => process.exit(1));
});
