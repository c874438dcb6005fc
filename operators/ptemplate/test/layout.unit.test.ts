/**
 * The two ways to deploy the ptemplate operator grant the same rights: the seed's layout
 * (config/: ClusterRole manager-role for every namespace, Role leader-election-role for the Lease
 * in the operator's namespace) and the namespaced variant (deploy/role.yml). A rule added to one
 * and not the other fails here.
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
const isLease = (rule: Rule) => rule.resources.includes('leases');
const key = (rule: Rule) => JSON.stringify([rule.apiGroups, rule.resources, [...rule.verbs].sort()]);

test('config/rbac ClusterRole = deploy/role.yml without the Lease rule', () => {
  const clusterRole = read('config/rbac/role.yaml');
  const namespaced = read('deploy/role.yml');
  assert.equal(clusterRole.kind, 'ClusterRole');
  assert.deepEqual(clusterRole.rules.map(key).sort(), namespaced.rules.filter((r) => !isLease(r)).map(key).sort());
  assert.equal(clusterRole.rules.some(isLease), false, 'no Lease rights outside the operator namespace');
});

test("config/rbac leader-election Role = deploy/role.yml's Lease rule", () => {
  const leaderElection = read('config/rbac/leader_election_role.yaml');
  assert.equal(leaderElection.kind, 'Role');
  assert.deepEqual(leaderElection.rules.filter(isLease).map(key), read('deploy/role.yml').rules.filter(isLease).map(key));
});
