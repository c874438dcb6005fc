/**
 * The instance's NetworkPolicies: each component reachable only by the components that use it,
 * on the ports they use, and reaching only those it uses.
 *
 * Guarantees: `instance-isolation` selects every pod of the instance and admits no ingress by
 * itself, so every connection into a pod of the instance is one the policies below admit (none
 * from another namespace, instance or landscape unless named). The component policies
 * `<component>-peers` (`gateway-peers`, `core-peers`, `processing-peers`, `broker-peers`,
 * `database-peers`) each select one component's pods, Ingress and Egress, and admit exactly the
 * flows of `COMPONENT_FLOWS` into and out of it, on its TCP port: gateway → broker 4222 and core
 * 8080 (device checks); core → database 5432 and broker 4222 (core uses no broker today; the
 * flow is open so that core may publish to it, e.g. device revocation notices); processing →
 * broker 4222 and database 5432; broker → broker 6222 (the routes of three brokers); with three
 * database replicas (PATRONI_FLOWS) database → database 5432 (replication, pg_rewind) and 8008
 * (Patroni's REST API), and `database-api-server` lets the database pods reach the API server,
 * Patroni's store, at the addresses behind Service `kubernetes` (api-server.ts); with backups
 * (BACKUP_FLOWS) database → backup and backup → database on pgBackRest's 8432 (WAL archived,
 * backups taken), in `database-peers` and the repository host's `backup-peers` (with an S3
 * target it also lets the repository host alone out to the endpoint's port, any address), and
 * `backup-status` admits the operator to the repository host's 8433 alone (its /info); with
 * `spec.restore` (restore.ts), until the restore is done, `database-peers` lets the database pods
 * reach the source instance's repository host on 8432, and the source's `backup-peers` admits
 * them there (`RestorePeers`): one port, between those pods alone; restoring from the bucket
 * (`fromBucket`), the database pods may go out to the S3 endpoint's port instead. So the
 * gateway never reaches the database, and no component reaches another's health port (8081) or
 * the broker's monitoring (8222). `gateway-devices` admits device traffic to the gateway pods
 * only from the CIDRs named in `spec.gateway.deviceSources`, on the ports of the enabled
 * protocols only (with the right TCP/UDP protocol per port) — with no sources it admits nothing;
 * `core-applications` likewise admits applications to core's API port (8080) only from the CIDRs
 * of `spec.core.applicationSources`, and nothing without them;
 * `operator-monitoring` admits the operator — pods of the landscape namespace, where it runs — to
 * the broker pods' monitoring port (8222) alone, which it reads the ingestion from (ingestion.ts);
 * `instance-egress` lets every pod of the instance reach DNS in kube-system (port 53, UDP and
 * TCP) and the destinations declared in `spec.egress`, and nothing else beyond its component
 * policy. Policies are additive: a connection passes when some policy selecting the source
 * allows it out and some policy selecting the destination lets it in.
 *
 * Not decided here: traffic from the node a pod runs on, where the kubelet's probes come from
 * (8081; the broker's 8222 and 4222; the database's 5432), which NetworkPolicy implementations
 * let through (kube-router, the local cluster's, admits the node's own addresses to its pods). So
 * no policy admits anything to the health ports (8081), which nothing else uses: no Prometheus
 * scrapes the components (the operator exports the instances' metrics itself).
 */

import type {
  V1NetworkPolicy,
  V1NetworkPolicyEgressRule,
  V1NetworkPolicyIngressRule,
  V1NetworkPolicyPeer,
  V1NetworkPolicySpec,
} from '@kubernetes/client-node';
import { COMPONENTS } from '../api/iotservice.ts';
import { BACKUP, backsUp, s3HostPort } from './backup.ts';
import type { Instance } from './instance.ts';
import { runsPatroni } from './patroni.ts';
import type { RestorePeers } from './restore.ts';
import { componentSelector, instanceLabels, type WorkloadName } from './labels.ts';
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
export const CORE_APPLICATIONS_POLICY = 'core-applications';
export const INSTANCE_EGRESS_POLICY = 'instance-egress';
export const OPERATOR_MONITORING_POLICY = 'operator-monitoring';
export const DATABASE_API_SERVER_POLICY = 'database-api-server';
export const BACKUP_STATUS_POLICY = 'backup-status';
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

/** A connection one component opens to another (itself, for the broker's routes), on one TCP port. */
export interface ComponentFlow {
  from: WorkloadName;
  to: WorkloadName;
  port: number;
}

/** Every connection between the instance's own pods (see the module comment), one database replica. */
export const COMPONENT_FLOWS: readonly ComponentFlow[] = [
  { from: 'gateway', to: 'broker', port: PORTS.brokerClient },
  { from: 'gateway', to: 'core', port: PORTS.http },
  { from: 'core', to: 'database', port: PORTS.database },
  { from: 'core', to: 'broker', port: PORTS.brokerClient },
  { from: 'processing', to: 'broker', port: PORTS.brokerClient },
  { from: 'processing', to: 'database', port: PORTS.database },
  { from: 'broker', to: 'broker', port: PORTS.brokerCluster },
];

/** Between three database replicas under Patroni: replication and pg_rewind (5432), Patroni's REST API (8008). */
export const PATRONI_FLOWS: readonly ComponentFlow[] = [
  { from: 'database', to: 'database', port: PORTS.database },
  { from: 'database', to: 'database', port: PORTS.patroni },
];

/** With backups, between the database and the repository host, both ways on pgBackRest's port: WAL archived, backups taken. */
export const BACKUP_FLOWS: readonly ComponentFlow[] = [
  { from: 'database', to: BACKUP, port: PORTS.pgbackrest },
  { from: BACKUP, to: 'database', port: PORTS.pgbackrest },
];

/** The instance's flows: COMPONENT_FLOWS, PATRONI_FLOWS with three database replicas, BACKUP_FLOWS with backups. */
export function componentFlows(instance: Instance): readonly ComponentFlow[] {
  return [...COMPONENT_FLOWS, ...(runsPatroni(instance) ? PATRONI_FLOWS : []), ...(backsUp(instance) ? BACKUP_FLOWS : [])];
}

/** The name of a component's policy: `<component>-peers`. */
export function componentPeersPolicyName(component: WorkloadName): string {
  return `${component}-peers`;
}

/** Every pod of the instance; no ingress by itself (the component policies admit what is used). */
export function desiredInstanceIsolationPolicy(instance: Instance): NetworkPolicy {
  return policy(instance, INSTANCE_ISOLATION_POLICY, {
    podSelector: { matchLabels: instanceLabels(instance) },
    policyTypes: ['Ingress'],
  });
}

/** `flows` as rules: one per port (in the order of the flows), naming the pods of each `peer` component once. */
function rulesByPort(instance: Instance, flows: readonly ComponentFlow[], peer: (flow: ComponentFlow) => WorkloadName) {
  const ports = [...new Set(flows.map((f) => f.port))];
  return ports.map((port) => ({
    peers: [...new Set(flows.filter((f) => f.port === port).map(peer))].map((c) => ({ podSelector: { matchLabels: componentSelector(instance, c) } })),
    ports: [{ protocol: 'TCP', port }],
  }));
}

/** The database pods (`component`) or the repository host (BACKUP) of instance `id` in namespace `namespace`: a peer in another instance namespace. */
function otherInstancePeer(namespace: string, id: string, component: WorkloadName): V1NetworkPolicyPeer {
  return { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } }, podSelector: { matchLabels: componentSelector({ landscape: '', id }, component) } };
}

/**
 * With an S3 target, the repository host's out to the endpoint: its TCP port on any address (a
 * policy cannot name a host; an endpoint's addresses may change), which nothing else of the
 * instance may reach but the database pods while they restore from the bucket.
 */
function s3Egress(instance: Instance): V1NetworkPolicyEgressRule[] {
  const s3 = instance.spec.backup?.target.s3;
  return s3 ? [{ ports: [{ protocol: 'TCP', port: s3HostPort(s3).port }] }] : [];
}

/**
 * One component's pods: in from and out to exactly the components of its `COMPONENT_FLOWS`, on
 * their ports; with `restore` (restore.ts) the database's out to the source's repository host
 * on 8432, or to the S3 endpoint's port when it restores from the bucket, while its restore is
 * not done, and the repository host's in from the database pods of each instance restoring from
 * this one, on 8432 alone.
 */
export function desiredComponentPeersPolicy(instance: Instance, component: WorkloadName, restore: RestorePeers = {}): NetworkPolicy {
  const flows = componentFlows(instance);
  const pgbackrest = [{ protocol: 'TCP', port: PORTS.pgbackrest }];
  const restorers = component === BACKUP ? (restore.restorers ?? []) : [];
  const source = component === 'database' ? restore.source : undefined;
  const ingress: NetworkPolicyIngressRule[] = [
    ...rulesByPort(instance, flows.filter((f) => f.to === component), (f) => f.from).map(({ peers, ports }) => ({ from: peers, ports })),
    ...(restorers.length > 0 ? [{ from: restorers.map((r) => otherInstancePeer(r.namespace, r.id, 'database')), ports: pgbackrest }] : []),
  ];
  const egress: V1NetworkPolicyEgressRule[] = [
    ...rulesByPort(instance, flows.filter((f) => f.from === component), (f) => f.to).map(({ peers, ports }) => ({ to: peers, ports })),
    ...(source ? [{ to: [otherInstancePeer(source.namespace, source.id, BACKUP)], ports: pgbackrest }] : []),
    ...(component === BACKUP || (component === 'database' && restore.bucket) ? s3Egress(instance) : []),
  ];
  return policy(instance, componentPeersPolicyName(component), {
    podSelector: { matchLabels: componentSelector(instance, component) },
    policyTypes: ['Ingress', 'Egress'],
    ...(ingress.length > 0 ? { ingress } : {}),
    ...(egress.length > 0 ? { egress } : {}),
  });
}

/** The component policies, in the order of COMPONENTS, then the repository host's with backups. */
export function desiredComponentPeersPolicies(instance: Instance, restore: RestorePeers = {}): NetworkPolicy[] {
  const workloads: WorkloadName[] = [...COMPONENTS, ...(backsUp(instance) ? [BACKUP] : [])];
  return workloads.map((workload) => desiredComponentPeersPolicy(instance, workload, restore));
}

/** `component`'s pods admit the CIDRs of `sources` on `ports`; with no sources the policy admits nothing. */
function sourcesPolicy(instance: Instance, name: string, component: WorkloadName, sources: readonly string[], ports: NetworkPolicyIngressRule['ports']): NetworkPolicy {
  return policy(instance, name, {
    podSelector: { matchLabels: componentSelector(instance, component) },
    policyTypes: ['Ingress'],
    ...(sources.length > 0 ? { ingress: [{ from: sources.map((cidr) => ({ ipBlock: { cidr } })), ports }] } : {}),
  });
}

export function desiredGatewayDevicesPolicy(instance: Instance): NetworkPolicy {
  const ports = gatewayPorts(instance.spec.gateway.protocols).map((p) => ({ protocol: p.protocol, port: p.port }));
  return sourcesPolicy(instance, GATEWAY_DEVICES_POLICY, 'gateway', instance.spec.gateway.deviceSources ?? [], ports);
}

/** Applications from the CIDRs of `spec.core.applicationSources` reach core's API port (8080), nothing else of core. */
export function desiredCoreApplicationsPolicy(instance: Instance): NetworkPolicy {
  return sourcesPolicy(instance, CORE_APPLICATIONS_POLICY, 'core', instance.spec.core.applicationSources ?? [], [{ protocol: 'TCP', port: PORTS.http }]);
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

/** Three database replicas: their pods may reach the API server (Patroni's store), at its addresses (api-server.ts); one replica: none. */
export function desiredDatabaseApiServerPolicy(instance: Instance): NetworkPolicy | undefined {
  if (!runsPatroni(instance)) return undefined;
  const egress = instance.apiServer.map(({ address, port }) => ({
    to: [{ ipBlock: { cidr: `${address}/${address.includes(':') ? 128 : 32}` } }],
    ports: [{ protocol: 'TCP', port }],
  }));
  return policy(instance, DATABASE_API_SERVER_POLICY, {
    podSelector: { matchLabels: componentSelector(instance, 'database') },
    policyTypes: ['Egress'],
    ...(egress.length > 0 ? { egress } : {}),
  });
}

/** With backups: the operator (pods of the landscape namespace) may read the repository host's state (/info on 8433) and nothing else of it. */
export function desiredBackupStatusPolicy(instance: Instance): NetworkPolicy | undefined {
  if (!backsUp(instance)) return undefined;
  return policy(instance, BACKUP_STATUS_POLICY, {
    podSelector: { matchLabels: componentSelector(instance, BACKUP) },
    policyTypes: ['Ingress'],
    ingress: [{ from: [landscapePeer(instance)], ports: [{ protocol: 'TCP', port: PORTS.backupStatus }] }],
  });
}

/** The pods of the landscape namespace, where the operator runs. */
function landscapePeer(instance: Instance): V1NetworkPolicyPeer {
  return { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': instance.landscape } } };
}

export function desiredOperatorMonitoringPolicy(instance: Instance): NetworkPolicy {
  return policy(instance, OPERATOR_MONITORING_POLICY, {
    podSelector: { matchLabels: componentSelector(instance, 'broker') },
    policyTypes: ['Ingress'],
    ingress: [
      {
        from: [landscapePeer(instance)],
        ports: [{ protocol: 'TCP', port: PORTS.brokerMonitor }],
      },
    ],
  });
}
