/**
 * The IoTService reconcile step against the runtime's in-memory fake client (reconcile logic
 * only; the end-to-end tests show the same on the real cluster), with every child write taking a
 * few milliseconds: children are written stage by stage (namespace; policies, secrets, config
 * and services; workloads), the writes of one stage at once; a stage that fails stops the
 * workloads from being written, a refusal becomes `Failed` naming the child, a transient error
 * is retried. Deletion: an IoTService the cache still shows with its finalizer, but already gone
 * from the API server, is finalized without an error.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { ApiError, Kinds, UnexpectedShapeError, type ApplyOptions, type KubeObject, type ResourceType } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import type { IoTService } from '../src/api/iotservice.ts';
import { iotReconciler } from '../src/controller.ts';
import { FINALIZER, IoTServiceType } from '../src/iotservice-types.ts';
import { CREDENTIAL_KEYS } from '../src/resources/secrets.ts';
import { iotService, TEST_CONFIG } from './fixtures.ts';

const INSTANCE_NAMESPACE = 'devawsk8s-tenant-a';
const CONFIG_KINDS = 'NetworkPolicy|ResourceQuota|LimitRange|Secret|ConfigMap|Service|PodDisruptionBudget';
const WORKLOAD_KINDS = 'StatefulSet|Deployment';
/** Log lines of writes of these kinds: `verb` is 'start', 'end' or 'start|end'. */
const writesOf = (verb: string, kinds: string) => new RegExp(`^(${verb}) (${kinds})/`);

/** A fake whose child writes take `writeMs` and are logged as they start and end; `refuse` makes one fail. */
class SlowClient extends FakeClient {
  readonly log: string[] = [];
  refuse: { key: string; error: ApiError } | undefined;

  constructor(private readonly writeMs = 5) {
    super();
  }

  override async create<T extends KubeObject>(type: ResourceType, obj: T): Promise<T> {
    return this.timed(type, obj, () => super.create(type, obj));
  }

  override async apply<T extends KubeObject>(type: ResourceType, obj: T, options: ApplyOptions): Promise<T> {
    return this.timed(type, obj, () => super.apply(type, obj, options));
  }

  private async timed<T>(type: ResourceType, obj: KubeObject, write: () => Promise<T>): Promise<T> {
    const key = `${type.kind}/${obj.metadata.name}`;
    if (type === IoTServiceType) return write();
    this.log.push(`start ${key}`);
    await delay(this.writeMs);
    this.log.push(`end ${key}`);
    if (this.refuse?.key === key) throw this.refuse.error;
    return write();
  }
}

function setup(options: { annotations?: Record<string, string>; onEvent?: (reason: string) => void } = {}) {
  const cluster = new SlowClient();
  cluster.seed(Kinds.Secret, { metadata: { name: 'image-pull-secret', namespace: TEST_CONFIG.operatorName }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': 'e30=' } });
  const iot = iotService('tenant-a', { version: '2.4.1' });
  cluster.seed(IoTServiceType, { ...iot, metadata: { ...iot.metadata, annotations: options.annotations } } as unknown as KubeObject);
  const ctx = { ...cluster.reconcileContext(), recorder: { event: (_object: unknown, _type: string, reason: string) => options.onEvent?.(reason), flush: async () => undefined } };
  const reconciler = iotReconciler({ ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1 });
  const reconcile = () => reconciler({ namespace: TEST_CONFIG.operatorName, name: 'tenant-a' }, ctx);
  const status = () => cluster.peek<IoTService & KubeObject>(IoTServiceType, 'tenant-a', TEST_CONFIG.operatorName)?.status;
  return { cluster, reconcile, status };
}

/** Position in the log of the first line matching `pattern`, of the last one, and how many. */
function span(log: readonly string[], pattern: RegExp): { first: number; last: number; count: number } {
  const at = log.flatMap((line, i) => (pattern.test(line) ? [i] : []));
  return { first: at[0] ?? -1, last: at.at(-1) ?? -1, count: at.length };
}

const workloadWrites = (log: readonly string[]) => span(log, writesOf('start|end', WORKLOAD_KINDS));

describe('IoTService reconcile: writing the children', () => {
  it('writes the namespace, then policies, quota, secrets, config and services at once, then the workloads at once', async () => {
    const { cluster, reconcile, status } = setup();
    await reconcile();
    const log = cluster.log;

    assert.deepEqual(log.slice(0, 2), [`start Namespace/${INSTANCE_NAMESPACE}`, `end Namespace/${INSTANCE_NAMESPACE}`], 'the namespace is written first, alone');
    const configStarts = span(log, writesOf('start', CONFIG_KINDS));
    const configEnds = span(log, writesOf('end', CONFIG_KINDS));
    assert.equal(configStarts.count, 29, 'ten policies, the quota and limit range, four secrets (pull, credentials, gateway CA and TLS), two config maps (config, gateway CA), six services and five disruption budgets');
    assert.ok(configStarts.last < configEnds.first, `the second stage's writes are all under way before the first of them ends:\n${log.join('\n')}`);
    const workloads = workloadWrites(log);
    assert.equal(workloads.count, 10, 'five workloads, each started and ended');
    assert.ok(configEnds.last < workloads.first, `no workload is written before the second stage has ended:\n${log.join('\n')}`);
    const workloadStarts = span(log, writesOf('start', WORKLOAD_KINDS));
    const workloadEnds = span(log, writesOf('end', WORKLOAD_KINDS));
    assert.ok(workloadStarts.last < workloadEnds.first, 'the workloads are written at once');

    assert.equal(cluster.peek(Kinds.Deployment, 'gateway', INSTANCE_NAMESPACE)?.kind, 'Deployment');
    assert.equal(status()?.phase, 'Processing', 'written, not yet rolled out');
  });

  it('a refusal in the second stage makes the instance Failed naming the child, and no workload is written', async () => {
    const { cluster, reconcile, status } = setup();
    cluster.refuse = { key: 'ConfigMap/iot-config', error: new ApiError(422, 'Invalid', 'ConfigMap "iot-config" is invalid: data: Too long') };
    await reconcile();
    assert.equal(workloadWrites(cluster.log).count, 0, cluster.log.join('\n'));
    assert.equal(span(cluster.log, writesOf('start|end', CONFIG_KINDS)).count, 58, 'the rest of the stage is still written');
    assert.equal(status()?.phase, 'Failed');
    assert.match(status()?.reason ?? '', /ConfigMap/);
    assert.match(status()?.reason ?? '', /iot-config/);
  });

  it('a transient error in the second stage is thrown for a retry, and no workload is written', async () => {
    const { cluster, reconcile, status } = setup();
    cluster.refuse = { key: 'Service/core', error: new ApiError(500, 'InternalError', 'etcdserver: request timed out') };
    await assert.rejects(reconcile(), /request timed out/);
    assert.equal(workloadWrites(cluster.log).count, 0, cluster.log.join('\n'));
    assert.notEqual(status()?.phase, 'Failed');

    cluster.refuse = undefined;
    cluster.log.length = 0;
    await reconcile();
    assert.equal(workloadWrites(cluster.log).count, 10, 'the retry writes the workloads');
    assert.equal(cluster.peek(Kinds.Service, 'core', INSTANCE_NAMESPACE)?.kind, 'Service');
  });

  it('a status of an unexpected shape (conditions: "x") fails as an UnexpectedShapeError naming the field, before any write', async () => {
    const cluster = new SlowClient();
    cluster.seed(IoTServiceType, { ...iotService('tenant-a', { version: '2.4.1' }), status: { conditions: 'x' } } as unknown as KubeObject);
    const reconciler = iotReconciler({ ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1 });
    await assert.rejects(reconciler({ namespace: TEST_CONFIG.operatorName, name: 'tenant-a' }, cluster.reconcileContext()), (err: unknown) => {
      assert.ok(err instanceof UnexpectedShapeError, `expected an UnexpectedShapeError, got ${String(err)}`);
      assert.equal(err.field, 'status.conditions');
      return true;
    });
    assert.deepEqual(cluster.writes, [], 'nothing written');
  });
});

type SecretObject = KubeObject & { data?: Record<string, string> };
const credentialsOf = (cluster: FakeClient) => cluster.peek<SecretObject>(Kinds.Secret, 'iot-credentials', INSTANCE_NAMESPACE);
const credentialWrites = (cluster: FakeClient) => cluster.writes.filter((w) => w.kind === 'Secret' && w.key.endsWith('/iot-credentials'));

describe('IoTService reconcile: the generated credentials', () => {
  it('are created with every key; an existing Secret lacking a key gets it added, its other keys unchanged; nothing is written once it lacks none', async () => {
    const { cluster, reconcile } = setup();
    await reconcile();
    const created = credentialsOf(cluster)!;
    assert.deepEqual(Object.keys(created.data ?? {}).sort(), Object.values(CREDENTIAL_KEYS).sort());

    // An instance made before the device-check token and the broker users existed.
    const older = { 'api-token': created.data!['api-token']!, 'broker-password': Buffer.from('the one broker password').toString('base64'), 'database-password': created.data!['database-password']! };
    await cluster.replace(Kinds.Secret, { ...created, data: older });
    const writesBefore = credentialWrites(cluster).length;
    await reconcile();
    const completed = credentialsOf(cluster)!;
    assert.equal(credentialWrites(cluster).length, writesBefore + 1, 'one write');
    assert.deepEqual(Object.keys(completed.data ?? {}).sort(), [...Object.values(CREDENTIAL_KEYS), 'broker-password'].sort());
    for (const [key, value] of Object.entries(older)) assert.equal(completed.data![key], value, `${key} unchanged`);
    for (const key of Object.values(CREDENTIAL_KEYS).filter((k) => !(k in older))) {
      const added = Buffer.from(completed.data![key]!, 'base64').toString();
      assert.equal(Buffer.from(added, 'base64url').length, 32, `${key} is a fresh credential`);
    }
    assert.equal(new Set(Object.values(completed.data!)).size, Object.keys(completed.data!).length, 'no key a copy of another');

    await reconcile();
    assert.equal(credentialWrites(cluster).length, writesBefore + 1, 'complete: not written again');
  });
});

const ROTATION = 'cp.iotservices.io/credentials-rotation';
const templateRotations = (cluster: FakeClient) =>
  Object.fromEntries(
    [
      ...['core', 'processing', 'gateway'].map((name) => [name, cluster.peek<KubeObject & TemplateOwner>(Kinds.Deployment, name, INSTANCE_NAMESPACE)] as const),
      ...['broker', 'database'].map((name) => [name, cluster.peek<KubeObject & TemplateOwner>(Kinds.StatefulSet, name, INSTANCE_NAMESPACE)] as const),
    ].map(([name, workload]) => [name, workload?.spec.template.metadata?.annotations?.[ROTATION]]),
  );
type TemplateOwner = { spec: { template: { metadata?: { annotations?: Record<string, string> } } } };

/** Marks the StatefulSets rolled out, as their controller would once every pod is on the current revision and ready. */
async function rolledOut(cluster: FakeClient, ...names: string[]): Promise<void> {
  for (const name of names) {
    const generation = cluster.peek(Kinds.StatefulSet, name, INSTANCE_NAMESPACE)!.metadata.generation;
    const status = { observedGeneration: generation, replicas: 1, readyReplicas: 1, updatedReplicas: 1, currentRevision: `${name}-${generation}`, updateRevision: `${name}-${generation}` };
    await cluster.patchStatus(Kinds.StatefulSet, name, INSTANCE_NAMESPACE, { status });
  }
}

describe('IoTService reconcile: rotating the credentials', () => {
  it('a new value of cp.iotservices.io/rotate-credentials makes every credential afresh, records it on the Secret and every pod template (so every workload rolls), once', async () => {
    const events: string[] = [];
    const { cluster, reconcile } = setup({ onEvent: (reason) => events.push(reason) });
    await reconcile();
    const before = credentialsOf(cluster)!;
    assert.deepEqual(Object.values(templateRotations(cluster)), [undefined, undefined, undefined, undefined, undefined], 'no rotation yet: no annotation');

    await cluster.patch(IoTServiceType, 'tenant-a', TEST_CONFIG.operatorName, { metadata: { annotations: { 'cp.iotservices.io/rotate-credentials': '2026-03-01' } } });
    await reconcile();
    const after = credentialsOf(cluster)!;
    assert.equal(after.metadata.annotations?.[ROTATION], '2026-03-01', 'the rotation recorded on the Secret');
    assert.deepEqual(Object.keys(after.data!).sort(), Object.keys(before.data!).sort());
    for (const key of Object.keys(before.data!)) assert.notEqual(after.data![key], before.data![key], `${key} made afresh`);
    assert.deepEqual(
      templateRotations(cluster),
      { core: undefined, processing: undefined, gateway: undefined, broker: '2026-03-01', database: '2026-03-01' },
      'broker and database roll first: the Deployments wait until they are rolled out',
    );
    assert.deepEqual(events.filter((e) => e === 'CredentialsRotated'), ['CredentialsRotated']);
    await rolledOut(cluster, 'broker', 'database');
    await reconcile();
    assert.deepEqual(templateRotations(cluster), { core: '2026-03-01', processing: '2026-03-01', gateway: '2026-03-01', broker: '2026-03-01', database: '2026-03-01' });

    const writes = credentialWrites(cluster).length;
    await reconcile();
    assert.equal(credentialWrites(cluster).length, writes, 'the same rotation again: nothing written');
    assert.deepEqual(credentialsOf(cluster)!.data, after.data);

    await cluster.patch(IoTServiceType, 'tenant-a', TEST_CONFIG.operatorName, { metadata: { annotations: { 'cp.iotservices.io/rotate-credentials': null } } });
    await reconcile();
    assert.equal(credentialWrites(cluster).length, writes, 'the annotation removed: no rotation');
    assert.deepEqual(credentialsOf(cluster)!.data, after.data);
    assert.equal(templateRotations(cluster).gateway, '2026-03-01', 'and no roll: the templates keep the recorded rotation');
    assert.deepEqual(events.filter((e) => e === 'CredentialsRotated'), ['CredentialsRotated']);
  });

  it('an IoTService asking for a rotation from its start gets its Secret made once, recording it, and not rotated again', async () => {
    const { cluster, reconcile } = setup({ annotations: { 'cp.iotservices.io/rotate-credentials': 'first' } });
    await reconcile();
    const created = credentialsOf(cluster)!;
    assert.equal(created.metadata.annotations?.[ROTATION], 'first');
    await reconcile();
    assert.deepEqual(credentialsOf(cluster)!.data, created.data);
    assert.equal(credentialWrites(cluster).length, 1, 'only the creation');
  });
});

describe('IoTService reconcile: deletion', () => {
  it('an IoTService the cache still holds with its finalizer but the API server no longer has is finalized, not retried', async () => {
    const cluster = new SlowClient();
    // The cache's last view: being deleted, our finalizer on it. The API server has neither the
    // IoTService (an earlier reconcile removed the finalizer) nor its namespace.
    const live = iotService('tenant-a', { version: '2.4.1' });
    const stale = { ...live, metadata: { ...live.metadata, deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: [FINALIZER] } } as unknown as KubeObject;
    const cacheView = new FakeClient();
    cacheView.seed(IoTServiceType, stale);
    const reconciler = iotReconciler({ ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1 });
    assert.equal(await reconciler({ namespace: TEST_CONFIG.operatorName, name: 'tenant-a' }, cluster.reconcileContext(cacheView.cacheReader())), undefined, 'done: no requeue, no error');
  });
});
