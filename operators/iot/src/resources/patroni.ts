/**
 * Three database replicas run PostgreSQL under Patroni, with the API server as its store: what
 * the instance gives Patroni there, and the label Patroni marks the primary with.
 *
 * Guarantees: `desiredPatroniAccess` is empty for one replica (nothing of it exists then); for
 * three it is ServiceAccount `database` (the database pods run as it, statefulsets.ts), Role
 * `database` and RoleBinding `database` granting that account, in the instance namespace alone,
 * what Patroni's Kubernetes store needs with ConfigMaps (Patroni's documented rules, without
 * `patronictl remove`'s deletions): ConfigMaps read, watched, created and changed (its leader
 * lock, configuration, synchronous standby and failover keys: database-leader, -config, -sync,
 * -failover), and pods read, watched and changed (it keeps each member's state in its pod's
 * annotations and its role in label ROLE_LABEL). Nothing else: no Secret, no other namespace.
 * The operator can grant only what it holds itself, so its own RBAC has these verbs too
 * (deploy/role.yml). Patroni labels the primary's pod `role: master` (PRIMARY_ROLE; the value
 * Patroni 3.0 always writes, which the image asks of later versions too) and the standbys'
 * `role: replica`; Service database-client selects the primary by it (services.ts).
 */

import type { V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { componentLabels } from './labels.ts';

export const DATABASE_SERVICE_ACCOUNT = 'database';
/** The pod label Patroni writes each member's role into. */
export const ROLE_LABEL = 'role';
/** Its value on the primary's pod. */
export const PRIMARY_ROLE = 'master';
/** Its value on a standby's pod. */
export const STANDBY_ROLE = 'replica';
/** Patroni's ConfigMaps: scope `database` (the database.sh configuration), a key each. */
export const PATRONI_CONFIGMAPS = { sync: 'database-sync', failover: 'database-failover' } as const;

/** Whether the database runs under Patroni: three replicas. */
export function runsPatroni(instance: Instance): boolean {
  return instance.spec.database.replicas > 1;
}

const RBAC_API_VERSION = 'rbac.authorization.k8s.io/v1';

/** The rules of Role `database`, in the form the API server returns them. */
export const PATRONI_RULES: V1Role['rules'] = [
  { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'update', 'patch'] },
];

/** ServiceAccount, Role and RoleBinding `database` for three replicas; nothing for one. */
export function desiredPatroniAccess(instance: Instance): Array<V1ServiceAccount | V1Role | V1RoleBinding> {
  if (!runsPatroni(instance)) return [];
  const metadata = () => ({ name: DATABASE_SERVICE_ACCOUNT, namespace: instance.namespace, labels: componentLabels(instance, 'database') });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: metadata() },
    { apiVersion: RBAC_API_VERSION, kind: 'Role', metadata: metadata(), rules: PATRONI_RULES },
    {
      apiVersion: RBAC_API_VERSION,
      kind: 'RoleBinding',
      metadata: metadata(),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: DATABASE_SERVICE_ACCOUNT },
      subjects: [{ kind: 'ServiceAccount', name: DATABASE_SERVICE_ACCOUNT, namespace: instance.namespace }],
    },
  ];
}
