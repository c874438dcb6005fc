/**
 * RBAC from declarations: what for/owns/watches and extra permissions grant, the operator
 * process's own rules, Role versus ClusterRole, bad verbs rejected, output stable.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import { rbacFiles } from '../src/generate/generate.ts';
import { needsClusterRole, policyRules, type ControllerDeclaration } from '../src/generate/rbac.ts';

const Widget = { group: 'demo.example.com', kind: 'Widget', plural: 'widgets', namespaced: true };
const ConfigMap = { group: '', kind: 'ConfigMap', plural: 'configmaps', namespaced: true };
const Pod = { group: '', kind: 'Pod', plural: 'pods', namespaced: true };
const Namespace = { group: '', kind: 'Namespace', plural: 'namespaces', namespaced: false };
const Secret = { group: '', kind: 'Secret', plural: 'secrets', namespaced: true };

const declarations: ControllerDeclaration[] = [
  { role: 'for', type: Widget },
  { role: 'owns', type: ConfigMap },
  { role: 'watches', type: Pod },
];

function verbsOf(rules: ReturnType<typeof policyRules>, group: string, resource: string): string[] | undefined {
  return rules.find((r) => r.apiGroups[0] === group && r.resources[0] === resource)?.verbs;
}

test('for reads the primary and writes its status and finalizers; owns writes the child; watches only reads', () => {
  const rules = policyRules(declarations, []);
  assert.deepEqual(verbsOf(rules, 'demo.example.com', 'widgets'), ['get', 'list', 'watch']);
  assert.deepEqual(verbsOf(rules, 'demo.example.com', 'widgets/status'), ['get', 'update', 'patch']);
  assert.deepEqual(verbsOf(rules, 'demo.example.com', 'widgets/finalizers'), ['update']);
  assert.deepEqual(verbsOf(rules, '', 'configmaps'), ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);
  // watches(Pod) reads pods; the process rule (its own pod, get) merges into the same rule.
  assert.deepEqual(verbsOf(rules, '', 'pods'), ['get', 'list', 'watch']);
});

test('every operator may record events, elect a leader and expose its metrics Service', () => {
  const rules = policyRules([], []);
  assert.deepEqual(verbsOf(rules, '', 'events'), ['create', 'patch']);
  assert.deepEqual(verbsOf(rules, 'coordination.k8s.io', 'leases'), ['get', 'create', 'update']);
  assert.deepEqual(verbsOf(rules, '', 'services'), ['get', 'create', 'patch']);
  assert.deepEqual(verbsOf(rules, 'monitoring.coreos.com', 'servicemonitors'), ['get', 'create', 'patch']);
  assert.equal(verbsOf(rules, '', 'secrets'), undefined, 'nothing else');
});

test('extra permissions add their verbs, on a subresource when named', () => {
  const rules = policyRules(declarations, [
    { type: Secret, verbs: ['get'] },
    { type: ConfigMap, verbs: ['deletecollection'] },
    { type: Pod, verbs: ['create'], subresource: 'eviction' },
  ]);
  assert.deepEqual(verbsOf(rules, '', 'secrets'), ['get']);
  assert.deepEqual(verbsOf(rules, '', 'configmaps'), ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection']);
  assert.deepEqual(verbsOf(rules, '', 'pods/eviction'), ['create']);
});

test('an unknown or missing verb is an error naming the kind', () => {
  assert.throws(() => policyRules([], [{ type: Secret, verbs: ['read'] }]), /extraPermissions for Secret: verbs must be some of get, list/);
  assert.throws(() => policyRules([], [{ type: Secret, verbs: [] }]), /extraPermissions for Secret/);
});

test('namespaced types give a Role and RoleBinding; a cluster-scoped one a ClusterRole and ClusterRoleBinding', () => {
  const namespaced = rbacFiles('demo-operator', declarations, []);
  assert.equal(parse(namespaced['deploy/role.yaml']!).kind, 'Role');
  assert.deepEqual(parse(namespaced['deploy/role_binding.yaml']!).roleRef, { kind: 'Role', name: 'demo-operator', apiGroup: 'rbac.authorization.k8s.io' });
  assert.equal(needsClusterRole([...declarations, { role: 'watches', type: Namespace }], []), true);
  const cluster = rbacFiles('demo-operator', [...declarations, { role: 'watches', type: Namespace }], []);
  assert.equal(parse(cluster['deploy/role.yaml']!).kind, 'ClusterRole');
  const binding = parse(cluster['deploy/role_binding.yaml']!);
  assert.equal(binding.kind, 'ClusterRoleBinding');
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'demo-operator', namespace: 'REPLACE_NAMESPACE' }]);
});

test('the output does not depend on declaration order and says why each rule exists', () => {
  const a = rbacFiles('demo-operator', declarations, [{ type: Secret, verbs: ['get', 'list'] }]);
  const b = rbacFiles('demo-operator', [...declarations].reverse(), [{ type: Secret, verbs: ['list', 'get'] }]);
  assert.equal(a['deploy/role.yaml'], b['deploy/role.yaml']);
  assert.match(a['deploy/role.yaml']!, /# owns\(ConfigMap\)\n  - apiGroups: \[""\]\n    resources: \[configmaps\]/);
  assert.match(a['deploy/role.yaml']!, /# watches\(Pod\); the operator's own pod, read at start-up\n/);
});
