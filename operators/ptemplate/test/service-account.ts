/**
 * Test support: run the operator as its deploy/ ServiceAccount, so that end-to-end tests prove
 * the committed RBAC manifests are enough.
 *
 * Guarantees: `applyManifests` server-side applies the given files' objects into a namespace;
 * `serviceAccountKubeconfig` writes a kubeconfig (mode 0600, removed by the returned cleanup)
 * for the same API server as the test env, authenticated only by a short-lived token of the
 * ServiceAccount, so every request is authorised by the ServiceAccount's bindings alone.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { Kinds, type KubeObject, type ResourceType } from '@iot-operator/runtime';
import { TestEnv } from '@iot-operator/runtime/testing';

const typesByKind: Record<string, ResourceType> = {
  ServiceAccount: Kinds.ServiceAccount,
  Role: Kinds.Role,
  RoleBinding: Kinds.RoleBinding,
};

export async function applyManifests(env: TestEnv, namespace: string, files: string[]): Promise<KubeObject[]> {
  const applied: KubeObject[] = [];
  for (const file of files) {
    for (const obj of await TestEnv.readManifests(file)) {
      const type = typesByKind[obj.kind ?? ''];
      if (!type) throw new Error(`${file}: no resource type known for kind ${obj.kind}`);
      const namespaced = { ...obj, metadata: { ...obj.metadata, namespace } };
      applied.push(await env.client.apply(type, namespaced, { fieldManager: 'iot-operator-tests', force: true }));
    }
  }
  return applied;
}

interface KubeconfigFile {
  clusters: Array<{ name: string; cluster: Record<string, unknown> }>;
  contexts: Array<{ name: string; context: { cluster: string } }>;
  'current-context': string;
}

export async function serviceAccountKubeconfig(env: TestEnv, namespace: string, serviceAccount: string): Promise<{ file: string; cleanup: () => Promise<void> }> {
  const request = await env.client.raw<{ status: { token: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 900 } },
  });
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
    users: [{ name: serviceAccount, user: { token: request.status.token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: serviceAccount, namespace } }],
    'current-context': 'test',
  };
  await writeFile(file, stringify(config), { mode: 0o600 });
  return { file, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
