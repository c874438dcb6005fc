/**
 * The files of a new API (`operator-ts create api`): its TypeBox schema and CRD definition, a
 * controller that owns one ConfigMap per object and reports status, a sample object, a unit
 * test on the fake client and an end-to-end test on the local cluster as the operator's
 * ServiceAccount.
 *
 * Guarantees: `apiSourceFiles(project, api)` depends only on its arguments; the generated
 * controller reconciles for real (creates, corrects and re-creates its ConfigMap; status names
 * it and the generation it reflects) so the generated tests pass unchanged once
 * `operator-ts generate crd` and `generate rbac` have run. Paths come from `apiFiles`.
 */
import { apiFiles, type ApiDefinition, type Project } from '../project.ts';

export function apiSourceFiles(project: Project, api: ApiDefinition): Record<string, string> {
  const files = apiFiles(api);
  const n = names(api);
  return {
    [files.types]: types(n),
    [files.controller]: controller(project, n),
    [files.sample]: sample(n),
    [files.unitTest]: unitTest(n),
    [files.e2eTest]: e2eTest(n, files.crd),
  };
}

function names(api: ApiDefinition) {
  const { kind } = api;
  return { ...api, lower: kind.toLowerCase(), apiVersion: `${api.group}/${api.version}`, scope: api.namespaced ? 'Namespaced' : 'Cluster' };
}
type Names = ReturnType<typeof names>;

function types(n: Names): string {
  return `/**
 * The ${n.kind} API (${n.apiVersion}), defined once: the TypeBox schemas are the single source of
 * the TypeScript types, of the CRD's OpenAPI schema (\`operator-ts generate crd\` calls crd()) and
 * of the operator-side check of old objects.
 */
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { customResource, customResourceDefinition, type KubeObject, type ObjectMeta } from '@iot-operator/runtime';

export const ${n.kind} = customResource('${n.group}', '${n.version}', '${n.kind}', '${n.plural}', ${n.namespaced});

export const ${n.kind}SpecSchema = Type.Object(
  {
    message: Type.String({ description: 'Message is written to the ConfigMap the operator keeps for this object.', minLength: 1, maxLength: 1024 }),
  },
  { description: '${n.kind}Spec defines the desired state of ${n.kind}.' },
);

export const ${n.kind}StatusSchema = Type.Object(
  {
    configMap: Type.Optional(Type.String({ description: 'ConfigMap is the name of the ConfigMap holding spec.message.' })),
    observedGeneration: Type.Optional(Type.Integer({ description: 'ObservedGeneration is the generation the ConfigMap reflects.', format: 'int64' })),
  },
  { description: '${n.kind}Status defines the observed state of ${n.kind}.' },
);

export type ${n.kind}Spec = Static<typeof ${n.kind}SpecSchema>;
export type ${n.kind}Status = Static<typeof ${n.kind}StatusSchema>;

export interface ${n.kind}Object extends KubeObject {
  metadata: ObjectMeta;
  spec: ${n.kind}Spec;
  status?: ${n.kind}Status;
}

export function isValid${n.kind}Spec(spec: unknown): spec is ${n.kind}Spec {
  return Value.Check(${n.kind}SpecSchema, spec);
}

/** The CustomResourceDefinition of ${n.plural}.${n.group}. */
export function crd(): Record<string, unknown> {
  return customResourceDefinition({
    group: '${n.group}',
    scope: '${n.scope}',
    names: { kind: '${n.kind}', plural: '${n.plural}', singular: '${n.lower}' },
    versions: [
      {
        name: '${n.version}',
        served: true,
        storage: true,
        subresources: { status: {} },
        printerColumns: [
          { name: 'ConfigMap', type: 'string', jsonPath: '.status.configMap' },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        description: '${n.kind} is the Schema for the ${n.plural} API.',
        spec: ${n.kind}SpecSchema,
        status: ${n.kind}StatusSchema,
      },
    ],
  });
}
`;
}

function controller(project: Project, n: Names): string {
  return `/**
 * The ${n.kind} controller: every ${n.kind} owns a ConfigMap \`<name>-${n.lower}\` holding
 * spec.message; status names the ConfigMap and the generation it reflects.
 *
 * Reconcile reads from the cache only and writes only what differs: a missing, deleted or
 * edited ConfigMap is (re)applied with server-side apply; status is patched when it changes.
 * Deleting the ${n.kind} removes the ConfigMap through garbage collection (owner reference).
 */
import { childDifference, controller, controllerReference, Kinds, TerminalError, withDesiredHash, type Controller, type KubeObject, type Manager, type ReconcileContext, type Request } from '@iot-operator/runtime';
import { isValid${n.kind}Spec, ${n.kind}, type ${n.kind}Object } from '../api/${n.lower}.ts';

const FIELD_MANAGER = '${project.name}';

export function ${n.lower}ConfigMapName(name: string): string {
  return \`\${name}-${n.lower}\`;
}

export function desired${n.kind}ConfigMap(owner: ${n.kind}Object): KubeObject {
  return withDesiredHash({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: ${n.lower}ConfigMapName(owner.metadata.name ?? ''),
      namespace: owner.metadata.namespace,
      labels: { 'app.kubernetes.io/managed-by': '${project.name}', '${n.group}/${n.lower}': owner.metadata.name ?? '' },
      ownerReferences: [controllerReference(${n.kind}, owner)],
    },
    data: { message: owner.spec.message },
  });
}

export async function reconcile${n.kind}(req: Request, ctx: ReconcileContext): Promise<void> {
  const object = ctx.cache.get<${n.kind}Object>(${n.kind}, req.name, req.namespace);
  if (!object || object.metadata.deletionTimestamp) return;
  if (!isValid${n.kind}Spec(object.spec)) throw new TerminalError(\`${n.kind} \${req.name} has an invalid spec: \${JSON.stringify(object.spec)}\`);

  const desired = desired${n.kind}ConfigMap(object);
  const name = desired.metadata.name!;
  const current = ctx.cache.get(Kinds.ConfigMap, name, req.namespace);
  if (!current || childDifference(desired, current) !== undefined) {
    await ctx.client.apply(Kinds.ConfigMap, desired, { fieldManager: FIELD_MANAGER, force: true });
    ctx.log.info({ configMap: name, created: !current }, current ? 'corrected the ConfigMap' : 'created the ConfigMap');
  }

  const status = { configMap: name, observedGeneration: object.metadata.generation };
  if (object.status?.configMap !== status.configMap || object.status?.observedGeneration !== status.observedGeneration) {
    await ctx.client.patchStatus(${n.kind}, req.name, req.namespace, { status }, 'merge');
  }
}

export function register${n.kind}Controller(mgr: Manager): Controller {
  return controller(mgr).named('${n.lower}').for(${n.kind}).owns(Kinds.ConfigMap).reconcile(reconcile${n.kind});
}
`;
}

function sample(n: Names): string {
  return `apiVersion: ${n.apiVersion}
kind: ${n.kind}
metadata:
  name: example-${n.lower}
spec:
  message: hello from example-${n.lower}
`;
}

function unitTest(n: Names): string {
  return `/**
 * The ${n.kind} reconcile step on the runtime's fake client: the first pass writes the ConfigMap
 * and the status, a second pass writes nothing, a changed message rewrites the ConfigMap.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { ${n.kind}, type ${n.kind}Object } from '../src/api/${n.lower}.ts';
import { reconcile${n.kind} } from '../src/controllers/${n.lower}.ts';

function setup() {
  const cluster = new FakeClient();
  cluster.seed(${n.kind}, { apiVersion: '${n.apiVersion}', kind: '${n.kind}', metadata: { name: 'example', namespace: 'demo', generation: 1 }, spec: { message: 'hello' } });
  const reconcile = () => reconcile${n.kind}({ namespace: 'demo', name: 'example' }, cluster.reconcileContext());
  const writes = () => cluster.writes.map((w) => \`\${w.verb} \${w.kind}\`);
  return { cluster, reconcile, writes };
}

test('first pass writes the ConfigMap and the status; a second pass writes nothing', async () => {
  const { cluster, reconcile, writes } = setup();
  await reconcile();
  assert.deepEqual(writes(), ['apply ConfigMap', 'status ${n.kind}']);
  assert.deepEqual(cluster.peek<KubeObject>(Kinds.ConfigMap, 'example-${n.lower}', 'demo')?.data, { message: 'hello' });
  assert.deepEqual(cluster.peek<${n.kind}Object>(${n.kind}, 'example', 'demo')?.status, { configMap: 'example-${n.lower}', observedGeneration: 1 });
  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), []);
});

test('a changed message rewrites the ConfigMap', async () => {
  const { cluster, reconcile, writes } = setup();
  await reconcile();
  await cluster.patch(${n.kind}, 'example', 'demo', { spec: { message: 'changed' } });
  cluster.writes.length = 0;
  await reconcile();
  assert.ok(writes().includes('apply ConfigMap'), writes().join(', '));
  assert.deepEqual(cluster.peek<KubeObject>(Kinds.ConfigMap, 'example-${n.lower}', 'demo')?.data, { message: 'changed' });
});
`;
}

function e2eTest(n: Names, crdFile: string): string {
  return `/**
 * The ${n.kind} controller on the local cluster, run as the operator's ServiceAccount with only
 * the generated deploy/ RBAC: a ${n.kind} gets its ConfigMap and status, a new message reaches
 * the ConfigMap, a deleted ConfigMap comes back, and the API server rejects an empty message.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isNotFound, Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, testEnv, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { ${n.kind}, type ${n.kind}Object } from '../src/api/${n.lower}.ts';
import { ${n.lower}ConfigMapName } from '../src/controllers/${n.lower}.ts';
import { createOperator } from '../src/operator.ts';

const configMapName = ${n.lower}ConfigMapName('example-${n.lower}');
const deployDir = fileURLToPath(new URL('../deploy/', import.meta.url));
const crdFile = fileURLToPath(new URL('../${crdFile}', import.meta.url));
let env: TestEnv;
let account: ServiceAccountKubeconfig;
let mgr: Manager;
let ns: string;

async function configMap(): Promise<KubeObject | undefined> {
  try {
    return await env.client.get(Kinds.ConfigMap, configMapName, ns);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

function messageIs(message: string) {
  return async () => {
    const found = await configMap();
    const data = found?.data as Record<string, string> | undefined;
    return { done: data?.message === message, value: found!, seen: data };
  };
}

describe('${n.kind} controller', () => {
  before(async () => {
    env = await testEnv();
    await env.installCrd(crdFile);
    ns = await env.namespace('${n.lower}');
    account = await serviceAccountKubeconfig(env, ns, ['service_account.yaml', 'role.yaml', 'role_binding.yaml'].map((f) => path.join(deployDir, f)));
    mgr = await createOperator({ ...env.operatorOptions(ns), kubeconfigPath: account.file });
    await mgr.start();
  });

  after(async () => {
    await mgr?.stop();
    await account?.cleanup();
    await env?.cleanup();
  });

  test('a ${n.kind} gets a ConfigMap it owns, and its status names it', async () => {
    const created = await env.client.create<${n.kind}Object>(${n.kind}, { apiVersion: '${n.apiVersion}', kind: '${n.kind}', metadata: { name: 'example-${n.lower}', namespace: ns }, spec: { message: 'hello' } });
    const found = await env.waitFor('the ConfigMap with the message', messageIs('hello'));
    assert.equal(found.metadata.ownerReferences?.[0]?.uid, created.metadata.uid);
    const status = await env.waitFor('status.configMap', async () => {
      const current = await env.client.get<${n.kind}Object>(${n.kind}, 'example-${n.lower}', ns);
      return { done: current.status?.configMap !== undefined, value: current.status, seen: current.status };
    });
    assert.deepEqual(status, { configMap: configMapName, observedGeneration: 1 });
  });

  test('a new message reaches the ConfigMap', async () => {
    await env.client.patch(${n.kind}, 'example-${n.lower}', ns, { spec: { message: 'changed' } }, 'merge');
    await env.waitFor('the ConfigMap with the new message', messageIs('changed'));
  });

  test('a deleted ConfigMap is recreated', async () => {
    const old = await configMap();
    await env.client.delete(Kinds.ConfigMap, configMapName, ns);
    const fresh = await env.waitFor('a new ConfigMap', async () => {
      const found = await configMap();
      return { done: !!found && found.metadata.uid !== old?.metadata.uid, value: found!, seen: found?.metadata.uid };
    });
    assert.deepEqual(fresh.data, { message: 'changed' });
  });

  test('the API server rejects an empty message', async () => {
    await assert.rejects(
      env.client.create(${n.kind}, { apiVersion: '${n.apiVersion}', kind: '${n.kind}', metadata: { name: 'empty', namespace: ns }, spec: { message: '' } }),
      /message/,
    );
  });
});
`;
}
