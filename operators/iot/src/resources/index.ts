/**
 * Everything an instance consists of, in the order it is applied.
 *
 * Guarantees: `desiredChildren` is a pure, deterministic function of the resolved instance, the
 * landscape's image-pull-secret, a set of fresh credentials and the gateway's TLS material. It lists every child exactly once:
 * the Namespace first (everything else lives in it), then the NetworkPolicies (pods are isolated
 * from their first moment), the ResourceQuota and LimitRange (every pod is admitted under them),
 * Secrets (with the gateway's TLS Secret when it serves TLS, and its CA's when that is the instance's own; with backups backup-ca and backup-tls; with a restore restore-tls), ConfigMaps (config, and the gateway CA when it serves TLS), Services, a PodDisruptionBudget per component, with three database replicas Patroni's ServiceAccount, Role and RoleBinding (patroni.ts), StatefulSets (with backups the repository host's, backup.ts) and Deployments. Each child
 * has apiVersion, kind, metadata.name and (except the Namespace) metadata.namespace set, and the
 * instance labels. The child marked `generated` (the credentials) is created when missing and
 * afterwards only completed, never compared or applied: the keys it lacks are added (secrets.ts
 * `credentialsPatch`), the ones it has never change unless a new rotation is asked for, which
 * makes them all afresh and, put on every pod template, rolls every workload; all others are kept
 * equal to their desired form.
 * `writeStages` groups them into the stages they are written in: within a stage children are
 * independent; a stage starts only once the one before it is written, so no pod is created
 * before its namespace's NetworkPolicies, Secrets, ConfigMaps and Services exist.
 */

import type {
  KubernetesObject,
  V1ConfigMap,
  V1ResourceQuota,
  V1Deployment,
  V1Namespace,
  V1PodDisruptionBudget,
  V1Role,
  V1RoleBinding,
  V1Secret,
  V1Service,
  V1ServiceAccount,
  V1StatefulSet,
} from '@kubernetes/client-node';
import { COMPONENTS } from '../api/iotservice.ts';
import { desiredBackupSecrets, desiredBackupService, desiredBackupStatefulSet, type S3Credentials } from './backup.ts';
import { configChecksum, desiredConfigMap } from './configmap.ts';
import type { KeptEmptyDirs } from './data-volume.ts';
import { desiredCoreDeployment, desiredGatewayDeployment, desiredProcessingDeployment } from './deployments.ts';
import { desiredDisruptionBudget } from './disruption-budgets.ts';
import type { Instance } from './instance.ts';
import { desiredNamespace } from './namespace.ts';
import { desiredLimitRange, desiredResourceQuota, type LimitRange } from './namespace-limits.ts';
import {
  desiredBackupStatusPolicy,
  desiredComponentPeersPolicies,
  desiredCoreApplicationsPolicy,
  desiredDatabaseApiServerPolicy,
  desiredEgressPolicy,
  desiredGatewayDevicesPolicy,
  desiredInstanceIsolationPolicy,
  desiredOperatorMonitoringPolicy,
  type NetworkPolicy,
} from './network-policies.ts';
import { desiredPatroniAccess } from './patroni.ts';
import { desiredRestoreTlsSecret, type PendingRestore, type RestorePeers } from './restore.ts';
import { desiredCredentialsSecret, desiredImagePullSecret, type IoTCredentials } from './secrets.ts';
import { desiredGatewayCaConfigMap, desiredGatewayCaSecret, desiredGatewayTlsSecret, servesTls, type GatewayTlsMaterial } from './gateway-tls.ts';
import type { CaCertificates } from './instance-ca.ts';
import {
  desiredBrokerClientService,
  desiredBrokerService,
  desiredCoreService,
  desiredDatabaseClientService,
  desiredDatabaseService,
  desiredGatewayService,
} from './services.ts';
import { desiredBrokerStatefulSet, desiredDatabaseStatefulSet } from './statefulsets.ts';

export type ChildObject =
  | V1Namespace
  | NetworkPolicy
  | V1ResourceQuota
  | LimitRange
  | V1Secret
  | V1ConfigMap
  | V1Service
  | V1PodDisruptionBudget
  | V1ServiceAccount
  | V1Role
  | V1RoleBinding
  | V1StatefulSet
  | V1Deployment;

/** A child as it is sent with server-side apply: identity fields are always present. */
export type DesiredObject = ChildObject & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels: Record<string, string> };
};

export interface DesiredChild {
  object: DesiredObject;
  /** The generated credentials: created when missing, then only completed (secrets.ts `credentialsPatch`), never applied. */
  generated: boolean;
}

/** What desired state depends on beyond the instance itself. */
export interface ChildSources {
  /** The landscape's `image-pull-secret` as observed in the operator namespace. */
  imagePullSecret: V1Secret;
  /** Fresh credentials, used only for what `iot-credentials` lacks: all of it when it does not exist yet (see `generateCredentials`), or all on a rotation. */
  credentials: IoTCredentials;
  /** The rotation the credentials are to be made for (secrets.ts `credentialsRotation`), if any: recorded on the Secret and every pod template. */
  credentialsRotation?: string;
  /** The components whose existing StatefulSet keeps its emptyDir (data-volume.ts `dataVolume`). */
  keptEmptyDirs: KeptEmptyDirs;
  /** The broker StatefulSet exists with OrderedReady (broker-rollout.ts `madeOrderedReady`): it keeps it. */
  keptOrderedReadyBroker?: boolean;
  /** The gateway's CA and server certificate (gateway-tls.ts), kept or renewed by the reconcile or issued by cert-manager; only for an instance that `servesTls`. */
  gatewayTls?: GatewayTlsMaterial;
  /** The backups' CA and the certificate of both ends (backup.ts), kept or renewed by the reconcile; only for an instance with `spec.backup`. */
  backupCertificates?: CaCertificates;
  /** With spec.backup.target.s3: its credentials as read from its Secret (backup.ts); required then. */
  backupS3Credentials?: S3Credentials;
  /** With spec.restore, while the restore is not done: the client certificate of the source's backup CA, or the bucket's credentials (restore.ts); undefined: the restore is done. */
  pendingRestore?: PendingRestore;
  /** Who this instance's database reaches, and whose database its repository host admits, for restores (restore.ts). */
  restorePeers?: RestorePeers;
}

export interface DesiredChildren {
  /** The instance namespace (also the first child). */
  namespace: string;
  /** Every child, in apply order. */
  children: DesiredChild[];
}

/** The kinds of children, for watches (all carry the landscape labels; see `landscapeSelector`). */
export const CHILD_KINDS: ReadonlyArray<{ apiVersion: string; kind: string; plural: string; namespaced: boolean }> = [
  { apiVersion: 'v1', kind: 'Namespace', plural: 'namespaces', namespaced: false },
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', plural: 'networkpolicies', namespaced: true },
  { apiVersion: 'v1', kind: 'ResourceQuota', plural: 'resourcequotas', namespaced: true },
  { apiVersion: 'v1', kind: 'LimitRange', plural: 'limitranges', namespaced: true },
  { apiVersion: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true },
  { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
  { apiVersion: 'v1', kind: 'Service', plural: 'services', namespaced: true },
  { apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', plural: 'poddisruptionbudgets', namespaced: true },
  { apiVersion: 'v1', kind: 'ServiceAccount', plural: 'serviceaccounts', namespaced: true },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', plural: 'roles', namespaced: true },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', plural: 'rolebindings', namespaced: true },
  { apiVersion: 'apps/v1', kind: 'StatefulSet', plural: 'statefulsets', namespaced: true },
  { apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments', namespaced: true },
];

export function desiredChildren(instance: Instance, sources: ChildSources): DesiredChildren {
  const configMap = desiredConfigMap(instance, sources.keptEmptyDirs);
  const checksum = configChecksum(configMap.data ?? {});
  const apply = (object: ChildObject): DesiredChild => ({ object: object as DesiredObject, generated: false });
  const optional = (object: ChildObject | undefined): DesiredChild[] => (object ? [apply(object)] : []);
  const tls = servesTls(instance) ? sources.gatewayTls : undefined;
  if (servesTls(instance) && !tls) throw new Error(`${instance.namespace}: the gateway serves TLS but no TLS material was given`);
  return {
    namespace: instance.namespace,
    children: [
      apply(desiredNamespace(instance, instance.namespace)),
      apply(desiredInstanceIsolationPolicy(instance)),
      apply(desiredGatewayDevicesPolicy(instance)),
      apply(desiredCoreApplicationsPolicy(instance)),
      apply(desiredEgressPolicy(instance)),
      apply(desiredOperatorMonitoringPolicy(instance)),
      ...optional(desiredDatabaseApiServerPolicy(instance)),
      ...desiredComponentPeersPolicies(instance, sources.restorePeers).map(apply),
      ...optional(desiredBackupStatusPolicy(instance)),
      apply(desiredResourceQuota(instance)),
      apply(desiredLimitRange(instance)),
      apply(desiredImagePullSecret(instance, sources.imagePullSecret)),
      { object: desiredCredentialsSecret(instance, sources.credentials, sources.credentialsRotation) as DesiredObject, generated: true },
      ...(tls?.instanceCa ? [apply(desiredGatewayCaSecret(instance, tls.instanceCa))] : []),
      ...(tls ? [apply(desiredGatewayTlsSecret(instance, tls))] : []),
      ...desiredBackupSecrets(instance, sources.backupCertificates, sources.backupS3Credentials).map(apply),
      ...optional(desiredRestoreTlsSecret(instance, sources.pendingRestore)),
      apply(configMap),
      ...(tls ? [apply(desiredGatewayCaConfigMap(instance, tls))] : []),
      apply(desiredBrokerService(instance)),
      apply(desiredDatabaseService(instance)),
      apply(desiredBrokerClientService(instance)),
      apply(desiredDatabaseClientService(instance)),
      apply(desiredCoreService(instance)),
      apply(desiredGatewayService(instance)),
      ...optional(desiredBackupService(instance)),
      ...COMPONENTS.map((component) => apply(desiredDisruptionBudget(instance, component))),
      ...desiredPatroniAccess(instance).map(apply),
      apply(desiredBrokerStatefulSet(instance, sources.keptEmptyDirs, sources.credentialsRotation, sources.keptOrderedReadyBroker)),
      apply(desiredDatabaseStatefulSet(instance, sources.keptEmptyDirs, sources.credentialsRotation)),
      ...optional(desiredBackupStatefulSet(instance, sources.backupS3Credentials)),
      apply(desiredCoreDeployment(instance, checksum, sources.credentialsRotation)),
      apply(desiredProcessingDeployment(instance, checksum, sources.credentialsRotation)),
      apply(desiredGatewayDeployment(instance, checksum, sources.credentialsRotation)),
    ],
  };
}

/** The stage of each kind of child: the namespace, then what pods rely on, then the workloads. */
const WRITE_STAGE_OF_KIND: Readonly<Record<string, number>> = {
  Namespace: 0,
  NetworkPolicy: 1,
  ResourceQuota: 1,
  LimitRange: 1,
  Secret: 1,
  ConfigMap: 1,
  Service: 1,
  PodDisruptionBudget: 1,
  ServiceAccount: 1,
  Role: 1,
  RoleBinding: 1,
  StatefulSet: 2,
  Deployment: 2,
};

/** The indexes of `children`, grouped into write stages, earliest first, each in the children's order. */
export function writeStages(children: readonly DesiredChild[]): number[][] {
  const stages: number[][] = [];
  children.forEach((child, index) => {
    const stage = WRITE_STAGE_OF_KIND[child.object.kind];
    if (stage === undefined) throw new Error(`no write stage for kind ${child.object.kind}`);
    (stages[stage] ??= []).push(index);
  });
  return stages.filter((indexes) => indexes.length > 0);
}

/** `kind/namespace/name` (`kind//name` for cluster-scoped objects): matches a desired child to an observed one. */
export function childKey(object: KubernetesObject): string {
  return `${object.kind ?? ''}/${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
}

export * from './backup.ts';
export * from './broker-rollout.ts';
export * from './configmap.ts';
export * from './data-volume.ts';
export * from './deployments.ts';
export * from './disruption-budgets.ts';
export * from './gateway-certificate.ts';
export * from './gateway-tls.ts';
export * from './instance-ca.ts';
export * from './instance.ts';
export * from './labels.ts';
export * from './namespace.ts';
export * from './namespace-limits.ts';
export * from './network-policies.ts';
export * from './patroni.ts';
export * from './pod.ts';
export * from './ports.ts';
export * from './quantity.ts';
export * from './restore.ts';
export * from './secrets.ts';
export * from './services.ts';
export * from './statefulsets.ts';
export * from './tenant-policy.ts';
