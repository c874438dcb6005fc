/**
 * RBAC from declarations: what for/owns/watches and extra permissions grant, the operator
 * process's own rules (with and without a metrics Service), Role versus ClusterRole and their
 * bindings, the files a project names, bad verbs rejected, output stable.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import { rbacFiles } from '../src/generate/generate.ts';
import { policyRules, rbacShape, type ControllerDeclaration } from '../src/generate/rbac.ts';

const Widget = { group: 'demo.example.com', kind: 'Widget', plural: 'widgets', namespaced: true };
const Gadget = { group: 'demo.example.com', kind: 'Gadget', plural: 'gadgets', namespaced: true };
const ConfigMap = { group: '', kind: 'ConfigMap', plural: 'configmaps', namespaced: true };
const Pod = { group: '', kind: 'Pod', plural: 'pods', namespaced: true };
const Namespace = { group: '', kind: 'Namespace', plural: 'namespaces', namespaced: false };
const Secret = { group: '', kind: 'Secret', plural: 'secrets', namespaced: true };

const declarations: ControllerDeclaration[] = [
  { controller: 0, role: 'for', type: Widget },
  { controller: 0, role: 'owns', type: ConfigMap },
  { controller: 0, role: 'watches', type: Pod },
];
const demo = { name: 'demo-operator' };

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

test('finalizers only for a controller that owns children; no status of a kind the API server serves itself', () => {
  const rules = policyRules(
    [
      ...declarations,
      { controller: 1, role: 'for', type: Gadget },
      { controller: 1, role: 'watches', type: Widget },
      { controller: 2, role: 'for', type: Namespace },
    ],
    [],
  );
  assert.deepEqual(verbsOf(rules, 'demo.example.com', 'gadgets/status'), ['get', 'update', 'patch']);
  assert.equal(verbsOf(rules, 'demo.example.com', 'gadgets/finalizers'), undefined, 'the Gadget controller owns nothing');
  assert.deepEqual(verbsOf(rules, '', 'namespaces'), ['get', 'list', 'watch']);
  assert.equal(verbsOf(rules, '', 'namespaces/status'), undefined, "a Namespace's status is Kubernetes' own");
  assert.equal(verbsOf(rules, '', 'namespaces/finalizers'), undefined);
});

test('every operator may record events and elect a leader; the metrics Service rules unless it makes none', () => {
  const rules = policyRules([], []);
  assert.deepEqual(verbsOf(rules, '', 'events'), ['create', 'patch']);
  assert.deepEqual(verbsOf(rules, 'coordination.k8s.io', 'leases'), ['get', 'create', 'update']);
  assert.deepEqual(verbsOf(rules, '', 'services'), ['get', 'create', 'patch']);
  assert.deepEqual(verbsOf(rules, 'monitoring.coreos.com', 'servicemonitors'), ['get', 'create', 'patch']);
  assert.equal(verbsOf(rules, '', 'secrets'), undefined, 'nothing else');
  const withoutService = policyRules([], [], { metricsService: false });
  assert.deepEqual(
    withoutService.map((r) => `${r.apiGroups[0]}/${r.resources[0]}`),
    ['/events', 'coordination.k8s.io/leases'],
  );
});

test('extra permissions add their verbs, on a subresource when named, with their reason as the comment', () => {
  const extra = [
    { type: Secret, verbs: ['get'], reason: 'credentials a Widget names' },
    { type: ConfigMap, verbs: ['deletecollection'] },
    { type: Pod, verbs: ['create'], subresource: 'eviction' },
  ];
  const rules = policyRules(declarations, extra);
  assert.deepEqual(verbsOf(rules, '', 'secrets'), ['get']);
  assert.deepEqual(verbsOf(rules, '', 'configmaps'), ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection']);
  assert.deepEqual(verbsOf(rules, '', 'pods/eviction'), ['create']);
  const role = rbacFiles(demo, declarations, extra)['deploy/role.yaml']!;
  assert.match(role, /# extraPermissions\(Secret\): credentials a Widget names\n {2}- apiGroups: \[""\]\n {4}resources: \[secrets\]/);
  assert.match(role, /# extraPermissions\(Pod\/eviction\)\n/);
});

test('an unknown or missing verb is an error naming the kind', () => {
  assert.throws(() => policyRules([], [{ type: Secret, verbs: ['read'] }]), /extraPermissions for Secret: verbs must be some of get, list/);
  assert.throws(() => policyRules([], [{ type: Secret, verbs: [] }]), /extraPermissions for Secret/);
});

test('namespaced types give a Role and RoleBinding; a cluster-scoped one a ClusterRole and ClusterRoleBinding', () => {
  const namespaced = rbacFiles(demo, declarations, []);
  assert.equal(parse(namespaced['deploy/role.yaml']!).kind, 'Role');
  assert.deepEqual(parse(namespaced['deploy/role_binding.yaml']!).roleRef, { kind: 'Role', name: 'demo-operator', apiGroup: 'rbac.authorization.k8s.io' });
  assert.match(namespaced['deploy/role.yaml']!, /^# Generated by .*\n# A Role bound by a RoleBinding in the namespace the operator watches \(apply with -n <namespace>\)/);
  const clusterScoped: ControllerDeclaration[] = [...declarations, { controller: 0, role: 'watches', type: Namespace }];
  assert.deepEqual(rbacShape(clusterScoped, []), { role: 'ClusterRole', binding: 'ClusterRoleBinding' });
  const cluster = rbacFiles(demo, clusterScoped, []);
  assert.equal(parse(cluster['deploy/role.yaml']!).kind, 'ClusterRole');
  const binding = parse(cluster['deploy/role_binding.yaml']!);
  assert.equal(binding.kind, 'ClusterRoleBinding');
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'demo-operator', namespace: 'REPLACE_NAMESPACE' }]);
  assert.match(cluster['deploy/role_binding.yaml']!, /# A ClusterRole bound by a ClusterRoleBinding: a declared type is cluster-scoped/);
});

test('a project asking for a ClusterRole of namespaced types gets one bound by a RoleBinding, in the files it names', () => {
  const files = rbacFiles(
    { name: 'demo-operator', rbac: { clusterRole: true, roleFiles: ['deploy/role.yml', 'chart/demo/files/role.yml'], bindingFile: 'deploy/role_binding.yml', metricsService: false } },
    declarations,
    [],
  );
  assert.deepEqual(Object.keys(files), ['deploy/role.yml', 'chart/demo/files/role.yml', 'deploy/role_binding.yml']);
  assert.equal(files['deploy/role.yml'], files['chart/demo/files/role.yml']);
  assert.equal(parse(files['deploy/role.yml']!).kind, 'ClusterRole');
  const binding = parse(files['deploy/role_binding.yml']!);
  assert.equal(binding.kind, 'RoleBinding');
  assert.deepEqual(binding.roleRef, { kind: 'ClusterRole', name: 'demo-operator', apiGroup: 'rbac.authorization.k8s.io' });
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'demo-operator' }]);
  for (const file of ['deploy/role.yml', 'deploy/role_binding.yml']) assert.match(files[file]!, /^# Generated by .*\n# A ClusterRole bound by a RoleBinding in the namespace the operator watches/);
  assert.equal(verbsOf(policyRules(declarations, [], { metricsService: false }), 'monitoring.coreos.com', 'servicemonitors'), undefined);
  // A cluster-scoped type still needs the ClusterRoleBinding.
  assert.deepEqual(rbacShape([{ controller: 0, role: 'for', type: Namespace }], [], true), { role: 'ClusterRole', binding: 'ClusterRoleBinding' });
});

test('the output does not depend on declaration order and says why each rule exists', () => {
  const a = rbacFiles(demo, declarations, [{ type: Secret, verbs: ['get', 'list'] }]);
  const b = rbacFiles(demo, [...declarations].reverse(), [{ type: Secret, verbs: ['list', 'get'] }]);
  assert.equal(a['deploy/role.yaml'], b['deploy/role.yaml']);
  assert.match(a['deploy/role.yaml']!, /# owns\(ConfigMap\)\n {2}- apiGroups: \[""\]\n {4}resources: \[configmaps\]/);
  assert.match(a['deploy/role.yaml']!, /# watches\(Pod\); the operator's own pod, read at start-up\n/);
});
