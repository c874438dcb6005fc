/**
 * The IoTService as every controller of the IoT operator handles it: its resource types (v1beta1,
 * the stored version, and the seed's v1alpha1), its finalizer and field manager, the resource type
 * of each kind of child and of cert-manager's kinds it uses, the key an IoTService's memory is kept under, the Events recorded on it
 * (`StatusEvent`), the IoTService controller's configuration, and the cache scoping that controller
 * needs (`iotCacheOptions`).
 *
 * Guarantees: secondary caches hold only objects carrying this landscape's label, whole only inside
 * this landscape's instance namespaces (any other is kept as a bare name), and never the data of a
 * ConfigMap or Secret (METADATA_ONLY_TYPES); cert-manager's Certificates are cached only in the
 * landscape namespace, only with this landscape's label, and their CRD may be missing (the cache
 * is then synced and empty: `optional`); a shard of a ControllerRing selects its IoTServices, their
 * children and Certificates by its shard label (SHARDED_TYPES) and caches no pods.
 */
import {
  Kinds,
  customResource,
  dropManagedFields,
  type KubeObject,
  type Request,
  type ResourceType,
  type Transform,
} from '@iot-operator/runtime';
import { API_GROUP, API_VERSION, IOTSERVICE_KIND, IOTSERVICE_PLURAL } from './api/iotservice.ts';
import { API_VERSION_V1ALPHA1 } from './api/v1alpha1.ts';
import { CERT_MANAGER_GROUP, INSTANCE_LABEL, instanceIdOf, landscapeSelector, type OperatorConfig } from './resources/index.ts';
import { leanPod } from './pod-view.ts';

/** IoTServices as the operator reads and writes them: v1beta1, the stored version. */
export const IoTServiceType = customResource(API_GROUP, API_VERSION, IOTSERVICE_KIND, IOTSERVICE_PLURAL);
/** IoTServices in the seed's v1alpha1, converted by the API server through the conversion webhook. */
export const IoTServiceV1alpha1Type = customResource(API_GROUP, API_VERSION_V1ALPHA1, IOTSERVICE_KIND, IOTSERVICE_PLURAL);
export const FINALIZER = 'cp.iotservices.io/cleanup';
export const FIELD_MANAGER = 'iot-operator';

export interface IoTControllerConfig extends OperatorConfig {
  /** WATCH_NAMESPACE: '' watches secondary resources cluster-wide; otherwise only that namespace. */
  watchNamespace: string;
  maxConcurrentReconciles: number;
  /** Set when this process is one shard of a ControllerRing of IoTServices (see SHARDED_TYPES). */
  shard?: { ring: string; name: string };
  /** The stuck window of the status (--stuck-pod-timeout); default pod-health.ts DEFAULT_STUCK_POD_TIMEOUT_MS. */
  stuckPodTimeoutMs?: number;
  /** How long messages may wait unstored before ingestion is Stalled (--ingestion-stalled-after); default ingestion.ts STALLED_AFTER_SECONDS. */
  ingestionStalledAfterSeconds?: number;
}

/** The resource type of each kind of child, by kind. */
export const CHILD_TYPES: Readonly<Record<string, ResourceType>> = {
  Namespace: Kinds.Namespace,
  NetworkPolicy: Kinds.NetworkPolicy,
  // Built-in kinds the runtime's Kinds does not list.
  ResourceQuota: customResource('', 'v1', 'ResourceQuota', 'resourcequotas'),
  LimitRange: customResource('', 'v1', 'LimitRange', 'limitranges'),
  Secret: Kinds.Secret,
  ConfigMap: Kinds.ConfigMap,
  Service: Kinds.Service,
  PodDisruptionBudget: customResource('policy', 'v1', 'PodDisruptionBudget', 'poddisruptionbudgets'),
  ServiceAccount: Kinds.ServiceAccount,
  Role: Kinds.Role,
  RoleBinding: Kinds.RoleBinding,
  StatefulSet: Kinds.StatefulSet,
  Deployment: Kinds.Deployment,
};

/** cert-manager's Certificates: the gateway's, written in the landscape for spec.gateway.tls.issuerRef (gateway-issued-certificates.ts). */
export const CertificateType = customResource(CERT_MANAGER_GROUP, 'v1', 'Certificate', 'certificates');
/** The issuers spec.gateway.tls.issuerRef may name, looked up by name while its Certificate is not ready. */
export const IssuerType = customResource(CERT_MANAGER_GROUP, 'v1', 'Issuer', 'issuers');
export const ClusterIssuerType = customResource(CERT_MANAGER_GROUP, 'v1', 'ClusterIssuer', 'clusterissuers', false);

/** StorageClasses are only looked up by name, never watched (see controller.ts `missingStorageClasses`). */
export const StorageClassType: ResourceType = Object.freeze({ group: 'storage.k8s.io', version: 'v1', kind: 'StorageClass', plural: 'storageclasses', namespaced: false });

/**
 * What a shard's caches select by its shard label: IoTServices, which the sharder assigns, and
 * their children, which carry their instance's shard label (written by this operator: they live
 * in another namespace, so the sharder cannot follow owner references to them). Pods carry it
 * only through their templates, where changing it would restart them on every move, so a shard
 * does not cache pods: it lists an instance's pods when it computes its status.
 */
export const SHARDED_TYPES: readonly ResourceType[] = [IoTServiceType, ...Object.values(CHILD_TYPES), CertificateType];

/**
 * Kinds whose bodies (`data`) the cache never holds: anyone who can create a ConfigMap or Secret
 * somewhere can give it our labels, and up to 1 MiB of data each. Only their metadata is
 * watched; a child of these kinds is read from the API server when its metadata changed
 * (child-bodies.ts: after a start, listed in pages rather than got one by one).
 */
export const METADATA_ONLY_TYPES: readonly ResourceType[] = [Kinds.ConfigMap, Kinds.Secret];

/**
 * The cache scoping the IoTService controller (controller.ts) needs; pass it to
 * `Manager.create({ cache })`. Secondary caches select this landscape's labels; of what they
 * receive, only objects inside one of this landscape's instance namespaces
 * (`<landscape>-<instance label>`) are kept whole: anything else carrying our labels — planted in
 * some other namespace — is kept as a bare name, so it costs the cache next to nothing.
 */
export function iotCacheOptions(config: IoTControllerConfig) {
  const labelSelector = landscapeSelector(config.operatorName);
  const secondary = watchedTypes(config).map((type) => ({
    type,
    namespace: config.watchNamespace || undefined,
    labelSelector,
    indexLabels: [INSTANCE_LABEL],
    metadataOnly: METADATA_ONLY_TYPES.includes(type),
    transform: onlyInInstanceNamespaces(config.operatorName, type === Kinds.Pod ? leanPod : dropManagedFields),
  }));
  const certificates = { type: CertificateType, namespace: config.operatorName, labelSelector, indexLabels: [INSTANCE_LABEL], optional: true };
  return { byType: [{ type: IoTServiceType, namespace: config.operatorName }, ...secondary, certificates] };
}

/** The secondary types watched: children, and pods unless this process is a shard (see SHARDED_TYPES). */
export function watchedTypes(config: IoTControllerConfig): ResourceType[] {
  return config.shard ? Object.values(CHILD_TYPES) : [...Object.values(CHILD_TYPES), Kinds.Pod];
}

/** True for an object of one of this landscape's instance namespaces (labelled for the instance whose namespace it is in). */
export function inInstanceNamespace(landscape: string, obj: KubeObject): boolean {
  const id = instanceIdOf(obj.metadata.labels, landscape);
  const namespace = obj.kind === 'Namespace' ? obj.metadata.name : obj.metadata.namespace;
  return id !== undefined && namespace === `${landscape}-${id}`;
}

/** Keeps objects of this landscape's instance namespaces (as `keep` makes them); reduces any other to its identity. */
function onlyInInstanceNamespaces(landscape: string, keep: Transform<KubeObject>): Transform<KubeObject> {
  return (obj) => {
    if (inInstanceNamespace(landscape, obj)) return keep(obj);
    const { name, namespace, uid, resourceVersion } = obj.metadata;
    return { apiVersion: obj.apiVersion, kind: obj.kind, metadata: { name, namespace, uid, resourceVersion } };
  };
}

/** An Event to record on an IoTService: a status transition (status.ts) or dead letters its ingestion set aside (ingestion.ts). */
export interface StatusEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/** The key an IoTService's memory is kept under, in every controller of IoTServices. */
export function keyOf(request: Request): string {
  return `${request.namespace ?? ''}/${request.name}`;
}
