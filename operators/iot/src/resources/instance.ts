/**
 * An IoTService resolved against the operator configuration: everything the desired-state
 * functions need, checked once.
 *
 * Guarantees: `resolveInstance` either returns an `Instance` whose namespace name is a valid
 * DNS-1123 label, whose spec is schema-valid with every default applied and within the
 * operator's tenant policy (allowed registries, Service types, placement, quota maximum), or a
 * typed `Failure` (NamespaceNameInvalid, InvalidSpec, RegistryNotAllowed, ServiceTypeNotAllowed,
 * TolerationNotAllowed, NodeLabelNotAllowed, PodAffinityNotAllowed, QuotaAboveLimit) whose
 * message tells the user what to change. It does no I/O.
 */

import type { DefaultedIoTServiceSpec, IoTService } from '../api/iotservice.ts';
import { validateIoTServiceSpec } from '../api/validation.ts';
import { invalidSpecFailure, type Failure } from '../failure.ts';
import type { ApiServerEndpoint } from '../api-server.ts';
import { instanceNamespaceName, type NamespaceOwner } from './namespace.ts';
import { checkTenantPolicy, defaultTenantPolicy, type QuotaValues, type TenantPolicy } from './tenant-policy.ts';

/** Where pods find config.yml unless the operator is told otherwise (`--config-mount-path`): the seed's path. */
export const DEFAULT_CONFIG_MOUNT_PATH = '/etc/sap/config.yml';

/** The operator's process configuration, as far as desired state depends on it. */
export interface OperatorConfig {
  /** OPERATOR_NAME: the landscape, i.e. the namespace whose IoTService objects are processed. */
  operatorName: string;
  /** Registry/prefix for images when `spec.registry` is empty; '' means bare image names. */
  defaultRegistry: string;
  /** What IoTService authors may ask for; default `defaultTenantPolicy(defaultRegistry)`. */
  tenancy?: TenantPolicy;
  /** Where pods find config.yml; default `DEFAULT_CONFIG_MOUNT_PATH`. */
  configMountPath?: string;
  /** Where the API server is reached from pods (api-server.ts); default none. */
  apiServer?: readonly ApiServerEndpoint[];
}

export interface Instance extends NamespaceOwner {
  /** `<landscape>-<id>`, a valid DNS-1123 label. */
  namespace: string;
  /** metadata.generation of the IoTService (0 when unset). */
  generation: number;
  /** metadata.creationTimestamp of the IoTService (RFC 3339), when set. */
  createdAt?: string;
  spec: DefaultedIoTServiceSpec;
  /** Effective image registry without trailing '/', '' for none. */
  registry: string;
  /** The instance namespace's ResourceQuota values. */
  quota: QuotaValues;
  /** LimitRange defaults of the instance namespace's containers. */
  containerDefaults: TenantPolicy['containerDefaults'];
  /** Absolute path at which every pod finds config.yml. */
  configMountPath: string;
  /** Where the API server is reached from pods: what Patroni's NetworkPolicy admits (network-policies.ts). */
  apiServer: readonly ApiServerEndpoint[];
}

export type ResolveResult =
  | { ok: true; instance: Instance }
  /** `namespace` is set when the name was valid (status still reports it). */
  | { ok: false; failure: Failure; namespace?: string };

export function resolveInstance(iotService: Pick<IoTService, 'metadata' | 'spec'>, config: OperatorConfig): ResolveResult {
  const id = iotService.metadata.name ?? '';
  const namespace = instanceNamespaceName(config.operatorName, id);
  if (!namespace.ok) {
    return { ok: false, failure: { reason: 'NamespaceNameInvalid', message: namespace.error.message } };
  }
  const validated = validateIoTServiceSpec(iotService.spec);
  if (!validated.ok) {
    return { ok: false, failure: invalidSpecFailure(validated.errors), namespace: namespace.name };
  }
  const registry = (validated.spec.registry || config.defaultRegistry).replace(/\/+$/, '');
  const created = Date.parse(String(iotService.metadata.creationTimestamp ?? ''));
  const policy = config.tenancy ?? defaultTenantPolicy(config.defaultRegistry);
  const allowed = checkTenantPolicy(validated.spec, registry, namespace.name, policy);
  if (!allowed.ok) return { ok: false, failure: allowed.failure, namespace: namespace.name };
  return {
    ok: true,
    instance: {
      landscape: config.operatorName,
      id,
      ownerUid: iotService.metadata.uid ?? '',
      namespace: namespace.name,
      generation: iotService.metadata.generation ?? 0,
      ...(Number.isNaN(created) ? {} : { createdAt: new Date(created).toISOString() }),
      spec: validated.spec,
      registry,
      quota: allowed.quota,
      containerDefaults: policy.containerDefaults,
      configMountPath: config.configMountPath ?? DEFAULT_CONFIG_MOUNT_PATH,
      apiServer: config.apiServer ?? [],
    },
  };
}
