/**
 * The two ways to deploy the ptemplate operator grant the same rights: the seed's layout
 * (config/: ClusterRole manager-role for every namespace; Roles for the leader-election Lease and
 * the metrics Service in the operator's own namespace) and the namespaced variant
 * (deploy/role.yml, one Role). A permission added to one and not the other fails here, and the
 * Lease and the metrics Service are never granted outside the operator's namespace.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

const read = (file: string) => parse(readFileSync(fileURLToPath(new URL(`../${file}`, import.meta.url)), 'utf8')) as { kind: string; rules: Rule[] };

/** Every (group, resource, verb) a role grants. */
function permissions(...roles: Array<{ rules: Rule[] }>): string[] {
  const out = new Set<string>();
  for (const role of roles)
    for (const rule of role.rules)
      for (const group of rule.apiGroups) for (const resource of rule.resources) for (const verb of rule.verbs) out.add(`${group}/${resource}:${verb}`);
  return [...out].sort();
}

const clusterRole = read('config/rbac/role.yaml');
const leaderElection = read('config/rbac/leader_election_role.yaml');
const metrics = read('config/rbac/metrics_role.yaml');

test('config/rbac grants together exactly what deploy/role.yml grants', () => {
  assert.equal(clusterRole.kind, 'ClusterRole');
  assert.deepEqual(permissions(clusterRole, leaderElection, metrics), permissions(read('deploy/role.yml')));
});

test('Leases, Services and ServiceMonitors only in the operator namespace', () => {
  assert.equal(leaderElection.kind, 'Role');
  assert.equal(metrics.kind, 'Role');
  const cluster = permissions(clusterRole).join(' ');
  assert.doesNotMatch(cluster, /leases|\/services:|servicemonitors/);
  assert.match(permissions(leaderElection).join(' '), /coordination\.k8s\.io\/leases:update/);
  assert.ok(permissions(metrics).includes('/services:create'));
  assert.ok(permissions(metrics).includes('monitoring.coreos.com/servicemonitors:create'));
});
