/**
 * RBAC from declarations: the rules an operator needs, computed from the types its controllers
 * declare (`for`, `owns`, `watches` of the runtime's controller builder), the client calls it
 * declares besides, and what every operator process on the runtime does.
 *
 * Guarantees:
 * - `for(T)`: read T (get, list, watch), write its status subresource (get, patch, update) and
 *   its finalizers (update); `owns(T)`: read T and write it (create, update, patch, delete);
 *   `watches(T)`: read T. Extra permissions add their verbs to their resource or subresource.
 * - Every operator gets the rules of the runtime's process: Events (the recorder), Leases
 *   (--leader-elect), and, for the metrics Service made at start-up in a pod, Services and
 *   ServiceMonitors plus reading its own Pod, ReplicaSet and Deployment.
 * - One rule per API group and resource, verbs in Kubernetes' order, rules sorted by group then
 *   resource, each preceded by a comment saying why: the output is deterministic, so committed
 *   RBAC can be compared byte for byte (`generate rbac --check`).
 * - A Role (with a RoleBinding) when every type is namespaced, else a ClusterRole (with a
 *   ClusterRoleBinding), always bound to the operator's ServiceAccount.
 */
import { Document, type YAMLMap, type YAMLSeq } from 'yaml';

export interface DeclaredType {
  group: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export interface ControllerDeclaration {
  role: 'for' | 'owns' | 'watches';
  type: DeclaredType;
}

export interface ExtraPermission {
  type: DeclaredType;
  verbs: string[];
  subresource?: string;
}

export interface PolicyRule {
  apiGroups: [string];
  resources: [string];
  verbs: string[];
  /** Why the rule exists (written as a comment). */
  reasons: string[];
}

const VERB_ORDER = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];
const READ = ['get', 'list', 'watch'];
const WRITE = ['create', 'update', 'patch', 'delete'];

const PROCESS_RULES: Array<{ group: string; resource: string; verbs: string[]; reason: string }> = [
  { group: '', resource: 'events', verbs: ['create', 'patch'], reason: 'events of reconciled objects (kubectl describe)' },
  { group: 'coordination.k8s.io', resource: 'leases', verbs: ['get', 'create', 'update'], reason: 'leader election (--leader-elect)' },
  { group: '', resource: 'services', verbs: ['get', 'create', 'patch'], reason: 'the metrics Service created at start-up in a pod' },
  { group: 'monitoring.coreos.com', resource: 'servicemonitors', verbs: ['get', 'create', 'patch'], reason: 'the metrics ServiceMonitor (with the Prometheus Operator)' },
  { group: '', resource: 'pods', verbs: ['get'], reason: "the operator's own pod, read at start-up" },
  { group: 'apps', resource: 'replicasets', verbs: ['get'], reason: "the operator's own ReplicaSet, read at start-up" },
  { group: 'apps', resource: 'deployments', verbs: ['get'], reason: "the operator's own Deployment, read at start-up" },
];

function checkVerbs(permission: ExtraPermission): void {
  const unknown = permission.verbs.filter((v) => !VERB_ORDER.includes(v) && v !== '*');
  if (unknown.length > 0 || permission.verbs.length === 0) {
    throw new Error(`extraPermissions for ${permission.type.kind}: verbs must be some of ${VERB_ORDER.join(', ')}; got [${permission.verbs.join(', ')}]`);
  }
}

export function policyRules(declarations: readonly ControllerDeclaration[], extra: readonly ExtraPermission[]): PolicyRule[] {
  const rules = new Map<string, { group: string; resource: string; verbs: Set<string>; reasons: string[] }>();
  const add = (group: string, resource: string, verbs: readonly string[], reason: string) => {
    const key = `${group}\u0000${resource}`;
    const rule = rules.get(key) ?? { group, resource, verbs: new Set<string>(), reasons: [] };
    for (const verb of verbs) rule.verbs.add(verb);
    if (!rule.reasons.includes(reason)) rule.reasons.push(reason);
    rules.set(key, rule);
  };
  for (const { role, type } of declarations) {
    if (role === 'for') {
      add(type.group, type.plural, READ, `for(${type.kind})`);
      add(type.group, `${type.plural}/status`, ['get', 'update', 'patch'], `for(${type.kind}): status`);
      add(type.group, `${type.plural}/finalizers`, ['update'], `for(${type.kind}): finalizers`);
    } else if (role === 'owns') {
      add(type.group, type.plural, [...READ, ...WRITE], `owns(${type.kind})`);
    } else {
      add(type.group, type.plural, READ, `watches(${type.kind})`);
    }
  }
  for (const permission of extra) {
    checkVerbs(permission);
    const resource = permission.subresource ? `${permission.type.plural}/${permission.subresource}` : permission.type.plural;
    add(permission.type.group, resource, permission.verbs, `extraPermissions: ${permission.type.kind}${permission.subresource ? `/${permission.subresource}` : ''}`);
  }
  for (const rule of PROCESS_RULES) add(rule.group, rule.resource, rule.verbs, rule.reason);

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

export function needsClusterRole(declarations: readonly ControllerDeclaration[], extra: readonly ExtraPermission[]): boolean {
  return [...declarations, ...extra].some((d) => !d.type.namespaced);
}

const HEADER = '# Generated by `operator-ts generate rbac` from what src/controllers.ts declares; do not edit.\n';

/** deploy/role.yaml: the Role (or ClusterRole) named after the operator. */
export function roleYaml(name: string, rules: readonly PolicyRule[], clusterRole: boolean): string {
  const doc = new Document({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: clusterRole ? 'ClusterRole' : 'Role',
    metadata: { name },
    rules: rules.map(({ apiGroups, resources, verbs }) => ({ apiGroups, resources, verbs })),
  });
  const items = (doc.get('rules') as YAMLSeq<YAMLMap>).items;
  rules.forEach((rule, i) => {
    items[i]!.commentBefore = ` ${rule.reasons.join('; ')}`;
    for (const key of ['apiGroups', 'resources', 'verbs']) (items[i]!.get(key) as YAMLSeq).flow = true;
  });
  return HEADER + doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

/** deploy/role_binding.yaml: the operator's ServiceAccount bound to its Role (or ClusterRole). */
export function roleBindingYaml(name: string, clusterRole: boolean): string {
  const binding = new Document({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: clusterRole ? 'ClusterRoleBinding' : 'RoleBinding',
    metadata: { name },
    subjects: [{ kind: 'ServiceAccount', name, ...(clusterRole ? { namespace: 'REPLACE_NAMESPACE' } : {}) }],
    roleRef: { kind: clusterRole ? 'ClusterRole' : 'Role', name, apiGroup: 'rbac.authorization.k8s.io' },
  });
  return HEADER + binding.toString({ lineWidth: 0 });
}
