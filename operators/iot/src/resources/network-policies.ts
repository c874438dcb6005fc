/**
 * The instance's NetworkPolicies.
 *
 * Guarantees: `instance-isolation` selects every pod of the instance and admits ingress only from
 * pods of the same instance (so no other namespace, instance or landscape can reach them);
 * `gateway-devices` additionally admits device traffic from anywhere to the gateway pods, on the
 * ports of the enabled protocols only (with the right TCP/UDP protocol per port). Policies are
 * additive, so all other ports of the gateway stay instance-internal.
 */

import type {
  V1NetworkPolicy,
  V1NetworkPolicyIngressRule,
  V1NetworkPolicyPeer,
  V1NetworkPolicySpec,
} from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { componentSelector, instanceLabels } from './labels.ts';
import { gatewayPorts } from './ports.ts';

/**
 * An ingress rule as the API server reads and writes it. (@kubernetes/client-node's model names
 * the `from` field `_from` and renames it only in its own serializer; our client sends JSON as is.)
 */
export type NetworkPolicyIngressRule = Omit<V1NetworkPolicyIngressRule, '_from'> & { from?: V1NetworkPolicyPeer[] };

/** A NetworkPolicy in wire form (see NetworkPolicyIngressRule). */
export type NetworkPolicy = Omit<V1NetworkPolicy, 'spec'> & {
  spec: Omit<V1NetworkPolicySpec, 'ingress'> & { ingress?: NetworkPolicyIngressRule[] };
};

export const INSTANCE_ISOLATION_POLICY = 'instance-isolation';
export const GATEWAY_DEVICES_POLICY = 'gateway-devices';

export function desiredInstanceIsolationPolicy(instance: Instance): NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: INSTANCE_ISOLATION_POLICY, namespace: instance.namespace, labels: instanceLabels(instance) },
    spec: {
      podSelector: { matchLabels: instanceLabels(instance) },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: { matchLabels: instanceLabels(instance) } }] }],
    },
  };
}

export function desiredGatewayDevicesPolicy(instance: Instance): NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: GATEWAY_DEVICES_POLICY, namespace: instance.namespace, labels: instanceLabels(instance) },
    spec: {
      podSelector: { matchLabels: componentSelector(instance, 'gateway') },
      policyTypes: ['Ingress'],
      ingress: [{ ports: gatewayPorts(instance.spec.gateway.protocols).map((p) => ({ protocol: p.protocol, port: p.port })) }],
    },
  };
}
