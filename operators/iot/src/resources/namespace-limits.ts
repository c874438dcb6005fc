/**
 * The instance namespace's resource limits: ResourceQuota `instance-quota` and LimitRange
 * `instance-limits`.
 *
 * Guarantees: the quota caps what all pods of the instance request together (`requests.cpu`,
 * `requests.memory`) and what its volume claims request (`requests.storage`), with the values
 * resolved by the tenant policy (spec within the operator's maximum, else its defaults); the
 * LimitRange gives every container that sets no resources the operator's default requests and
 * limits, so every pod can be admitted under the quota. Both are written before any workload
 * (write stage 1), in the canonical quantity form the API server returns.
 */
import type { V1LimitRange, V1LimitRangeItem, V1ResourceQuota } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { instanceLabels } from './labels.ts';
import { canonicalResourceList } from './quantity.ts';

/**
 * A LimitRange in wire form: @kubernetes/client-node's model names the `default` field `_default`
 * and renames it only in its own serializer; our client sends JSON as is.
 */
export type LimitRange = Omit<V1LimitRange, 'spec'> & { spec: { limits: Array<Omit<V1LimitRangeItem, '_default'> & { default?: Record<string, string> }> } };

export const INSTANCE_QUOTA_NAME = 'instance-quota';
export const INSTANCE_LIMITS_NAME = 'instance-limits';

export function desiredResourceQuota(instance: Instance): V1ResourceQuota {
  return {
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: { name: INSTANCE_QUOTA_NAME, namespace: instance.namespace, labels: instanceLabels(instance) },
    spec: {
      hard: canonicalResourceList({
        'requests.cpu': instance.quota.cpu,
        'requests.memory': instance.quota.memory,
        'requests.storage': instance.quota.storage,
      }),
    },
  };
}

export function desiredLimitRange(instance: Instance): LimitRange {
  return {
    apiVersion: 'v1',
    kind: 'LimitRange',
    metadata: { name: INSTANCE_LIMITS_NAME, namespace: instance.namespace, labels: instanceLabels(instance) },
    spec: {
      limits: [
        {
          type: 'Container',
          default: canonicalResourceList(instance.containerDefaults.limits),
          defaultRequest: canonicalResourceList(instance.containerDefaults.requests),
        },
      ],
    },
  };
}
