/**
 * Where an IoTService may place its pods, within the operator's tenant policy: which taints its
 * tolerations may name, which node labels its nodeSelector and affinities may use, and which
 * pods its pod (anti-)affinity may name.
 *
 * Guarantees: `checkPlacement` looks at `spec.<component>.placement` of every component, in the
 * order of COMPONENTS, and returns the first refusal as a typed `Failure` naming the field (its
 * v1beta1 path), the value, the allowed values and the flag, or undefined when all is allowed:
 * - `TolerationNotAllowed`: a toleration whose key is not in `--allowed-toleration-keys`; a
 *   toleration without a key tolerates every taint (whatever its operator), so it is allowed only
 *   when the list holds `*`, which allows every toleration. The default list is empty: tolerating
 *   a taint lets pods onto nodes the cluster keeps for others, so no taint is tolerated unless
 *   the operator's admin names it.
 * - `NodeLabelNotAllowed`: a key of `nodeSelector`, of a node affinity term's `matchExpressions`
 *   or `matchFields` (required and preferred terms), or a pod (anti-)affinity term's
 *   `topologyKey` that is not in `--allowed-node-label-keys` (`*`: any key). The default,
 *   `DEFAULT_NODE_LABEL_KEYS`, is the well-known labels the kubelet and cloud providers set on
 *   every node — host name, operating system, architecture, zone, region, instance type — and the
 *   node field `metadata.name` (as much as the host name says): they say where and on what a pod
 *   runs, not whose nodes they are, so placements spreading over zones or pinning to a host keep
 *   working, while labels that mark a node pool (and the nodes someone keeps for themselves) must
 *   be allowed by name.
 * - `PodAffinityNotAllowed`: a pod affinity or anti-affinity term (required or preferred) that
 *   may select pods outside the instance namespace: `namespaces` naming another namespace, or a
 *   `namespaceSelector` that does not pin the namespace to the instance's own (a `matchLabels`
 *   or `In` requirement on `kubernetes.io/metadata.name` admitting only it; `{}` selects every
 *   namespace). Such a term would let an instance find, follow or avoid another tenant's pods.
 *   No flag allows it. A term with neither field selects the instance's own pods only.
 * It does no I/O.
 */
import { COMPONENTS, type DefaultedIoTServiceSpec } from '../api/iotservice.ts';
import type { Failure } from '../failure.ts';

/** Allows every key in `--allowed-toleration-keys` and `--allowed-node-label-keys`. */
export const ANY_KEY = '*';

/** The node label keys allowed when `--allowed-node-label-keys` is not given (see above). */
export const DEFAULT_NODE_LABEL_KEYS: readonly string[] = [
  'kubernetes.io/hostname',
  'kubernetes.io/os',
  'kubernetes.io/arch',
  'topology.kubernetes.io/zone',
  'topology.kubernetes.io/region',
  'node.kubernetes.io/instance-type',
  'metadata.name',
];

/** The namespace label every namespace carries with its own name (immutable, set by the API server). */
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

export interface PlacementPolicy {
  /** Taint keys tolerations may name; `*`: every toleration, a key-less one included. */
  allowedTolerationKeys: readonly string[];
  /** Node label keys (and node field `metadata.name`) placements may use; `*`: any. */
  allowedNodeLabelKeys: readonly string[];
}

type Placement = NonNullable<DefaultedIoTServiceSpec['gateway']['placement']>;
type Affinity = NonNullable<Placement['affinity']>;
type NodeSelectorTerm = NonNullable<NonNullable<NonNullable<Affinity['nodeAffinity']>['requiredDuringSchedulingIgnoredDuringExecution']>['nodeSelectorTerms'][number]>;
type PodAffinityTerm = NonNullable<NonNullable<Affinity['podAffinity']>['requiredDuringSchedulingIgnoredDuringExecution']>[number];
type LabelSelector = NonNullable<PodAffinityTerm['namespaceSelector']>;

const listed = (keys: readonly string[]) => (keys.length > 0 ? keys.join(', ') : '(none)');
const allows = (keys: readonly string[], key: string) => keys.includes(ANY_KEY) || keys.includes(key);

export function checkPlacement(spec: DefaultedIoTServiceSpec, namespace: string, policy: PlacementPolicy): Failure | undefined {
  for (const component of COMPONENTS) {
    const placement = spec[component].placement;
    if (!placement) continue;
    const path = `spec.${component}.placement`;
    const refusal =
      tolerationRefusal(path, placement, policy.allowedTolerationKeys) ??
      nodeLabelRefusal(path, placement, policy.allowedNodeLabelKeys) ??
      podAffinityRefusal(`${path}.affinity`, placement.affinity, namespace);
    if (refusal) return refusal;
  }
  return undefined;
}

function tolerationRefusal(path: string, placement: Placement, allowed: readonly string[]): Failure | undefined {
  for (const [i, toleration] of (placement.tolerations ?? []).entries()) {
    const key = toleration.key ?? '';
    if (key === '' && !allowed.includes(ANY_KEY)) {
      return {
        reason: 'TolerationNotAllowed',
        message: `${path}.tolerations[${i}] has no key and so tolerates every taint, which this operator does not allow (--allowed-toleration-keys: ${listed(allowed)}; only * allows it); name the taint key.`,
      };
    }
    if (key !== '' && !allows(allowed, key)) {
      return {
        reason: 'TolerationNotAllowed',
        message: `${path}.tolerations[${i}].key ${key} is not allowed by this operator (--allowed-toleration-keys: ${listed(allowed)}); tolerate only taints of those keys.`,
      };
    }
  }
  return undefined;
}

/** Every node label key a placement uses, each with the field it is in. */
function nodeLabelKeys(path: string, placement: Placement): Array<{ field: string; key: string }> {
  const keys = Object.keys(placement.nodeSelector ?? {}).map((key) => ({ field: `${path}.nodeSelector key`, key }));
  const inTerm = (term: NodeSelectorTerm, at: string) =>
    (['matchExpressions', 'matchFields'] as const).flatMap((list) => (term[list] ?? []).map((r, i) => ({ field: `${at}.${list}[${i}].key`, key: r.key })));
  const node = placement.affinity?.nodeAffinity;
  const nodePath = `${path}.affinity.nodeAffinity`;
  (node?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? []).forEach((term, i) =>
    keys.push(...inTerm(term, `${nodePath}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[${i}]`)),
  );
  (node?.preferredDuringSchedulingIgnoredDuringExecution ?? []).forEach((weighted, i) =>
    keys.push(...inTerm(weighted.preference, `${nodePath}.preferredDuringSchedulingIgnoredDuringExecution[${i}].preference`)),
  );
  for (const { term, at } of podAffinityTerms(`${path}.affinity`, placement.affinity)) keys.push({ field: `${at}.topologyKey`, key: term.topologyKey });
  return keys;
}

function nodeLabelRefusal(path: string, placement: Placement, allowed: readonly string[]): Failure | undefined {
  const refused = nodeLabelKeys(path, placement).find(({ key }) => !allows(allowed, key));
  return (
    refused && {
      reason: 'NodeLabelNotAllowed',
      message: `${refused.field} ${refused.key} is not allowed by this operator (--allowed-node-label-keys: ${listed(allowed)}); place pods by those node labels only.`,
    }
  );
}

/** The pod affinity and anti-affinity terms of an affinity, required and preferred, each with its path. */
function podAffinityTerms(path: string, affinity: Affinity | undefined): Array<{ term: PodAffinityTerm; at: string }> {
  return (['podAffinity', 'podAntiAffinity'] as const).flatMap((kind) => {
    const part = affinity?.[kind];
    const at = `${path}.${kind}`;
    return [
      ...(part?.requiredDuringSchedulingIgnoredDuringExecution ?? []).map((term, i) => ({ term, at: `${at}.requiredDuringSchedulingIgnoredDuringExecution[${i}]` })),
      ...(part?.preferredDuringSchedulingIgnoredDuringExecution ?? []).map((weighted, i) => ({
        term: weighted.podAffinityTerm,
        at: `${at}.preferredDuringSchedulingIgnoredDuringExecution[${i}].podAffinityTerm`,
      })),
    ];
  });
}

/** True when `selector` matches no namespace but `namespace`: one of its (ANDed) requirements pins the name. */
function pinsNamespace(selector: LabelSelector, namespace: string): boolean {
  if (selector.matchLabels?.[NAMESPACE_NAME_LABEL] === namespace) return true;
  return (selector.matchExpressions ?? []).some(
    (r) => r.key === NAMESPACE_NAME_LABEL && r.operator === 'In' && (r.values ?? []).length > 0 && (r.values ?? []).every((v) => v === namespace),
  );
}

function podAffinityRefusal(path: string, affinity: Affinity | undefined, namespace: string): Failure | undefined {
  const outside = (field: string, value: string): Failure => ({
    reason: 'PodAffinityNotAllowed',
    message:
      `${field} ${value} may select pods outside the instance namespace ${namespace}, which this operator does not allow (no flag allows it): ` +
      `pod affinity may name the instance's own pods only; leave namespaces and namespaceSelector unset.`,
  });
  for (const { term, at } of podAffinityTerms(path, affinity)) {
    const other = (term.namespaces ?? []).find((n) => n !== namespace);
    if (other !== undefined) return outside(`${at}.namespaces`, other);
    if (term.namespaceSelector && !pinsNamespace(term.namespaceSelector, namespace)) return outside(`${at}.namespaceSelector`, JSON.stringify(term.namespaceSelector));
  }
  return undefined;
}
