/**
 * The instance's PodDisruptionBudgets: one per component, so a voluntary disruption (`kubectl
 * drain`, a node upgrade's evictions) never takes two pods of one component at once.
 *
 * Guarantees: `desiredDisruptionBudget` selects the component's pods (its selector labels) and
 * allows at most one of them unavailable through evictions: a component of several replicas keeps
 * all but one serving while a node drains, and a component of one replica can still be evicted
 * (a budget of zero would hold every drain of its node forever). It limits evictions only, never a
 * rollout the operator starts, nor a pod's own failure. Spreading a component's replicas over
 * nodes is the scheduler's default topology spreading (by host name and zone); no affinity is
 * added for it.
 */

import type { V1PodDisruptionBudget } from '@kubernetes/client-node';
import type { ComponentName } from '../api/iotservice.ts';
import type { Instance } from './instance.ts';
import { componentSelector, instanceLabels } from './labels.ts';

export function desiredDisruptionBudget(instance: Instance, component: ComponentName): V1PodDisruptionBudget {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: component, namespace: instance.namespace, labels: instanceLabels(instance) },
    spec: { maxUnavailable: 1, selector: { matchLabels: componentSelector(instance, component) } },
  };
}
