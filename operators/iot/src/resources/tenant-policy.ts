/**
 * What an IoTService author may ask the operator for, beyond what the CRD schema checks: the
 * operator's own limits, set by its flags.
 *
 * Guarantees: `checkTenantPolicy` accepts a spec only when every image it would run comes from an
 * allowed registry (the effective `spec.registry` and every `spec.<component>.image`, matched on
 * whole path segments, so `registry.example.com.evil.io` is not `registry.example.com`), the
 * gateway's Service type is allowed, every component's placement stays within the operator's
 * placement policy (placement-policy.ts: tolerated taints, node label keys, pod affinity within
 * the instance namespace `namespace`), and every quota value stays within the operator's maximum;
 * otherwise it returns a typed `Failure` naming the value, the allowed values and the flag. It
 * returns the instance namespace's quota (spec values over the defaults, canonical quantities).
 * It does no I/O.
 */
import { COMPONENTS, type DefaultedIoTServiceSpec, type GatewayServiceType } from '../api/iotservice.ts';
import type { Failure } from '../failure.ts';
import { checkPlacement, DEFAULT_NODE_LABEL_KEYS, type PlacementPolicy } from './placement-policy.ts';
import { canonicalQuantity, quantityNanos } from './quantity.ts';

export const QUOTA_RESOURCES = ['cpu', 'memory', 'storage'] as const;
export type QuotaResource = (typeof QUOTA_RESOURCES)[number];
/** Quota values by resource, as quantities. */
export type QuotaValues = Readonly<Record<QuotaResource, string>>;

export interface TenantPolicy extends PlacementPolicy {
  /** Registries (host with optional port and path) images may come from. */
  allowedRegistries: readonly string[];
  /** Gateway Service types an IoTService may ask for. */
  allowedServiceTypes: readonly GatewayServiceType[];
  /** The instance namespace's ResourceQuota when the spec sets no value. */
  defaultQuota: QuotaValues;
  /** The most an IoTService may ask for in `spec.quota`. */
  maxQuota: QuotaValues;
  /** LimitRange defaults for containers that set no resources of their own. */
  containerDefaults: { limits: Readonly<Record<string, string>>; requests: Readonly<Record<string, string>> };
}

/**
 * The policy when no flag says otherwise: images from the default registry only, ClusterIP only,
 * no taint tolerated, nodes chosen by their well-known labels only (placement-policy.ts).
 */
export function defaultTenantPolicy(defaultRegistry: string): TenantPolicy {
  return {
    allowedRegistries: [defaultRegistry],
    allowedServiceTypes: ['ClusterIP'],
    allowedTolerationKeys: [],
    allowedNodeLabelKeys: DEFAULT_NODE_LABEL_KEYS,
    defaultQuota: { cpu: '4', memory: '8Gi', storage: '100Gi' },
    maxQuota: { cpu: '16', memory: '32Gi', storage: '1Ti' },
    containerDefaults: { limits: { cpu: '1', memory: '1Gi' }, requests: { cpu: '10m', memory: '32Mi' } },
  };
}

export type TenantPolicyResult = { ok: true; quota: QuotaValues } | { ok: false; failure: Failure };

/** True when `reference` (a registry or an image) lies in `registry`: equal, or below it at a '/'. */
function inRegistry(reference: string, registry: string): boolean {
  const base = registry.replace(/\/+$/, '');
  if (base === '') return !reference.includes('/');
  return reference === base || reference.startsWith(`${base}/`);
}

export function checkTenantPolicy(spec: DefaultedIoTServiceSpec, registry: string, namespace: string, policy: TenantPolicy): TenantPolicyResult {
  const allowed = policy.allowedRegistries;
  const list = allowed.map((r) => r || '(none)').join(', ');
  const images = COMPONENTS.flatMap((component) => {
    const image = spec[component].image;
    return image ? [{ field: `spec.${component}.image`, reference: image }] : [];
  });
  const uncovered = images.filter(({ reference }) => !allowed.some((r) => inRegistry(reference, r)));
  const needsRegistry = images.length < COMPONENTS.length;
  if (needsRegistry && !allowed.some((r) => inRegistry(registry, r) && (r !== '' || registry === ''))) {
    return refused('RegistryNotAllowed', `Image registry ${registry || '(none)'} is not allowed by this operator (--allowed-registries: ${list}); set spec.registry to one of them.`);
  }
  if (uncovered[0]) {
    return refused('RegistryNotAllowed', `${uncovered[0].field} ${uncovered[0].reference} is not from a registry this operator allows (--allowed-registries: ${list}); use an image from one of them.`);
  }
  const serviceType = spec.gateway.serviceType;
  if (!policy.allowedServiceTypes.includes(serviceType)) {
    return refused(
      'ServiceTypeNotAllowed',
      `spec.gateway.serviceType ${serviceType} is not allowed by this operator (--allowed-service-types: ${policy.allowedServiceTypes.join(', ')}); use one of them.`,
    );
  }
  const placement = checkPlacement(spec, namespace, policy);
  if (placement) return { ok: false, failure: placement };
  const quota: Record<QuotaResource, string> = { ...policy.defaultQuota };
  for (const resource of QUOTA_RESOURCES) {
    const asked = spec.quota?.[resource];
    if (asked === undefined) continue;
    const max = policy.maxQuota[resource];
    if ((quantityNanos(asked) ?? 0n) > (quantityNanos(max) ?? 0n)) {
      return refused('QuotaAboveLimit', `spec.quota.${resource} ${asked} is more than this operator allows (--max-quota ${resource}=${max}); ask for at most ${max}.`);
    }
    quota[resource] = canonicalQuantity(asked);
  }
  return { ok: true, quota };
}

function refused(reason: Failure['reason'], message: string): TenantPolicyResult {
  return { ok: false, failure: { reason, message } };
}
