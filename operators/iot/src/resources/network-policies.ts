/**
 * The instance's NetworkPolicies.
 *
 * Guarantees: `instance-isolation` selects every pod of the instance and admits ingress only from
 * pods of the same instance (so no other namespace, instance or landscape can reach them);
 * `gateway-devices` admits device traffic to the gateway pods only from the CIDRs named in
 * `spec.gateway.deviceSources`, on the ports of the enabled protocols only (with the right TCP/UDP
 * protocol per port) — with no sources it admits nothing; `instance-egress` denies every
 * connection out of the instance's pods except to pods of the same instance, DNS in kube-system
 * (port 53, UDP and TCP) and the destinations declared in `spec.egress`; `operator-monitoring`
 * admits the operator — pods of the landscape namespace, where it runs — to the broker pods'
 * monitoring port (8222) alone, which it reads the ingestion from (ingestion.ts). Policies are
 * additive, so all other ports of the gateway and the broker stay instance-internal.
 */

import type {
  V1NetworkPolicy,
  V1NetworkPolicyEgressRule,
  V1NetworkPolicyIngressRule,
  V1NetworkPolicyPeer,
  V1NetworkPolicySpec,
} from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { componentSelector, instanceLabels } from './labels.ts';
import { PORTS, gatewayPorts } from './ports.ts';

/**
 * An ingress rule as the API server reads and writes it. (@kubernetes/client-node's model names
 * the `from` field `_from` and renames it only in its own serializer; our client sends JSON as is.)
 */
export type NetworkPolicyIngressRule = Omit<V1NetworkPolicyIngressRule, '_from'> & { from?: V1NetworkPolicyPeer[] };

/** A NetworkPolicy in wire form (see NetworkPolicyIngressRule). */
export type NetworkPolicy = Omit<V1NetworkPolicy, 'spec'> & {
  spec: Omit<V1NetworkPolicySpec, 'ingress' | 'egress'> & { ingress?: NetworkPolicyIngressRule[]; egress?: V1NetworkPolicyEgressRule[] };
};

export const INSTANCE_ISOLATION_POLICY = 'instance-isolation';
export const GATEWAY_DEVICES_POLICY = 'gateway-devices';
export const INSTANCE_EGRESS_POLICY = 'instance-egress';
export const OPERATOR_MONITORING_POLICY = 'operator-monitoring';
/** Where cluster DNS runs: the kube-system namespace, by its immutable name label. */
export const DNS_NAMESPACE_SELECTOR = { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } };

function policy(instance: Instance, name: string, spec: NetworkPolicy['spec']): NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace: instance.namespace, labels: instanceLabels(instance) },
    spec,
  };
}

export function desiredInstanceIsolationPolicy(instance: Instance): NetworkPolicy {
  return policy(instance, INSTANCE_ISOLATION_POLICY, {
    podSelector: { matchLabels: instanceLabels(instance) },
    policyTypes: ['Ingress'],
    ingress: [{ from: [{ podSelector: { matchLabels: instanceLabels(instance) } }] }],
  });
}

export function desiredGatewayDevicesPolicy(instance: Instance): NetworkPolicy {
  const sources = instance.spec.gateway.deviceSources ?? [];
  return policy(instance, GATEWAY_DEVICES_POLICY, {
    podSelector: { matchLabels: componentSelector(instance, 'gateway') },
    policyTypes: ['Ingress'],
    ...(sources.length > 0
      ? {
          ingress: [
            {
              from: sources.map((cidr) => ({ ipBlock: { cidr } })),
              ports: gatewayPorts(instance.spec.gateway.protocols).map((p) => ({ protocol: p.protocol, port: p.port })),
            },
          ],
        }
      : {}),
  });
}

export function desiredEgressPolicy(instance: Instance): NetworkPolicy {
  const declared: V1NetworkPolicyEgressRule[] = (instance.spec.egress ?? []).map((rule) => ({
    to: [{ ipBlock: { cidr: rule.cidr } }],
    ...(rule.ports && rule.ports.length > 0 ? { ports: rule.ports.map((port) => ({ protocol: 'TCP', port })) } : {}),
  }));
  return policy(instance, INSTANCE_EGRESS_POLICY, {
    podSelector: { matchLabels: instanceLabels(instance) },
    policyTypes: ['Egress'],
    egress: [
      { to: [{ podSelector: { matchLabels: instanceLabels(instance) } }] },
      {
        to: [{ namespaceSelector: DNS_NAMESPACE_SELECTOR }],
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
      ...declared,
    ],
  });
}

export function desiredOperatorMonitoringPolicy(instance: Instance): NetworkPolicy {
  return policy(instance, OPERATOR_MONITORING_POLICY, {
    podSelector: { matchLabels: componentSelector(instance, 'broker') },
    policyTypes: ['Ingress'],
    ingress: [
      {
        from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': instance.landscape } } }],
        ports: [{ protocol: 'TCP', port: PORTS.brokerMonitor }],
      },
    ],
  });
}
