/**
 * How the pods of a database of three replicas (Patroni) are replaced when their template changes:
 * its StatefulSet has `updateStrategy: OnDelete` (statefulsets.ts) and the operator replaces the
 * pods itself, one step per reconcile — the standbys first, then a Patroni switchover away from the
 * primary, then the former primary, now a standby. The primary is never killed while it is
 * primary, so a roll pauses writes only for the switchover, not for a failover's lock expiry. One
 * replica keeps the StatefulSet's own RollingUpdate and is not looked at here.
 *
 * Guarantees:
 * - A pod is outdated when its `controller-revision-hash` label differs from the StatefulSet's
 *   `status.updateRevision`.
 * - `nextDatabaseRollStep` (pure) acts only when the StatefulSet's controller has observed its
 *   current generation and all its replicas exist, are Ready and not being deleted, each labelled
 *   by Patroni, exactly one of them primary, and every standby streams from it (Patroni's member
 *   state in the pod's `status` annotation says `replication_state: streaming`; a standby still
 *   catching up after a restart, or following a new timeline, does not yet). A switchover is asked
 *   for only once Patroni names a synchronous standby (ConfigMap database-sync): it refuses one
 *   without. Then, while a standby is outdated, it deletes one
 *   outdated standby (one that is not the synchronous standby first: Patroni then need not move
 *   synchronous replication while the other is away); when only the primary is outdated, it asks
 *   for a switchover from it. Once the former primary's pod is labelled a standby, it is an
 *   outdated standby like any. Never two pods at once, never the pod labelled primary.
 * - `rollDatabase` takes that step: the pod is deleted conditional on its UID; the switchover is
 *   Patroni's failover key, written through the API server as `patronictl switchover` writes it
 *   (Patroni 3.0 to 4.0, patroni/dcs/kubernetes.py `manual_failover`): annotation `leader` = the
 *   primary's name on ConfigMap database-failover, `member` and `scheduled_at` removed — under
 *   synchronous_mode Patroni then promotes the synchronous standby. The ConfigMap is created, with
 *   the labels Patroni selects its ConfigMaps by, when missing; it is written only when it does
 *   not name that primary already. Nothing is read from the API server while the StatefulSet has
 *   every replica on its update revision. While some are not, it returns the Waiting the status
 *   reports (Processing, "Rolling the database: …"), and the reconcile looks again within
 *   DATABASE_ROLL_RECHECK_MS.
 * - `onDeleteChangeover`: the merge patch that moves an existing StatefulSet onto OnDelete. The API
 *   server refuses `rollingUpdate` beside OnDelete, and server-side apply cannot remove the
 *   `rollingUpdate` the API server defaulted (no field manager owns it): a merge patch removes it.
 */
import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { ifFound, Kinds, type KubeObject, type ReconcileContext } from '@iot-operator/runtime';
import { REVISION_LABEL } from './pod-view.ts';
import { componentSelector, PATRONI_CONFIGMAPS, PRIMARY_ROLE, ROLE_LABEL, runsPatroni, STANDBY_ROLE, type Instance } from './resources/index.ts';
import { movingToUpdateRevision } from './status/pod-health.ts';
import type { Waiting } from './status/status.ts';

/** How soon a reconcile looks at a rolling database again, whatever events come. */
export const DATABASE_ROLL_RECHECK_MS = 5_000;

/** What the status says while the database's pods are being replaced. */
export const DATABASE_ROLLING: Waiting = {
  reason: 'DatabaseRolling',
  message: 'Rolling the database: its standbys are replaced one at a time, then Patroni switches over to a standby and the former primary is replaced.',
};

/** A database pod as the roll sees it. */
export interface DatabaseMember {
  name: string;
  uid: string;
  /** Its `controller-revision-hash`. */
  revision: string | undefined;
  /** Patroni's ROLE_LABEL. */
  role: string | undefined;
  ready: boolean;
  deleting: boolean;
  /** A standby receiving the primary's WAL as Patroni last saw it. */
  streaming: boolean;
}

export type DatabaseRollStep =
  /** No pod is outdated: nothing to do. */
  | { kind: 'rolledOut' }
  /** Pods are outdated, but not every member is ready (or the StatefulSet not observed): nothing now. */
  | { kind: 'wait' }
  | { kind: 'delete'; member: DatabaseMember }
  | { kind: 'switchover'; leader: string };

export function databaseMember(pod: V1Pod): DatabaseMember {
  const metadata = pod.metadata ?? {};
  return {
    name: metadata.name ?? '',
    uid: metadata.uid ?? '',
    revision: metadata.labels?.[REVISION_LABEL],
    role: metadata.labels?.[ROLE_LABEL],
    ready: pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    deleting: !!metadata.deletionTimestamp,
    streaming: patroniState(metadata.annotations?.['status'])?.replication_state === 'streaming',
  };
}

/** The member state Patroni keeps in a pod's `status` annotation (JSON), if readable. */
function patroniState(annotation: string | undefined): { replication_state?: unknown } | undefined {
  try {
    const state: unknown = JSON.parse(annotation ?? '');
    return typeof state === 'object' && state !== null ? state : undefined;
  } catch {
    return undefined;
  }
}

/** The one step to take now; `synchronous`: the members Patroni's database-sync names. */
export function nextDatabaseRollStep(statefulSet: V1StatefulSet, members: readonly DatabaseMember[], synchronous: readonly string[]): DatabaseRollStep {
  const updateRevision = statefulSet.status?.updateRevision;
  const generation = statefulSet.metadata?.generation;
  if (!updateRevision || (generation !== undefined && (statefulSet.status?.observedGeneration ?? 0) < generation)) return { kind: 'wait' };
  const outdated = members.filter((m) => m.revision !== updateRevision);
  if (outdated.length === 0) return { kind: 'rolledOut' };
  const settled =
    members.length === (statefulSet.spec?.replicas ?? 1) &&
    members.every((m) => m.ready && !m.deleting && (m.role === PRIMARY_ROLE || (m.role === STANDBY_ROLE && m.streaming)));
  const primaries = members.filter((m) => m.role === PRIMARY_ROLE);
  if (!settled || primaries.length !== 1) return { kind: 'wait' };
  const standbys = outdated.filter((m) => m.role === STANDBY_ROLE).sort((a, b) => Number(synchronous.includes(a.name)) - Number(synchronous.includes(b.name)));
  if (standbys[0]) return { kind: 'delete', member: standbys[0] };
  if (!members.some((m) => m.role === STANDBY_ROLE && synchronous.includes(m.name))) return { kind: 'wait' };
  return { kind: 'switchover', leader: primaries[0]!.name };
}

/** The merge patch that changes `observed` over to the OnDelete `desired` asks for, or undefined when none is needed. */
export function onDeleteChangeover(desired: V1StatefulSet, observed: V1StatefulSet): object | undefined {
  if (desired.spec?.updateStrategy?.type !== 'OnDelete' || !observed.spec?.updateStrategy?.rollingUpdate) return undefined;
  return { spec: { updateStrategy: { type: 'OnDelete', rollingUpdate: null } } };
}

/** What taking a step needs of the reconcile. */
export interface DatabaseRollContext {
  client: ReconcileContext['client'];
  log: ReconcileContext['log'];
  /** Deletes the pod (conditional on its UID), `purpose` naming why for a 403. */
  deletePod(pod: { name: string; uid: string }, purpose: string): Promise<void>;
  /** A Normal Event on the IoTService. */
  event(reason: string, message: string): void;
}

/** Takes the next step of the database's roll, if it rolls; what the status should say while it does. */
export async function rollDatabase(ctx: DatabaseRollContext, instance: Instance, statefulSet: V1StatefulSet | undefined): Promise<Waiting | undefined> {
  if (!runsPatroni(instance) || !statefulSet || statefulSet.spec?.updateStrategy?.type !== 'OnDelete' || !movingToUpdateRevision(statefulSet)) return undefined;
  const namespace = instance.namespace;
  const selector = Object.entries(componentSelector(instance, 'database')).map(([k, v]) => `${k}=${v}`).join(',');
  const { items } = await ctx.client.list<V1Pod & KubeObject>(Kinds.Pod, { namespace, labelSelector: selector });
  const sync = await configMap(ctx, namespace, PATRONI_CONFIGMAPS.sync);
  const synchronous = (sync?.metadata.annotations?.['sync_standby'] ?? '').split(',').filter((name) => name !== '');
  const step = nextDatabaseRollStep(statefulSet, items.map(databaseMember), synchronous);
  const revision = statefulSet.status?.updateRevision;
  if (step.kind === 'rolledOut') return undefined;
  if (step.kind === 'delete') {
    await ctx.deletePod(step.member, `replace database pod ${step.member.name} with one of the current revision`);
    ctx.log.info({ pod: step.member.name, revision }, 'database roll: standby deleted, its StatefulSet recreates it on the update revision');
    ctx.event('DatabasePodReplaced', `Deleted database standby ${step.member.name}; its StatefulSet recreates it on revision ${revision}.`);
  } else if (step.kind === 'switchover') {
    await requestSwitchover(ctx, instance, step.leader);
  }
  return DATABASE_ROLLING;
}

/** Patroni's failover key naming `leader`, unless it names it already. */
async function requestSwitchover(ctx: DatabaseRollContext, instance: Instance, leader: string): Promise<void> {
  const name = PATRONI_CONFIGMAPS.failover;
  const current = await configMap(ctx, instance.namespace, name);
  if (current?.metadata.annotations?.['leader'] === leader) return;
  if (current) {
    await ctx.client.patch(Kinds.ConfigMap, name, instance.namespace, { metadata: { annotations: { leader, member: null, scheduled_at: null } } }, 'merge');
  } else {
    await ctx.client.create(Kinds.ConfigMap, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: instance.namespace, labels: componentSelector(instance, 'database'), annotations: { leader } } });
  }
  ctx.log.info({ leader }, 'database roll: switchover asked of Patroni, the primary being the only outdated member');
  ctx.event('DatabaseSwitchover', `Asked Patroni to switch over from primary ${leader} to the synchronous standby, so that ${leader} can be replaced as a standby.`);
}

function configMap(ctx: DatabaseRollContext, namespace: string, name: string): Promise<KubeObject | undefined> {
  return ifFound(ctx.client.get(Kinds.ConfigMap, name, namespace));
}
