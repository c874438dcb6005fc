/**
 * How a database of three replicas rolls (database-roll.ts): the operator replaces its pods one at
 * a time, only while all three are ready — the standbys first (the synchronous one last), then a
 * switchover asked of Patroni through its failover key, then the former primary once Patroni
 * labels it a standby. Each rule is shown on the pure step function; the switchover's write and
 * the changeover of an existing StatefulSet to OnDelete on what they send the API server.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1StatefulSet } from '@kubernetes/client-node';
import { ApiError, type KubeObject } from '@iot-operator/runtime';
import { databaseMember, nextDatabaseRollStep, onDeleteChangeover, rollDatabase, type DatabaseMember, type DatabaseRollContext } from '../src/database-roll.ts';
import { testInstance } from './fixtures.ts';

const OLD = 'database-old';
const NEW = 'database-new';

function statefulSet(status: Partial<NonNullable<V1StatefulSet['status']>> = {}, generation = 2): V1StatefulSet {
  return {
    metadata: { name: 'database', generation },
    spec: { replicas: 3, serviceName: 'database', selector: {}, template: {}, updateStrategy: { type: 'OnDelete' } },
    status: { observedGeneration: 2, replicas: 3, readyReplicas: 3, updatedReplicas: 0, currentRevision: OLD, updateRevision: NEW, ...status },
  };
}

function member(ordinal: number, role: 'master' | 'replica' | undefined, revision = OLD, more: Partial<DatabaseMember> = {}): DatabaseMember {
  return { name: `database-${ordinal}`, uid: `uid-${ordinal}-${revision}`, revision, role, ready: true, deleting: false, streaming: role === 'replica', ...more };
}

/** database-0 primary, database-1 and -2 standbys, all on the old revision. */
const allOld = () => [member(0, 'master'), member(1, 'replica'), member(2, 'replica')];

describe('database roll: the step', () => {
  it('an outdated standby is deleted first, never the primary, the synchronous standby after the other', () => {
    assert.deepEqual(nextDatabaseRollStep(statefulSet(), allOld(), ['database-1']), { kind: 'delete', member: member(2, 'replica') });
    assert.deepEqual(nextDatabaseRollStep(statefulSet(), allOld(), ['database-2']), { kind: 'delete', member: member(1, 'replica') });
    const oneReplaced = [member(0, 'master'), member(1, 'replica'), member(2, 'replica', NEW)];
    assert.deepEqual(nextDatabaseRollStep(statefulSet(), oneReplaced, ['database-1']), { kind: 'delete', member: member(1, 'replica') });
  });

  it('when only the primary is outdated, a switchover from it; once Patroni labels it a standby, it is deleted', () => {
    const primaryLeft = [member(0, 'master'), member(1, 'replica', NEW), member(2, 'replica', NEW)];
    assert.deepEqual(nextDatabaseRollStep(statefulSet(), primaryLeft, ['database-1']), { kind: 'switchover', leader: 'database-0' });
    const switched = [member(0, 'replica'), member(1, 'master', NEW), member(2, 'replica', NEW)];
    assert.deepEqual(nextDatabaseRollStep(statefulSet(), switched, ['database-2']), { kind: 'delete', member: member(0, 'replica') });
  });

  it('no switchover while Patroni names no synchronous standby (it would refuse it)', () => {
    const primaryLeft = [member(0, 'master'), member(1, 'replica', NEW), member(2, 'replica', NEW)];
    assert.deepEqual(nextDatabaseRollStep(statefulSet(), primaryLeft, []), { kind: 'wait' });
    assert.deepEqual(nextDatabaseRollStep(statefulSet(), primaryLeft, ['database-0']), { kind: 'wait' }, 'the primary itself is no synchronous standby');
  });

  it("reads whether a standby streams from Patroni's member state on its pod", () => {
    const pod = (status: string | undefined) => ({ metadata: { name: 'database-1', uid: 'u', labels: { role: 'replica' }, ...(status === undefined ? {} : { annotations: { status } }) } });
    assert.equal(databaseMember(pod('{"state":"running","role":"replica","replication_state":"streaming"}')).streaming, true);
    assert.equal(databaseMember(pod('{"state":"running","role":"replica"}')).streaming, false, 'running, not streaming');
    assert.equal(databaseMember(pod('{"state":"running","role":"replica","replication_state":"in archive recovery"}')).streaming, false);
    assert.equal(databaseMember(pod('not json')).streaming, false);
    assert.equal(databaseMember(pod(undefined)).streaming, false);
  });

  it('nothing outdated: rolled out', () => {
    const all = [member(0, 'replica', NEW), member(1, 'master', NEW), member(2, 'replica', NEW)];
    assert.deepEqual(nextDatabaseRollStep(statefulSet({ updatedReplicas: 3 }), all, []), { kind: 'rolledOut' });
  });

  it('nothing is done while a member is missing, not ready, being deleted or unlabelled, or there is not exactly one primary', () => {
    const cases: Array<[string, DatabaseMember[]]> = [
      ['a pod missing (being recreated)', [member(0, 'master'), member(1, 'replica')]],
      ['a standby not ready', [member(0, 'master'), member(1, 'replica'), member(2, 'replica', NEW, { ready: false })]],
      ['a standby being deleted', [member(0, 'master'), member(1, 'replica'), member(2, 'replica', OLD, { deleting: true })]],
      ['a standby not streaming (catching up, or on the former timeline after a failover)', [member(0, 'master'), member(1, 'replica'), member(2, 'replica', NEW, { streaming: false })]],
      ['a member Patroni has not labelled', [member(0, 'master'), member(1, 'replica'), member(2, undefined, NEW)]],
      ['no primary (a failover under way)', [member(0, 'replica'), member(1, 'replica'), member(2, 'replica', NEW)]],
      ['two pods labelled primary', [member(0, 'master'), member(1, 'master'), member(2, 'replica')]],
      ['the primary not ready', [member(0, 'master', OLD, { ready: false }), member(1, 'replica', NEW), member(2, 'replica', NEW)]],
    ];
    for (const [what, members] of cases) assert.deepEqual(nextDatabaseRollStep(statefulSet(), members, []), { kind: 'wait' }, what);
  });

  it('nothing is done before the StatefulSet controller has observed the current generation and named its update revision', () => {
    assert.deepEqual(nextDatabaseRollStep(statefulSet({}, 3), allOld(), []), { kind: 'wait' }, 'generation not observed');
    assert.deepEqual(nextDatabaseRollStep(statefulSet({ updateRevision: undefined }), allOld(), []), { kind: 'wait' }, 'no update revision');
  });
});

/** A client answering list, get, patch and create as a test says, recording the writes. */
function recordingContext(pods: DatabaseMember[], configMaps: Record<string, Record<string, string>>) {
  const writes: unknown[] = [];
  const deleted: string[] = [];
  const client = {
    list: async () => ({
      items: pods.map((m) => ({
        metadata: {
          name: m.name,
          uid: m.uid,
          labels: { 'controller-revision-hash': m.revision, role: m.role },
          annotations: { status: JSON.stringify({ state: 'running', role: m.role, ...(m.streaming ? { replication_state: 'streaming' } : {}) }) },
        },
        status: { conditions: [{ type: 'Ready', status: m.ready ? 'True' : 'False' }] },
      })),
    }),
    get: async (_type: unknown, name: string) => {
      const annotations = configMaps[name];
      if (!annotations) throw new ApiError(404, 'NotFound', `configmaps "${name}" not found`);
      return { metadata: { name, annotations } } as KubeObject;
    },
    patch: async (_type: unknown, name: string, namespace: string, body: unknown, patchType: string) => writes.push({ patch: name, namespace, body, patchType }),
    create: async (_type: unknown, body: KubeObject) => writes.push({ create: body }),
  };
  const context: DatabaseRollContext = {
    client: client as unknown as DatabaseRollContext['client'],
    log: { info: () => {} } as unknown as DatabaseRollContext['log'],
    deletePod: async (pod) => void deleted.push(pod.uid),
    event: () => {},
  };
  return { context, writes, deleted };
}

describe('database roll: what it sends', () => {
  const instance = testInstance({ database: { replicas: 3 } });
  const primaryLeft = [member(0, 'master'), member(1, 'replica', NEW), member(2, 'replica', NEW)];

  it("the switchover is Patroni's failover key naming the primary on database-failover, created with Patroni's labels when missing", async () => {
    const missing = recordingContext(primaryLeft, { 'database-sync': { sync_standby: 'database-1' } });
    assert.ok(await rollDatabase(missing.context, instance, statefulSet({ updatedReplicas: 2 })), 'the status says the database rolls');
    assert.deepEqual(missing.writes, [
      {
        create: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'database-failover', namespace: instance.namespace, labels: { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': 'database' }, annotations: { leader: 'database-0' } },
        },
      },
    ]);
    const stale = recordingContext(primaryLeft, { 'database-sync': { sync_standby: 'database-1' }, 'database-failover': { leader: 'database-2', member: 'database-1' } });
    await rollDatabase(stale.context, instance, statefulSet({ updatedReplicas: 2 }));
    assert.deepEqual(stale.writes, [{ patch: 'database-failover', namespace: instance.namespace, body: { metadata: { annotations: { leader: 'database-0', member: null, scheduled_at: null } } }, patchType: 'merge' }]);
    const asked = recordingContext(primaryLeft, { 'database-sync': { sync_standby: 'database-1' }, 'database-failover': { leader: 'database-0' } });
    await rollDatabase(asked.context, instance, statefulSet({ updatedReplicas: 2 }));
    assert.deepEqual(asked.writes, [], 'asked already: not written again');
    assert.deepEqual([missing.deleted, stale.deleted, asked.deleted], [[], [], []], 'the primary is never deleted');
  });

  it('a standby is deleted by its UID, the asynchronous one first as database-sync says; nothing is read or done while every replica is updated, with one replica, or before OnDelete', async () => {
    const rolling = recordingContext(allOld(), { 'database-sync': { leader: 'database-0', sync_standby: 'database-1' } });
    await rollDatabase(rolling.context, instance, statefulSet());
    assert.deepEqual(rolling.deleted, ['uid-2-database-old'], 'the standby database-sync does not name');
    const done = recordingContext(allOld(), {});
    assert.equal(await rollDatabase(done.context, instance, statefulSet({ updatedReplicas: 3 })), undefined);
    const one = recordingContext(allOld(), {});
    assert.equal(await rollDatabase(one.context, testInstance({ database: { replicas: 1 } }), statefulSet()), undefined);
    const rollingUpdate = recordingContext(allOld(), {});
    const notChangedOver = statefulSet();
    notChangedOver.spec!.updateStrategy = { type: 'RollingUpdate' };
    assert.equal(await rollDatabase(rollingUpdate.context, instance, notChangedOver), undefined, 'not changed over to OnDelete yet: its controller rolls it');
    assert.deepEqual([done.deleted, one.deleted, rollingUpdate.deleted], [[], [], []]);
  });

  it('an existing StatefulSet is changed over to OnDelete by a merge patch that drops its rollingUpdate', () => {
    const desired: V1StatefulSet = { spec: { selector: {}, serviceName: 'database', template: {}, updateStrategy: { type: 'OnDelete' } } };
    const existing: V1StatefulSet = { spec: { selector: {}, serviceName: 'database', template: {}, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 0 } } } };
    assert.deepEqual(onDeleteChangeover(desired, existing), { spec: { updateStrategy: { type: 'OnDelete', rollingUpdate: null } } });
    assert.equal(onDeleteChangeover(desired, desired), undefined, 'changed over already');
    assert.equal(onDeleteChangeover({ spec: { ...desired.spec!, updateStrategy: undefined } }, existing), undefined, 'one replica keeps RollingUpdate');
  });
});
