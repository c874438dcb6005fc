/**
 * install | uninstall | deploy | undeploy | webhook-local | webhook-local-delete against the
 * cluster of a kubeconfig, run inside the project (see project-process.ts) with the project's
 * runtime client: `node --import tsx deploy-worker.ts <action> <json options>`; prints one line
 * per object.
 *
 * - install: server-side applies every deploy/crds/*_crd.yaml and waits until each is Established.
 * - uninstall: deletes those CRDs (absent ones are fine).
 * - deploy: install, then the namespace, deploy/service_account.yaml, role.yaml,
 *   role_binding.yaml and operator.yaml in it, REPLACE_IMAGE replaced by the image and a
 *   ClusterRoleBinding's REPLACE_NAMESPACE by the namespace.
 *   With webhooks (deploy/webhook.yaml), also the Secret <name>-webhook-cert (kubernetes.io/tls:
 *   a CA of its own and a certificate for <name>-webhook-service.<namespace>.svc, made by the
 *   runtime in the process; the one already there is kept while it covers that name for 30 more
 *   days), the
 *   webhook Service and configurations, and the CA as caBundle of every webhook and CRD conversion.
 * - undeploy: deletes those objects (not the namespace), then uninstall.
 * - webhook-local: the webhooks of an operator run out of cluster: a certificate for 127.0.0.1
 *   in `certDir` (kept while usable), the configurations with clientConfig.url
 *   https://127.0.0.1:<port><path> and that CA, each converting CRD's conversion pointed there.
 * - webhook-local-delete: deletes those configurations.
 *
 * Guarantees: nothing is written before the API server has answered; an unreachable server
 * fails with its address and kubeconfig; a refused request (403) fails naming the verb, the
 * object and the user's missing permission; a kind deploy/ may not hold, or deploy without an
 * image for REPLACE_IMAGE, fails before any write.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { readProject, webhookManifestFile, type Project } from '../project.ts';
import { configurationNames, localWebhookObjects, webhookSecretName, webhookServiceName } from '../webhook/manifests.ts';

interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; namespace?: string };
  [field: string]: unknown;
}
interface ResourceType {
  group: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}
interface Client {
  server: string;
  get(type: ResourceType, name: string, namespace?: string): Promise<KubeObject>;
  apply(type: ResourceType, obj: KubeObject, options: { fieldManager: string; force: boolean }): Promise<KubeObject>;
  patch(type: ResourceType, name: string, namespace: string | undefined, patch: unknown, kind: 'merge'): Promise<KubeObject>;
  delete(type: ResourceType, name: string, namespace?: string): Promise<void>;
  close(): void;
}
interface Options {
  kubeconfig?: string;
  namespace: string;
  image?: string;
  /** webhook-local: the port of the operator's webhook server on 127.0.0.1, and where its certificate goes. */
  port?: number;
  certDir?: string;
}

const FIELD_MANAGER = 'operator-ts';
const projectDir = process.cwd();
const runtimeFile = createRequire(path.join(projectDir, 'package.json')).resolve('@iot-operator/runtime');
const runtime = await import(pathToFileURL(runtimeFile).href);
// The webhook certificate is made by the project's runtime (its webhook/certificates.ts).
interface WebhookCertificate {
  ca: string;
  cert: string;
  key: string;
}
const { ensureWebhookCertificate, makeWebhookCertificate, usableCertificate } = runtime as {
  ensureWebhookCertificate(dir: string, names: readonly string[]): WebhookCertificate;
  makeWebhookCertificate(names: readonly string[]): WebhookCertificate;
  usableCertificate(certificate: Partial<WebhookCertificate>, names: readonly string[]): boolean;
};
const Kinds: Record<string, ResourceType> = {
  ...(runtime.Kinds as Record<string, ResourceType>),
  MutatingWebhookConfiguration: runtime.customResource('admissionregistration.k8s.io', 'v1', 'MutatingWebhookConfiguration', 'mutatingwebhookconfigurations', false) as ResourceType,
  ValidatingWebhookConfiguration: runtime.customResource('admissionregistration.k8s.io', 'v1', 'ValidatingWebhookConfiguration', 'validatingwebhookconfigurations', false) as ResourceType,
};
const DEPLOY_FILES = ['deploy/service_account.yaml', 'deploy/role.yaml', 'deploy/role_binding.yaml', 'deploy/operator.yaml'];
const DEPLOYABLE = ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding', 'Deployment', 'Service', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'];

function readObjects(file: string): KubeObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((doc) => doc.toJSON() as KubeObject)
    .filter((obj) => obj && typeof obj === 'object');
}

function crdFiles(): string[] {
  const dir = path.join(projectDir, 'deploy/crds');
  return readdirSync(dir).filter((f) => f.endsWith('_crd.yaml')).sort().map((f) => path.join(dir, f));
}

function label(type: ResourceType, obj: KubeObject): string {
  return `${type.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`;
}

/** The operator's objects for `namespace`, checked before anything is written. */
function deployObjects(options: Options, caBundle?: string): Array<{ type: ResourceType; obj: KubeObject }> {
  const project = readProject(projectDir);
  const webhookFile = (project.webhooks ?? []).length > 0 ? [webhookManifestFile(project)] : [];
  return [...DEPLOY_FILES, ...webhookFile].flatMap((name) => {
    const file = path.join(projectDir, name);
    if (!existsSync(file) && webhookFile.includes(name)) throw new Error(`${name} is missing: run \`operator-ts generate webhook\``);
    const text = readFileSync(file, 'utf8');
    if (text.includes('REPLACE_IMAGE') && !options.image) throw new Error(`${name} names REPLACE_IMAGE: give the operator's image with --image <registry>/<name>:<tag>`);
    const objects = parseAllDocuments(text.replaceAll('REPLACE_IMAGE', options.image ?? '').replaceAll('REPLACE_NAMESPACE', options.namespace))
      .map((doc) => doc.toJSON() as KubeObject)
      .filter((obj) => obj && typeof obj === 'object');
    return objects.map((obj) => {
      if (!DEPLOYABLE.includes(obj.kind ?? '')) throw new Error(`${name}: kind ${obj.kind} is not one deploy applies (${DEPLOYABLE.join(', ')})`);
      const type = Kinds[obj.kind!]!;
      if (caBundle && Array.isArray(obj.webhooks)) for (const webhook of obj.webhooks as Array<{ clientConfig: { caBundle?: string } }>) webhook.clientConfig.caBundle = caBundle;
      return { type, obj: type.namespaced ? { ...obj, metadata: { ...obj.metadata, namespace: options.namespace } } : obj };
    });
  });
}

/** Turns a refused or failed request into a sentence saying what to do. */
function explain(err: unknown, verb: string, what: string, client: Client, options: Options): Error {
  const e = err as { code?: number; message?: string };
  const kubeconfig = options.kubeconfig ?? process.env.KUBECONFIG ?? '~/.kube/config';
  if (e.code === 0) return new Error(`cannot reach the API server ${client.server} (kubeconfig ${kubeconfig}): ${e.message}`);
  if (e.code === 401) return new Error(`the API server ${client.server} did not accept the credentials of ${kubeconfig}: ${e.message}`);
  if (e.code === 403) return new Error(`not allowed to ${verb} ${what} with the credentials of ${kubeconfig} (RBAC): ${e.message}`);
  return new Error(`${verb} ${what} failed: ${e.message ?? String(err)}`);
}

/** A CRD of deploy/crds as deploy applies it: its conversion webhook's Service in `namespace`, with the CA when given. */
function withConversion(crd: KubeObject, namespace: string, caBundle?: string): KubeObject {
  const webhook = (crd.spec as { conversion?: { webhook?: { clientConfig?: { service?: { namespace?: string }; caBundle?: string } } } } | undefined)?.conversion?.webhook;
  if (webhook?.clientConfig?.service) {
    webhook.clientConfig.service.namespace = namespace;
    if (caBundle) webhook.clientConfig.caBundle = caBundle;
  }
  return crd;
}

async function install(client: Client, options: Options, caBundle?: string): Promise<void> {
  for (const file of crdFiles()) {
    for (const found of readObjects(file)) {
      const crd = withConversion(found, options.namespace, caBundle);
      const type = Kinds.CustomResourceDefinition!;
      await client.apply(type, crd, { fieldManager: FIELD_MANAGER, force: true }).catch((err) => {
        throw explain(err, 'apply', label(type, crd), client, options);
      });
      const deadline = Date.now() + 60_000;
      for (;;) {
        const current = await client.get(type, crd.metadata.name!);
        const conditions = (current.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? [];
        if (conditions.some((c) => c.type === 'Established' && c.status === 'True')) break;
        if (Date.now() > deadline) throw new Error(`CustomResourceDefinition ${crd.metadata.name} is not Established after 60 s: ${JSON.stringify(conditions)}`);
        await new Promise((r) => setTimeout(r, 250));
      }
      console.log(`installed ${label(type, crd)}`);
    }
  }
}

async function remove(client: Client, type: ResourceType, obj: KubeObject, options: Options): Promise<void> {
  try {
    await client.delete(type, obj.metadata.name!, type.namespaced ? obj.metadata.namespace : undefined);
    console.log(`deleted ${label(type, obj)}`);
  } catch (err) {
    if ((err as { code?: number }).code === 404) console.log(`${label(type, obj)} was not there`);
    else throw explain(err, 'delete', label(type, obj), client, options);
  }
}

async function uninstall(client: Client, options: Options): Promise<void> {
  for (const file of crdFiles()) for (const crd of readObjects(file)) await remove(client, Kinds.CustomResourceDefinition!, crd, options);
}

/** The webhook Secret's certificate: the one in the cluster while usable for the Service's name, else a new one. */
async function webhookCertificate(client: Client, project: Project, namespace: string): Promise<WebhookCertificate> {
  const service = `${webhookServiceName(project)}.${namespace}.svc`;
  const names = [`DNS:${service}`, `DNS:${service}.cluster.local`];
  const secret = await client.get(Kinds.Secret!, webhookSecretName(project), namespace).catch((err: { code?: number }) => {
    if (err.code === 404) return undefined;
    throw err;
  });
  const data = (secret?.data ?? {}) as Record<string, string>;
  const decode = (key: string) => (data[key] ? Buffer.from(data[key], 'base64').toString('utf8') : undefined);
  const current = { ca: decode('ca.crt'), cert: decode('tls.crt'), key: decode('tls.key') };
  if (usableCertificate(current, names)) return current as WebhookCertificate;
  return makeWebhookCertificate(names);
}

async function deploy(client: Client, options: Options): Promise<void> {
  const project = readProject(projectDir);
  const hasWebhooks = (project.webhooks ?? []).length > 0;
  deployObjects(options); // every file checked before anything is written
  const certificate = hasWebhooks ? await webhookCertificate(client, project, options.namespace) : undefined;
  const caBundle = certificate ? Buffer.from(certificate.ca).toString('base64') : undefined;
  const objects = deployObjects(options, caBundle);
  await install(client, options, caBundle);
  const namespace = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: options.namespace } };
  const secret = certificate
    ? [{ type: Kinds.Secret!, obj: { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: webhookSecretName(project), namespace: options.namespace }, stringData: { 'ca.crt': certificate.ca, 'tls.crt': certificate.cert, 'tls.key': certificate.key } } as KubeObject }]
    : [];
  for (const { type, obj } of [{ type: Kinds.Namespace!, obj: namespace }, ...secret, ...objects]) {
    await client.apply(type, obj, { fieldManager: FIELD_MANAGER, force: true }).catch((err) => {
      throw explain(err, 'apply', label(type, obj), client, options);
    });
    console.log(`applied ${label(type, obj)}`);
  }
}

async function undeploy(client: Client, options: Options): Promise<void> {
  for (const { type, obj } of deployObjects({ ...options, image: options.image ?? 'unused' }).reverse()) await remove(client, type, obj, options);
  const project = readProject(projectDir);
  if ((project.webhooks ?? []).length > 0) await remove(client, Kinds.Secret!, { metadata: { name: webhookSecretName(project), namespace: options.namespace } }, options);
  await uninstall(client, options);
}

async function webhookLocal(client: Client, options: Options): Promise<void> {
  const project = readProject(projectDir);
  if ((project.webhooks ?? []).length === 0) throw new Error('the project has no webhooks: add some with `operator-ts create webhook`');
  if (!options.port || !options.certDir) throw new Error('webhook-local needs a port and a certificate directory');
  const certificate = ensureWebhookCertificate(options.certDir, ['IP:127.0.0.1', 'DNS:localhost']);
  const { configurations, conversions } = localWebhookObjects(project, options.port, certificate.ca);
  for (const { crd, conversion } of conversions) {
    // A merge patch: the URL replaces the Service of deploy/crds (server-side apply would keep both).
    const webhook = (conversion as { webhook: { clientConfig: Record<string, unknown> } }).webhook;
    const patch = { spec: { conversion: { ...conversion, webhook: { ...webhook, clientConfig: { service: null, ...webhook.clientConfig } } } } };
    await client.patch(Kinds.CustomResourceDefinition!, crd, undefined, patch, 'merge').catch((err) => {
      throw explain(err, 'patch', `the conversion of CustomResourceDefinition ${crd}`, client, options);
    });
    console.log(`pointed the conversion of CustomResourceDefinition ${crd} at https://127.0.0.1:${options.port}`);
  }
  for (const obj of configurations as KubeObject[]) {
    const type = Kinds[obj.kind!]!;
    await client.apply(type, obj, { fieldManager: FIELD_MANAGER, force: true }).catch((err) => {
      throw explain(err, 'apply', label(type, obj), client, options);
    });
    console.log(`applied ${label(type, obj)} (https://127.0.0.1:${options.port})`);
  }
  console.log(`certificate in ${options.certDir} (tls.crt, tls.key; CA ca.crt)`);
}

async function webhookLocalDelete(client: Client, options: Options): Promise<void> {
  const names = configurationNames(readProject(projectDir));
  await remove(client, Kinds.MutatingWebhookConfiguration!, { metadata: { name: names.mutating } }, options);
  await remove(client, Kinds.ValidatingWebhookConfiguration!, { metadata: { name: names.validating } }, options);
}

const actions = { install, uninstall, deploy, undeploy, 'webhook-local': webhookLocal, 'webhook-local-delete': webhookLocalDelete };
const action = process.argv[2] as keyof typeof actions;
let client: Client | undefined;
try {
  if (!(action in actions)) throw new Error(`usage: deploy-worker ${Object.keys(actions).join('|')} <options> (got ${action})`);
  const options = JSON.parse(process.argv[3] ?? '{}') as Options;
  readProject(projectDir);
  client = (await runtime.KubeClient.fromKubeconfig({ kubeconfigPath: options.kubeconfig }).catch((err: Error) => {
    throw new Error(`cannot load the kubeconfig ${options.kubeconfig ?? process.env.KUBECONFIG ?? '~/.kube/config'}: ${err.message}`);
  })) as Client;
  // One read first: an unreachable server or unusable credentials fail before anything is written.
  await client.get(Kinds.Namespace!, options.namespace).catch((err: { code?: number }) => {
    if (err.code === 0 || err.code === 401) throw explain(err, 'read', `Namespace ${options.namespace}`, client!, options);
  });
  await actions[action](client, options);
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
} finally {
  client?.close();
}
