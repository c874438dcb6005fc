/**
 * Resource types: the group/version/kind of an API resource together with its plural and scope,
 * and the URL paths the API server serves it under.
 *
 * Guarantees: paths are built the way the API server expects them (core group under /api,
 * others under /apis; namespaced resources under /namespaces/<ns>); names and namespaces are
 * URL-encoded. No discovery round trip is needed: callers name the resource type they use.
 * `controllerReference(type, owner)` is the ownerReference a child of `owner` carries: marked
 * controller and blocking the owner's deletion, so the API server garbage-collects the child
 * with its owner and the child's events reach the owner's controller.
 */

export interface ResourceType {
  /** API group; "" for the core group. */
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  /** Lower-case plural used in URLs, e.g. "deployments". */
  readonly plural: string;
  readonly namespaced: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
  [field: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** Any Kubernetes object as it travels over the wire. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export function apiVersionOf(type: ResourceType): string {
  return type.group === '' ? type.version : `${type.group}/${type.version}`;
}

/** The controller ownerReference to `owner`, an object of `type`. */
export function controllerReference(type: ResourceType, owner: KubeObject): OwnerReference {
  return {
    apiVersion: apiVersionOf(type),
    kind: type.kind,
    name: owner.metadata.name ?? '',
    uid: owner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Parses "apps/v1" or "v1" into group and version. */
export function parseApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

export function collectionPath(type: ResourceType, namespace?: string): string {
  const base = type.group === '' ? `/api/${type.version}` : `/apis/${type.group}/${type.version}`;
  if (type.namespaced && namespace) return `${base}/namespaces/${encodeURIComponent(namespace)}/${type.plural}`;
  return `${base}/${type.plural}`;
}

export function objectPath(type: ResourceType, name: string, namespace?: string): string {
  return `${collectionPath(type, namespace)}/${encodeURIComponent(name)}`;
}

/** "namespace/name" for namespaced objects, "name" for cluster-scoped ones: the cache and queue key. */
export function objectKey(obj: { metadata: ObjectMeta }): string {
  const { namespace, name } = obj.metadata;
  return namespace ? `${namespace}/${name ?? ''}` : (name ?? '');
}

export function splitKey(key: string): { namespace?: string; name: string } {
  const slash = key.indexOf('/');
  return slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

export function typeId(type: ResourceType): string {
  return `${type.group || 'core'}/${type.version}/${type.kind}`;
}

function builtin(group: string, version: string, kind: string, plural: string, namespaced = true): ResourceType {
  return Object.freeze({ group, version, kind, plural, namespaced });
}

/** Built-in resource types the project's operators use. */
export const Kinds = {
  Namespace: builtin('', 'v1', 'Namespace', 'namespaces', false),
  ConfigMap: builtin('', 'v1', 'ConfigMap', 'configmaps'),
  Secret: builtin('', 'v1', 'Secret', 'secrets'),
  Service: builtin('', 'v1', 'Service', 'services'),
  ServiceAccount: builtin('', 'v1', 'ServiceAccount', 'serviceaccounts'),
  Pod: builtin('', 'v1', 'Pod', 'pods'),
  Event: builtin('', 'v1', 'Event', 'events'),
  Node: builtin('', 'v1', 'Node', 'nodes', false),
  PersistentVolume: builtin('', 'v1', 'PersistentVolume', 'persistentvolumes', false),
  PersistentVolumeClaim: builtin('', 'v1', 'PersistentVolumeClaim', 'persistentvolumeclaims'),
  Deployment: builtin('apps', 'v1', 'Deployment', 'deployments'),
  StatefulSet: builtin('apps', 'v1', 'StatefulSet', 'statefulsets'),
  DaemonSet: builtin('apps', 'v1', 'DaemonSet', 'daemonsets'),
  ReplicaSet: builtin('apps', 'v1', 'ReplicaSet', 'replicasets'),
  NetworkPolicy: builtin('networking.k8s.io', 'v1', 'NetworkPolicy', 'networkpolicies'),
  EndpointSlice: builtin('discovery.k8s.io', 'v1', 'EndpointSlice', 'endpointslices'),
  Lease: builtin('coordination.k8s.io', 'v1', 'Lease', 'leases'),
  CustomResourceDefinition: builtin('apiextensions.k8s.io', 'v1', 'CustomResourceDefinition', 'customresourcedefinitions', false),
  ClusterRole: builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', false),
  ClusterRoleBinding: builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', false),
  Role: builtin('rbac.authorization.k8s.io', 'v1', 'Role', 'roles'),
  RoleBinding: builtin('rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings'),
} as const;

/** A resource type for a custom resource. */
export function customResource(group: string, version: string, kind: string, plural: string, namespaced = true): ResourceType {
  return builtin(group, version, kind, plural, namespaced);
}
