/**
 * The hand-written, deliberately split RBAC of deploy/role.yml grants everything the code
 * declares: operator-ts's generator records what `registerControllers` (src/controllers.ts)
 * declares — for, watches, watchesSelected — and computes the rules those declarations, the
 * declared `extraPermissions` and the runtime's process (Events, the leader Lease; the IoT
 * operator makes no metrics Service, deploy/ has one) need. Each must be granted where the
 * operator uses it: IoTServices, the Lease, the gateways' cert-manager Certificates and Issuers
 * live in the landscape, and only there are Secrets deleted (those cert-manager issued into), so
 * the landscape Role may grant them; everything else is read and written across instance
 * namespaces (or is cluster-scoped), so only the ClusterRole counts. A check that a missing right fails the comparison keeps it from passing
 * vacuously.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import * as runtime from '@iot-operator/runtime';
import { parseAllDocuments } from 'yaml';
import { policyRules, type PolicyRule } from '../../../packages/sdk/src/generate/rbac.ts';
import { recordControllers } from '../../../packages/sdk/src/generate/record.ts';
import { IOTSERVICE_CRD_NAME } from '../src/api/crd.ts';
import { IOTSERVICE_PLURAL } from '../src/api/iotservice.ts';
import { extraPermissions, registerControllers } from '../src/controllers.ts';
import { TEST_CONFIG } from './fixtures.ts';

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

const [clusterRole, landscapeRole] = parseAllDocuments(readFileSync(new URL('../deploy/role.yml', import.meta.url), 'utf8')).map((d) => d.toJSON() as { kind: string; rules: Rule[] });
if (clusterRole?.kind !== 'ClusterRole' || landscapeRole?.kind !== 'Role') throw new Error('deploy/role.yml holds a ClusterRole and then a Role');

/** Resources whose objects the operator uses in its landscape namespace only. */
const LANDSCAPE_RESOURCES = [IOTSERVICE_PLURAL, `${IOTSERVICE_PLURAL}/status`, `${IOTSERVICE_PLURAL}/finalizers`, 'leases', 'certificates', 'issuers'];
/** Verbs the operator uses on a resource in its landscape namespace only. */
const LANDSCAPE_VERBS: Readonly<Record<string, readonly string[]>> = { secrets: ['delete'] };

function grants(rules: readonly Rule[], group: string, resource: string, verb: string): boolean {
  return rules.some((r) => r.apiGroups.includes(group) && r.resources.includes(resource) && (r.verbs.includes(verb) || r.verbs.includes('*')));
}

/** Every `<verb> <group>/<resource>` of `computed` that deploy/role.yml does not grant where the operator needs it. */
function missing(computed: readonly PolicyRule[]): string[] {
  return computed.flatMap(({ apiGroups: [group], resources: [resource], verbs, reasons }) => {
    const where = (verb: string) => (LANDSCAPE_RESOURCES.includes(resource) || LANDSCAPE_VERBS[resource]?.includes(verb) ? [...clusterRole!.rules, ...landscapeRole!.rules] : clusterRole!.rules);
    return verbs.filter((verb) => !grants(where(verb), group, resource, verb)).map((verb) => `${verb} ${group}/${resource} (${reasons.join('; ')})`);
  });
}

describe('the RBAC of deploy/role.yml and what the IoT controllers declare', () => {
  const declarations = recordControllers(runtime, (mgr) => registerControllers(mgr as runtime.Manager, { ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 4 }));
  const computed = policyRules(declarations, extraPermissions, { metricsService: false });

  test('every controller is recorded: the ingestion monitor, the IoTService controller and the orphaned-namespace clean-up', () => {
    assert.deepEqual(
      declarations.filter((d) => d.role === 'for').map((d) => `${d.controller}: ${d.type.kind}`),
      ['0: IoTService', '1: IoTService', '2: Namespace'],
    );
  });

  test('every rule the generator computes is granted (ClusterRole; IoTServices, the Lease, Certificates, Issuers and deleting Secrets also by the landscape Role)', () => {
    assert.deepEqual(missing(computed), []);
  });

  test('CustomResourceDefinitions are read and patched by name only: the IoTService CRD (its conversion, crd-conversion.ts)', () => {
    const crdRules = clusterRole!.rules.filter((r) => r.resources.includes('customresourcedefinitions'));
    assert.deepEqual(crdRules.map((r) => ({ verbs: r.verbs, resourceNames: r.resourceNames })), [{ verbs: ['get', 'patch'], resourceNames: [IOTSERVICE_CRD_NAME] }]);
  });

  test('a right the RBAC lacks is found', () => {
    const more = policyRules(declarations, [...extraPermissions, { type: runtime.Kinds.ConfigMap, verbs: ['delete'], reason: 'a clean-up the RBAC does not allow' }], { metricsService: false });
    assert.deepEqual(missing(more), ['delete /configmaps (watches(ConfigMap); extraPermissions(ConfigMap): children in instance namespaces: server-side applied, replaced when apply cannot converge; the credentials Secret created, then only completed with keys it lacks; extraPermissions(ConfigMap): a clean-up the RBAC does not allow)']);
  });
});
