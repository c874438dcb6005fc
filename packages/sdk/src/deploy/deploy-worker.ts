/**
 * install | uninstall | deploy | undeploy against the cluster of a kubeconfig, run inside the
 * project (see project-process.ts) with the project's runtime client:
 * `node --import tsx deploy-worker.ts <action> <json options>`; prints one line per object.
 *
 * - install: server-side applies every deploy/crds/*_crd.yaml and waits until each is Established.
 * - uninstall: deletes those CRDs (absent ones are fine).
 * - deploy: install, then the namespace, deploy/service_account.yaml, role.yaml,
 *   role_binding.yaml and operator.yaml in it, REPLACE_IMAGE replaced by the image and a
 *   ClusterRoleBinding's REPLACE_NAMESPACE by the namespace.
 * - undeploy: deletes those objects (not the namespace), then uninstall.
 *
 * Guarantees: nothing is written before the API server has answered; an unreachable server
 * fails with its address and kubeconfig; a refused request (403) fails naming the verb, the
 * object and the user's missing permission; a kind deploy/ may not hold, or deploy without an
 * image for REPLACE_IMAGE, fails before any write.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { readProject } from '../project.ts';

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
  delete(type: ResourceType, name: string, namespace?: string): Promise<void>;
  close(): void;
}
interface Options {
  kubeconfig?: string;
  namespace: string;
  image?: string;
}

const FIELD_MANAGER = 'operator-ts';
const projectDir = process.cwd();
const runtimeFile = createRequire(path.join(projectDir, 'package.json')).resolve('@iot-operator/runtime');
const runtime = await import(pathToFileURL(runtimeFile).href);
const Kinds = runtime.Kinds as Record<string, ResourceType>;
const DEPLOY_FILES = ['service_account.yaml', 'role.yaml', 'role_binding.yaml', 'operator.yaml'];
const DEPLOYABLE = ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding', 'Deployment'];

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
function deployObjects(options: Options): Array<{ type: ResourceType; obj: KubeObject }> {
  return DEPLOY_FILES.flatMap((name) => {
    const file = path.join(projectDir, 'deploy', name);
    const text = readFileSync(file, 'utf8');
    if (text.includes('REPLACE_IMAGE') && !options.image) throw new Error(`deploy/${name} names REPLACE_IMAGE: give the operator's image with --image <registry>/<name>:<tag>`);
    const objects = parseAllDocuments(text.replaceAll('REPLACE_IMAGE', options.image ?? '').replaceAll('REPLACE_NAMESPACE', options.namespace))
      .map((doc) => doc.toJSON() as KubeObject)
      .filter((obj) => obj && typeof obj === 'object');
    return objects.map((obj) => {
      if (!DEPLOYABLE.includes(obj.kind ?? '')) throw new Error(`deploy/${name}: kind ${obj.kind} is not one deploy applies (${DEPLOYABLE.join(', ')})`);
      const type = Kinds[obj.kind!]!;
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

async function install(client: Client, options: Options): Promise<void> {
  for (const file of crdFiles()) {
    for (const crd of readObjects(file)) {
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

async function deploy(client: Client, options: Options): Promise<void> {
  const objects = deployObjects(options);
  await install(client, options);
  const namespace = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: options.namespace } };
  for (const { type, obj } of [{ type: Kinds.Namespace!, obj: namespace }, ...objects]) {
    await client.apply(type, obj, { fieldManager: FIELD_MANAGER, force: true }).catch((err) => {
      throw explain(err, 'apply', label(type, obj), client, options);
    });
    console.log(`applied ${label(type, obj)}`);
  }
}

async function undeploy(client: Client, options: Options): Promise<void> {
  for (const { type, obj } of deployObjects({ ...options, image: options.image ?? 'unused' }).reverse()) await remove(client, type, obj, options);
  await uninstall(client, options);
}

const actions = { install, uninstall, deploy, undeploy };
const action = process.argv[2] as keyof typeof actions;
let client: Client | undefined;
try {
  if (!(action in actions)) throw new Error(`usage: deploy-worker install|uninstall|deploy|undeploy <options> (got ${action})`);
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
