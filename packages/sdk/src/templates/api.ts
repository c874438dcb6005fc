/**
 * The files of a new API (`operator-ts create api`): its TypeBox schema and CRD definition, a
 * controller that owns one child per object (a ConfigMap beside a namespaced object, a Namespace
 * named after a cluster-scoped one) and reports status, a sample object, a unit
 * test on the fake client and an end-to-end test on the local cluster as the operator's
 * ServiceAccount.
 *
 * Guarantees: `apiSourceFiles(project, api)` depends only on its arguments; the generated
 * controller reconciles for real (creates, corrects and re-creates its child; status names
 * it and the generation it reflects) so the generated tests pass unchanged once
 * `operator-ts generate crd` and `generate rbac` have run. Paths come from `apiFiles`.
 */
import { apiFiles, type ApiDefinition, type Project } from '../project.ts';

export function apiSourceFiles(project: Project, api: ApiDefinition): Record<string, string> {
  const files = apiFiles(api);
  const n = names(api);
  const scoped = api.namespaced
    ? { controller: controller(project, n), unitTest: unitTest(n), e2eTest: e2eTest(n) }
    : { controller: clusterController(project, n), unitTest: clusterUnitTest(n), e2eTest: clusterE2eTest(n) };
  return {
    [files.types]: types(n),
    [files.controller]: scoped.controller,
    [files.sample]: sample(n),
    [files.unitTest]: scoped.unitTest,
    [files.e2eTest]: scoped.e2eTest,
  };
}

function names(api: ApiDefinition) {
  const { kind } = api;
  return {
    ...api,
    lower: kind.toLowerCase(),
    apiVersion: `${api.group}/${api.version}`,
    scope: api.namespaced ? 'Namespaced' : 'Cluster',
    /** The child each object owns: a ConfigMap beside a namespaced object, a Namespace for a cluster-scoped one. */
    child: api.namespaced ? { kind: 'ConfigMap', field: 'configMap' } : { kind: 'Namespace', field: 'namespace' },
  };
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
import { customResource, singleVersionCustomResourceDefinition, type KubeObject, type ObjectMeta } from '@iot-operator/runtime';

export const ${n.kind} = customResource('${n.group}', '${n.version}', '${n.kind}', '${n.plural}', ${n.namespaced});

export const ${n.kind}SpecSchema = Type.Object(
  {
    message: Type.String({ description: 'Message is written to the ConfigMap the operator keeps for this object.', minLength: 1, maxLength: 1024 }),
  },
  { description: '${n.kind}Spec defines the desired state of ${n.kind}.' },
);

export const ${n.kind}StatusSchema = Type.Object(
  {
    ${n.child.field}: Type.Optional(Type.String({ description: '${n.child.kind} is the name of the ${n.child.kind} holding spec.message.' })),
    observedGeneration: Type.Optional(Type.Integer({ description: 'ObservedGeneration is the generation the ${n.child.kind} reflects.', format: 'int64' })),
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
  return singleVersionCustomResourceDefinition({
    group: '${n.group}',
    scope: '${n.scope}',
    names: { kind: '${n.kind}', plural: '${n.plural}', singular: '${n.lower}' },
    version: {
      name: '${n.version}',
      printerColumns: [
        { name: '${n.child.kind}', type: 'string', jsonPath: '.status.${n.child.field}' },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
      description: '${n.kind} is the Schema for the ${n.plural} API.',
      spec: ${n.kind}SpecSchema,
      status: ${n.kind}StatusSchema,
    },
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
 * edited ConfigMap is (re)applied with server-side apply; status is patched when it changes. A
 * ConfigMap of that name the ${n.kind} does not control is left alone (a Warning event, no retry).
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
  const ours = current?.metadata.ownerReferences?.some((ref) => ref.controller && ref.uid === object.metadata.uid);
  if (current && !ours) {
    const message = \`ConfigMap \${name} exists and is not this ${n.kind}'s; not taking it over\`;
    ctx.recorder.event(object, 'Warning', 'ConfigMapConflict', message);
    throw new TerminalError(message);
  }
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
 * and the status, a second pass writes nothing, a changed message rewrites the ConfigMap, and a
 * ConfigMap that is not the ${n.kind}'s is left alone.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { ${n.kind}, type ${n.kind}Object } from '../src/api/${n.lower}.ts';
import { reconcile${n.kind} } from '../src/controllers/${n.lower}.ts';

function setup() {
  const cluster = new FakeClient();
  cluster.seed(${n.kind}, { apiVersion: '${n.apiVersion}', kind: '${n.kind}', metadata: { name: 'example', namespace: 'demo', uid: 'uid-example', generation: 1 }, spec: { message: 'hello' } });
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

test('a ConfigMap of the same name that is not the ${n.kind}\\'s is not taken over', async () => {
  const { cluster, reconcile, writes } = setup();
  cluster.seed(Kinds.ConfigMap, { metadata: { name: 'example-${n.lower}', namespace: 'demo' }, data: { mine: 'yes' } });
  await assert.rejects(reconcile(), /ConfigMap example-${n.lower} exists and is not this ${n.kind}'s/);
  assert.deepEqual(writes(), []);
});
`;
}

function e2eTest(n: Names): string {
  return `/**
 * The ${n.kind} controller on the local cluster, run as the operator's ServiceAccount with only
 * the generated deploy/ RBAC: a ${n.kind} gets its ConfigMap and status, a new message reaches
 * the ConfigMap, a deleted ConfigMap comes back, and the API server rejects an empty message.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ifFound, Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, testEnv, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { ${n.kind}, type ${n.kind}Object } from '../src/api/${n.lower}.ts';
import { ${n.lower}ConfigMapName } from '../src/controllers/${n.lower}.ts';
import { createOperator } from '../src/operator.ts';
import { installProjectCrds } from './crds.ts';

const configMapName = ${n.lower}ConfigMapName('example-${n.lower}');
const deployDir = fileURLToPath(new URL('../deploy/', import.meta.url));
let env: TestEnv;
let account: ServiceAccountKubeconfig;
let mgr: Manager;
let ns: string;

function configMap(): Promise<KubeObject | undefined> {
  return ifFound(env.client.get(Kinds.ConfigMap, configMapName, ns));
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
    await installProjectCrds(env);
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

function clusterController(project: Project, n: Names): string {
  return `/**
 * The ${n.kind} controller: every ${n.kind} (cluster-scoped) owns a Namespace of the same name,
 * annotated with spec.message; status names the Namespace and the generation it reflects.
 *
 * Reconcile reads from the cache only and writes only what differs: a missing, deleted or
 * edited Namespace is (re)applied with server-side apply; status is patched when it changes. A
 * Namespace of that name the ${n.kind} does not control is left alone (a Warning event, no retry).
 * Deleting the ${n.kind} removes the Namespace, and all in it, through garbage collection.
 */
import { childDifference, controller, controllerReference, Kinds, TerminalError, withDesiredHash, type Controller, type KubeObject, type Manager, type ReconcileContext, type Request } from '@iot-operator/runtime';
import { isValid${n.kind}Spec, ${n.kind}, type ${n.kind}Object } from '../api/${n.lower}.ts';

const FIELD_MANAGER = '${project.name}';
export const MESSAGE_ANNOTATION = '${n.group}/message';

export function desired${n.kind}Namespace(owner: ${n.kind}Object): KubeObject {
  return withDesiredHash({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: owner.metadata.name,
      labels: { 'app.kubernetes.io/managed-by': '${project.name}' },
      annotations: { [MESSAGE_ANNOTATION]: owner.spec.message },
      ownerReferences: [controllerReference(${n.kind}, owner)],
    },
  });
}

export async function reconcile${n.kind}(req: Request, ctx: ReconcileContext): Promise<void> {
  const object = ctx.cache.get<${n.kind}Object>(${n.kind}, req.name);
  if (!object || object.metadata.deletionTimestamp) return;
  if (!isValid${n.kind}Spec(object.spec)) throw new TerminalError(\`${n.kind} \${req.name} has an invalid spec: \${JSON.stringify(object.spec)}\`);

  const desired = desired${n.kind}Namespace(object);
  const current = ctx.cache.get(Kinds.Namespace, req.name);
  const ours = current?.metadata.ownerReferences?.some((ref) => ref.controller && ref.uid === object.metadata.uid);
  if (current && !ours) {
    const message = \`Namespace \${req.name} exists and is not this ${n.kind}'s; not taking it over\`;
    ctx.recorder.event(object, 'Warning', 'NamespaceConflict', message);
    throw new TerminalError(message);
  }
  if (!current || childDifference(desired, current) !== undefined) {
    await ctx.client.apply(Kinds.Namespace, desired, { fieldManager: FIELD_MANAGER, force: true });
    ctx.log.info({ namespace: req.name, created: !current }, current ? 'corrected the Namespace' : 'created the Namespace');
  }

  const status = { namespace: req.name, observedGeneration: object.metadata.generation };
  if (object.status?.namespace !== status.namespace || object.status?.observedGeneration !== status.observedGeneration) {
    await ctx.client.patchStatus(${n.kind}, req.name, undefined, { status }, 'merge');
  }
}

export function register${n.kind}Controller(mgr: Manager): Controller {
  return controller(mgr).named('${n.lower}').for(${n.kind}).owns(Kinds.Namespace).reconcile(reconcile${n.kind});
}
`;
}

function clusterUnitTest(n: Names): string {
  return `/**
 * The ${n.kind} reconcile step on the runtime's fake client: the first pass writes the Namespace
 * and the status, a second pass writes nothing, a changed message rewrites the Namespace, and a
 * Namespace that is not the ${n.kind}'s is left alone.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { ${n.kind}, type ${n.kind}Object } from '../src/api/${n.lower}.ts';
import { MESSAGE_ANNOTATION, reconcile${n.kind} } from '../src/controllers/${n.lower}.ts';

function setup() {
  const cluster = new FakeClient();
  cluster.seed(${n.kind}, { apiVersion: '${n.apiVersion}', kind: '${n.kind}', metadata: { name: 'example', uid: 'uid-example', generation: 1 }, spec: { message: 'hello' } });
  const reconcile = () => reconcile${n.kind}({ name: 'example' }, cluster.reconcileContext());
  const writes = () => cluster.writes.map((w) => \`\${w.verb} \${w.kind}\`);
  return { cluster, reconcile, writes };
}

test('first pass writes the Namespace and the status; a second pass writes nothing', async () => {
  const { cluster, reconcile, writes } = setup();
  await reconcile();
  assert.deepEqual(writes(), ['apply Namespace', 'status ${n.kind}']);
  assert.equal(cluster.peek<KubeObject>(Kinds.Namespace, 'example')?.metadata.annotations?.[MESSAGE_ANNOTATION], 'hello');
  assert.deepEqual(cluster.peek<${n.kind}Object>(${n.kind}, 'example')?.status, { namespace: 'example', observedGeneration: 1 });
  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), []);
});

test('a changed message rewrites the Namespace', async () => {
  const { cluster, reconcile, writes } = setup();
  await reconcile();
  await cluster.patch(${n.kind}, 'example', undefined, { spec: { message: 'changed' } });
  cluster.writes.length = 0;
  await reconcile();
  assert.ok(writes().includes('apply Namespace'), writes().join(', '));
  assert.equal(cluster.peek<KubeObject>(Kinds.Namespace, 'example')?.metadata.annotations?.[MESSAGE_ANNOTATION], 'changed');
});

test('a Namespace of the same name that is not the ${n.kind}\\'s is not taken over', async () => {
  const { cluster, reconcile, writes } = setup();
  cluster.seed(Kinds.Namespace, { metadata: { name: 'example' } });
  await assert.rejects(reconcile(), /Namespace example exists and is not this ${n.kind}'s/);
  assert.deepEqual(writes(), []);
});
`;
}

function clusterE2eTest(n: Names): string {
  return `/**
 * The ${n.kind} controller on the local cluster, run as the operator's ServiceAccount with only
 * the generated deploy/ RBAC: a ${n.kind} gets its Namespace and status, a new message reaches
 * the Namespace, and deleting the ${n.kind} deletes the Namespace.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ifFound, Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, testEnv, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { ${n.kind}, type ${n.kind}Object } from '../src/api/${n.lower}.ts';
import { MESSAGE_ANNOTATION } from '../src/controllers/${n.lower}.ts';
import { createOperator } from '../src/operator.ts';
import { installProjectCrds } from './crds.ts';

const deployDir = fileURLToPath(new URL('../deploy/', import.meta.url));
const name = \`example-${n.lower}-\${randomBytes(3).toString('hex')}\`;
let env: TestEnv;
let account: ServiceAccountKubeconfig;
let mgr: Manager;

function namespace(): Promise<KubeObject | undefined> {
  return ifFound(env.client.get(Kinds.Namespace, name));
}

describe('${n.kind} controller', () => {
  before(async () => {
    env = await testEnv();
    await installProjectCrds(env);
    const ns = await env.namespace('${n.lower}');
    account = await serviceAccountKubeconfig(env, ns, ['service_account.yaml', 'role.yaml', 'role_binding.yaml'].map((f) => path.join(deployDir, f)));
    mgr = await createOperator({ ...env.operatorOptions(ns), kubeconfigPath: account.file });
    await mgr.start();
  });

  after(async () => {
    await env?.client.delete(${n.kind}, name).catch(() => undefined);
    await mgr?.stop();
    await account?.cleanup();
    await env?.cleanup();
  });

  test('a ${n.kind} gets a Namespace it owns, and its status names it', async () => {
    const created = await env.client.create<${n.kind}Object>(${n.kind}, { apiVersion: '${n.apiVersion}', kind: '${n.kind}', metadata: { name }, spec: { message: 'hello' } });
    const found = await env.waitFor('the Namespace with the message', async () => {
      const current = await namespace();
      return { done: current?.metadata.annotations?.[MESSAGE_ANNOTATION] === 'hello', value: current!, seen: current?.metadata };
    });
    assert.equal(found.metadata.ownerReferences?.[0]?.uid, created.metadata.uid);
    const status = await env.waitFor('status.namespace', async () => {
      const current = await env.client.get<${n.kind}Object>(${n.kind}, name);
      return { done: current.status?.namespace !== undefined, value: current.status, seen: current.status };
    });
    assert.deepEqual(status, { namespace: name, observedGeneration: 1 });
  });

  test('a new message reaches the Namespace', async () => {
    await env.client.patch(${n.kind}, name, undefined, { spec: { message: 'changed' } }, 'merge');
    await env.waitFor('the Namespace with the new message', async () => {
      const current = await namespace();
      return { done: current?.metadata.annotations?.[MESSAGE_ANNOTATION] === 'changed', value: true, seen: current?.metadata.annotations };
    });
  });

  test('deleting the ${n.kind} deletes its Namespace', async () => {
    await env.client.delete(${n.kind}, name);
    await env.waitFor('the Namespace to be deleted', async () => {
      const current = await namespace();
      return { done: !current || !!current.metadata.deletionTimestamp, value: true, seen: current?.status };
    });
  });
});
`;
}
