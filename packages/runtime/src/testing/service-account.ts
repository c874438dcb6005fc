/**
 * Test support: run an operator as the ServiceAccount of its deploy/ manifests, so that
 * end-to-end tests prove the committed RBAC is enough.
 *
 * Guarantees: `serviceAccountKubeconfig(env, namespace, manifests)` server-side applies the
 * manifests' ServiceAccount, Role, RoleBinding, ClusterRole and ClusterRoleBinding objects for
 * `namespace` — namespaced objects and ServiceAccount subjects are placed in it; a
 * ClusterRoleBinding is renamed `<its ClusterRole>-<namespace>`, so tests in different
 * namespaces never share one — then requests a short-lived token for the one ServiceAccount
 * with the TokenRequest API (an error if none is issued) and writes a kubeconfig (mode 0600)
 * for the test env's API server that holds only that token, so every request made with it is
 * authorised by the ServiceAccount's bindings alone. `cleanup()` removes the kubeconfig and the
 * ClusterRoleBindings it created (namespaced objects go with the namespace); a ClusterRole is
 * left in place, being the same for every test.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { isNotFound } from '../client/errors.ts';
import { Kinds, type KubeObject, type ResourceType } from '../client/resource.ts';
import { TestEnv } from './env.ts';

const FIELD_MANAGER = 'iot-operator-tests';

const typesByKind: Record<string, ResourceType> = {
  ServiceAccount: Kinds.ServiceAccount,
  Role: Kinds.Role,
  RoleBinding: Kinds.RoleBinding,
  ClusterRole: Kinds.ClusterRole,
  ClusterRoleBinding: Kinds.ClusterRoleBinding,
};

interface Binding extends KubeObject {
  subjects?: Array<{ kind: string; name: string; namespace?: string }>;
  roleRef: { kind: string; name: string };
}

interface KubeconfigFile {
  clusters: Array<{ name: string; cluster: Record<string, unknown> }>;
  contexts: Array<{ name: string; context: { cluster: string } }>;
  'current-context': string;
}

export interface ServiceAccountKubeconfig {
  /** The kubeconfig file: the test env's cluster, authenticated by the ServiceAccount's token only. */
  file: string;
  serviceAccount: string;
  /** Removes the kubeconfig and the ClusterRoleBindings made for the namespace. */
  cleanup(): Promise<void>;
}

/** The object as it is applied for `namespace`. */
function forNamespace(obj: KubeObject, namespace: string): KubeObject {
  const type = typesByKind[obj.kind ?? ''];
  const binding = obj.kind === 'RoleBinding' || obj.kind === 'ClusterRoleBinding' ? (obj as Binding) : undefined;
  const subjects = binding?.subjects?.map((s) => (s.kind === 'ServiceAccount' ? { ...s, namespace } : s));
  const metadata =
    obj.kind === 'ClusterRoleBinding'
      ? { ...obj.metadata, name: `${binding!.roleRef.name}-${namespace}` }
      : type?.namespaced
        ? { ...obj.metadata, namespace }
        : obj.metadata;
  return { ...obj, metadata, ...(subjects ? { subjects } : {}) };
}

export async function serviceAccountKubeconfig(env: TestEnv, namespace: string, manifests: string[], options: { expirationSeconds?: number } = {}): Promise<ServiceAccountKubeconfig> {
  const objects: KubeObject[] = [];
  for (const file of manifests) {
    for (const obj of await TestEnv.readManifests(file)) {
      if (!typesByKind[obj.kind ?? '']) throw new Error(`${file}: no resource type known for kind ${obj.kind}`);
      objects.push(forNamespace(obj, namespace));
    }
  }
  const accounts = objects.filter((obj) => obj.kind === 'ServiceAccount');
  if (accounts.length !== 1) throw new Error(`the manifests hold ${accounts.length} ServiceAccounts; expected exactly one (${manifests.join(', ')})`);
  const serviceAccount = accounts[0]!.metadata.name!;
  const clusterBindings: string[] = [];
  for (const obj of objects) {
    await env.client.apply(typesByKind[obj.kind!]!, obj, { fieldManager: FIELD_MANAGER, force: true });
    if (obj.kind === 'ClusterRoleBinding') clusterBindings.push(obj.metadata.name!);
  }

  const request = await env.client.raw<{ status?: { token?: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: options.expirationSeconds ?? 3600 } },
  });
  const token = request.status?.token;
  if (!token) throw new Error(`the API server issued no token for ServiceAccount ${namespace}/${serviceAccount}`);
  const admin = parse(await readFile(env.kubeconfigPath, 'utf8')) as KubeconfigFile;
  const context = admin.contexts.find((c) => c.name === admin['current-context']);
  const cluster = admin.clusters.find((c) => c.name === context?.context.cluster);
  if (!cluster) throw new Error(`${env.kubeconfigPath}: no cluster for the current context`);
  const dir = await mkdtemp(path.join(os.tmpdir(), `${serviceAccount}-`));
  const file = path.join(dir, 'kubeconfig.yaml');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: cluster.cluster }],
    users: [{ name: serviceAccount, user: { token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: serviceAccount, namespace } }],
    'current-context': 'test',
  };
  await writeFile(file, stringify(config), { mode: 0o600 });
  return {
    file,
    serviceAccount,
    cleanup: async () => {
      await rm(dir, { recursive: true, force: true });
      for (const name of clusterBindings) {
        await env.client.delete(Kinds.ClusterRoleBinding, name).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
      }
    },
  };
}
