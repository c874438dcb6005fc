/**
 * RBAC from declarations: the rules an operator needs, computed from the types its controllers
 * declare (`for`, `owns`, `watches` of the runtime's controller builder), the client calls it
 * declares besides, and what every operator process on the runtime does.
 *
 * Guarantees:
 * - `for(T)`: read T (get, list, watch) and, unless T is a kind the API server serves itself
 *   (whose status Kubernetes' own controllers write), its status subresource (get, update,
 *   patch: the reconciler's status writes and the runtime's `Degraded` condition); a controller
 *   that also `owns` children may update T's finalizers subresource (its children's controller
 *   ownerReferences block T's deletion, which the OwnerReferencesPermissionEnforcement admission
 *   plugin allows only to who may). `owns(T)`: read T and write it (create, update, patch,
 *   delete); `watches(T)`: read T. Extra permissions add their verbs to their resource or
 *   subresource, with their reason as the comment.
 * - Every operator gets the rules of the runtime's process: Events (the recorder) and Leases
 *   (--leader-elect); unless told it makes none, also those of the metrics Service made at
 *   start-up in a pod (`exposeOperatorMetrics`): Services and ServiceMonitors plus reading its
 *   own Pod, ReplicaSet and Deployment.
 * - One rule per API group and resource, verbs in Kubernetes' order, rules sorted by group then
 *   resource, each preceded by a comment saying why: the output is deterministic, so committed
 *   RBAC can be compared byte for byte (`generate rbac --check`).
 * - The shape: a Role bound by a RoleBinding when every type is namespaced; a ClusterRole bound by
 *   a ClusterRoleBinding when any is cluster-scoped; on request, a ClusterRole of namespaced
 *   types bound by a RoleBinding in the watched namespace (one definition for an operator that
 *   may also be bound cluster-wide). Always bound to the operator's ServiceAccount.
 */
import { Document, type YAMLMap, type YAMLSeq } from 'yaml';

export interface DeclaredType {
  group: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export interface ControllerDeclaration {
  /** The controller that declared it: the order of its first declaration among all controllers. */
  controller: number;
  role: 'for' | 'owns' | 'watches';
  type: DeclaredType;
}

export interface ExtraPermission {
  type: DeclaredType;
  verbs: string[];
  subresource?: string;
  /** Why the operator makes the call; the comment of its rule. */
  reason?: string;
}

export interface PolicyRule {
  apiGroups: [string];
  resources: [string];
  verbs: string[];
  /** Why the rule exists (written as a comment). */
  reasons: string[];
}

export interface ProcessOptions {
  /** The operator makes its metrics Service at start-up (`exposeOperatorMetrics`); default true. */
  metricsService?: boolean;
}

export interface RbacShape {
  role: 'Role' | 'ClusterRole';
  binding: 'RoleBinding' | 'ClusterRoleBinding';
}

/** Rule verbs in the order a rule lists them; `impersonate` is for users, groups and serviceaccounts. */
const VERB_ORDER = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection', 'impersonate'];
const READ = ['get', 'list', 'watch'];
const WRITE = ['create', 'update', 'patch', 'delete'];

/** The API groups kube-apiserver serves itself (no CRD): the status of their kinds is Kubernetes' own. */
const BUILT_IN_GROUPS = new Set([
  '',
  'admissionregistration.k8s.io',
  'apiextensions.k8s.io',
  'apiregistration.k8s.io',
  'apps',
  'authentication.k8s.io',
  'authorization.k8s.io',
  'autoscaling',
  'batch',
  'certificates.k8s.io',
  'coordination.k8s.io',
  'discovery.k8s.io',
  'events.k8s.io',
  'flowcontrol.apiserver.k8s.io',
  'internal.apiserver.k8s.io',
  'networking.k8s.io',
  'node.k8s.io',
  'policy',
  'rbac.authorization.k8s.io',
  'resource.k8s.io',
  'scheduling.k8s.io',
  'storage.k8s.io',
  'storagemigration.k8s.io',
]);

interface ProcessRule {
  group: string;
  resource: string;
  verbs: string[];
  reason: string;
}

const PROCESS_RULES: ProcessRule[] = [
  { group: '', resource: 'events', verbs: ['create', 'patch'], reason: 'events of reconciled objects (kubectl describe)' },
  { group: 'coordination.k8s.io', resource: 'leases', verbs: ['get', 'create', 'update'], reason: 'leader election (--leader-elect)' },
];

const METRICS_SERVICE_RULES: ProcessRule[] = [
  { group: '', resource: 'services', verbs: ['get', 'create', 'patch'], reason: 'the metrics Service created at start-up in a pod' },
  { group: 'monitoring.coreos.com', resource: 'servicemonitors', verbs: ['get', 'create', 'patch'], reason: 'the metrics ServiceMonitor (with the Prometheus Operator)' },
  { group: '', resource: 'pods', verbs: ['get'], reason: "the operator's own pod, read at start-up" },
  { group: 'apps', resource: 'replicasets', verbs: ['get'], reason: "the operator's own ReplicaSet, read at start-up" },
  { group: 'apps', resource: 'deployments', verbs: ['get'], reason: "the operator's own Deployment, read at start-up" },
];

function checkPermission(permission: ExtraPermission): void {
  const unknown = permission.verbs.filter((v) => !VERB_ORDER.includes(v) && v !== '*');
  if (unknown.length > 0 || permission.verbs.length === 0) {
    throw new Error(`extraPermissions for ${permission.type.kind}: verbs must be some of ${VERB_ORDER.join(', ')}; got [${permission.verbs.join(', ')}]`);
  }
}

export function policyRules(declarations: readonly ControllerDeclaration[], extra: readonly ExtraPermission[], options: ProcessOptions = {}): PolicyRule[] {
  const rules = new Map<string, { group: string; resource: string; verbs: Set<string>; reasons: string[] }>();
  const add = (group: string, resource: string, verbs: readonly string[], reason: string) => {
    const key = `${group}\u0000${resource}`;
    const rule = rules.get(key) ?? { group, resource, verbs: new Set<string>(), reasons: [] };
    for (const verb of verbs) rule.verbs.add(verb);
    if (!rule.reasons.includes(reason)) rule.reasons.push(reason);
    rules.set(key, rule);
  };
  const owning = new Set(declarations.filter((d) => d.role === 'owns').map((d) => d.controller));
  for (const { controller, role, type } of declarations) {
    if (role === 'for') {
      add(type.group, type.plural, READ, `for(${type.kind})`);
      if (!BUILT_IN_GROUPS.has(type.group)) add(type.group, `${type.plural}/status`, ['get', 'update', 'patch'], `for(${type.kind}): status`);
      if (owning.has(controller)) add(type.group, `${type.plural}/finalizers`, ['update'], `for(${type.kind}): finalizers, for the ownerReferences of its children`);
    } else if (role === 'owns') {
      add(type.group, type.plural, [...READ, ...WRITE], `owns(${type.kind})`);
    } else {
      add(type.group, type.plural, READ, `watches(${type.kind})`);
    }
  }
  for (const permission of extra) {
    checkPermission(permission);
    const what = permission.subresource ? `${permission.type.kind}/${permission.subresource}` : permission.type.kind;
    const resource = permission.subresource ? `${permission.type.plural}/${permission.subresource}` : permission.type.plural;
    add(permission.type.group, resource, permission.verbs, `extraPermissions(${what})${permission.reason ? `: ${permission.reason}` : ''}`);
  }
  const process = options.metricsService === false ? PROCESS_RULES : [...PROCESS_RULES, ...METRICS_SERVICE_RULES];
  for (const rule of process) add(rule.group, rule.resource, rule.verbs, rule.reason);

  const order = (verb: string) => (VERB_ORDER.includes(verb) ? VERB_ORDER.indexOf(verb) : VERB_ORDER.length);
  return [...rules.values()]
    .sort((a, b) => a.group.localeCompare(b.group) || a.resource.localeCompare(b.resource))
    .map((r) => ({
      apiGroups: [r.group],
      resources: [r.resource],
      verbs: r.verbs.has('*') ? ['*'] : [...r.verbs].sort((a, b) => order(a) - order(b) || a.localeCompare(b)),
      reasons: r.reasons,
    }));
}

/** Role or ClusterRole, and its binding: a cluster-scoped type needs both cluster-wide; `clusterRole` asks for a ClusterRole of namespaced types. */
export function rbacShape(declarations: readonly ControllerDeclaration[], extra: readonly ExtraPermission[], clusterRole = false): RbacShape {
  if ([...declarations, ...extra].some((d) => !d.type.namespaced)) return { role: 'ClusterRole', binding: 'ClusterRoleBinding' };
  return { role: clusterRole ? 'ClusterRole' : 'Role', binding: 'RoleBinding' };
}

const HEADER = '# Generated by `operator-ts generate rbac` from what src/controllers.ts declares; do not edit.\n';

/** Where the rights hold, said at the top of both files. */
function scopeComment(shape: RbacShape): string {
  if (shape.binding === 'ClusterRoleBinding') {
    return '# A ClusterRole bound by a ClusterRoleBinding: a declared type is cluster-scoped, so the rights hold\n# cluster-wide. REPLACE_NAMESPACE is the namespace of the operator\'s ServiceAccount.\n';
  }
  if (shape.role === 'ClusterRole') {
    return '# A ClusterRole bound by a RoleBinding in the namespace the operator watches (apply with -n\n# <namespace>): every right holds in that namespace only. Bound by a ClusterRoleBinding instead, it\n# serves an operator watching every namespace.\n';
  }
  return '# A Role bound by a RoleBinding in the namespace the operator watches (apply with -n <namespace>):\n# every right holds in that namespace only.\n';
}

/** The Role (or ClusterRole) named after the operator. */
export function roleYaml(name: string, rules: readonly PolicyRule[], shape: RbacShape): string {
  const doc = new Document({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: shape.role,
    metadata: { name },
    rules: rules.map(({ apiGroups, resources, verbs }) => ({ apiGroups, resources, verbs })),
  });
  const items = (doc.get('rules') as YAMLSeq<YAMLMap>).items;
  rules.forEach((rule, i) => {
    items[i]!.commentBefore = ` ${rule.reasons.join('; ')}`;
    for (const key of ['apiGroups', 'resources', 'verbs']) (items[i]!.get(key) as YAMLSeq).flow = true;
  });
  return HEADER + scopeComment(shape) + doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

/** The operator's ServiceAccount bound to its Role (or ClusterRole). */
export function roleBindingYaml(name: string, shape: RbacShape): string {
  const clusterWide = shape.binding === 'ClusterRoleBinding';
  const binding = new Document({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: shape.binding,
    metadata: { name },
    subjects: [{ kind: 'ServiceAccount', name, ...(clusterWide ? { namespace: 'REPLACE_NAMESPACE' } : {}) }],
    roleRef: { kind: shape.role, name, apiGroup: 'rbac.authorization.k8s.io' },
  });
  return HEADER + scopeComment(shape) + binding.toString({ lineWidth: 0 });
}
