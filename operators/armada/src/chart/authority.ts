/**
 * Whose authority Helm acts with for an ArmadaChart (Flux's `serviceAccountName`): a
 * ServiceAccount of the ArmadaChart's own namespace, impersonated, so a chart can install,
 * upgrade, roll back and uninstall only what that account may — never what the operator may.
 *
 * Guarantees (pure): `spec.serviceAccountName` names the account; without it the operator's
 * `defaultServiceAccount` (of the chart's namespace) is used; without either, Helm acts as the
 * operator itself, unless the operator requires an account (`requireServiceAccount`): then the
 * chart gets no authority at all and a reason saying what to set. The account is always looked
 * up in the ArmadaChart's namespace, so naming an account cannot borrow another namespace's rights.
 */
import type { ArmadaChartObject } from '../api/armada.ts';

export interface AuthorityOptions {
  /** The ServiceAccount (in each chart's namespace) used when a chart names none. */
  defaultServiceAccount?: string;
  /** Refuse charts that name no ServiceAccount when there is no default either. */
  requireServiceAccount?: boolean;
}

export type Authority =
  | { kind: 'service-account'; namespace: string; name: string; user: string }
  | { kind: 'operator' }
  | { kind: 'none'; reason: string };

export function authorityOf(chart: ArmadaChartObject, options: AuthorityOptions): Authority {
  const name = chart.spec.serviceAccountName || options.defaultServiceAccount;
  const namespace = chart.metadata.namespace ?? 'default';
  if (name) return { kind: 'service-account', namespace, name, user: `system:serviceaccount:${namespace}:${name}` };
  if (options.requireServiceAccount) {
    return { kind: 'none', reason: `the operator requires every ArmadaChart to name the ServiceAccount Helm acts as: set spec.serviceAccountName to an account of namespace ${namespace}` };
  }
  return { kind: 'operator' };
}

/** "ServiceAccount a/b" or "the operator", for reasons and Events. */
export function describeAuthority(authority: Authority): string {
  return authority.kind === 'service-account' ? `ServiceAccount ${authority.namespace}/${authority.name}` : 'the operator';
}
