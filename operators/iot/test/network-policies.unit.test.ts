/**
 * The instance's NetworkPolicies (src/resources/network-policies.ts), read the way a NetworkPolicy
 * implementation reads them: a small evaluator of the policies the operator applies
 * (`desiredChildren`) decides, for a source pod, a destination pod and a port, whether the
 * destination's policies let the connection in and the source's let it out. Checked with it:
 * between the instance's own components exactly the connections the reference components use
 * pass, on their ports (written out here, not taken from the operator's list) — the gateway never
 * reaches the database, nothing reaches a health port; another instance's pods reach nothing; the
 * landscape (the operator) reaches the broker's monitoring port only; every component reaches DNS;
 * applications reach core's API port from spec.core.applicationSources alone. Then each policy's
 * own shape: device and application sources, declared egress, the operator's port, CIDRs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BlockList, isIP } from 'node:net';
import type { V1PodSpec } from '@kubernetes/client-node';
import { COMPONENTS, type ComponentName } from '../src/api/iotservice.ts';
import {
  componentLabels,
  desiredChildren,
  desiredComponentPeersPolicy,
  desiredCoreApplicationsPolicy,
  desiredEgressPolicy,
  desiredGatewayDevicesPolicy,
  desiredInstanceIsolationPolicy,
  desiredOperatorMonitoringPolicy,
  generateCredentials,
  resolveInstance,
  type Instance,
  type NetworkPolicy,
  type WorkloadName,
} from '../src/resources/index.ts';
import { iotService, TEST_BACKUP, TEST_CONFIG, testBackupCertificates, testGatewayTls, testInstance } from './fixtures.ts';

type Selector = { matchLabels?: Record<string, string>; matchExpressions?: unknown[] };
type Peer = { podSelector?: Selector; namespaceSelector?: Selector; ipBlock?: { cidr: string } };
type Rule = { from?: Peer[]; to?: Peer[]; ports?: Array<{ protocol?: string; port?: number | string }> };

/** A pod as a policy sees it: its namespace and labels (and its address, for an ipBlock). */
interface Pod {
  namespace: string;
  labels: Record<string, string>;
  ip?: string;
}

/** Whether `ip` lies in `cidr`. */
function inCidr(ip: string, cidr: string): boolean {
  const [address = '', prefix = ''] = cidr.split('/');
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  const block = new BlockList();
  block.addSubnet(address, Number(prefix), family);
  return isIP(ip) === isIP(address) && block.check(ip, family);
}

function selects(selector: Selector | undefined, labels: Record<string, string>): boolean {
  assert.equal(selector?.matchExpressions, undefined, 'the evaluator reads matchLabels only, and the operator writes no other');
  return Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}

/** Whether `peer` of a policy in `namespace` names the pod `other` (a CIDR names it by its address, if it has one). */
function names(peer: Peer, namespace: string, other: Pod): boolean {
  if (peer.ipBlock) return other.ip !== undefined && inCidr(other.ip, peer.ipBlock.cidr);
  const inNamespace = peer.namespaceSelector ? selects(peer.namespaceSelector, { 'kubernetes.io/metadata.name': other.namespace }) : other.namespace === namespace;
  return inNamespace && (!peer.podSelector || selects(peer.podSelector, other.labels));
}

/** Whether the policies let `subject` take the connection with `other` in the direction given. */
function admits(policies: readonly NetworkPolicy[], direction: 'Ingress' | 'Egress', subject: Pod, other: Pod, port: number, protocol = 'TCP'): boolean {
  const isolating = policies.filter((p) => p.metadata?.namespace === subject.namespace && p.spec.policyTypes?.includes(direction) && selects(p.spec.podSelector, subject.labels));
  if (isolating.length === 0) return true;
  return isolating.some((p) =>
    ((direction === 'Ingress' ? p.spec.ingress : p.spec.egress) as Rule[] | undefined ?? []).some((rule) => {
      const peers = direction === 'Ingress' ? rule.from : rule.to;
      const onPort = !rule.ports || rule.ports.some((r) => r.port === port && (r.protocol ?? 'TCP') === protocol);
      return onPort && (!peers || peers.some((peer) => names(peer, p.metadata!.namespace!, other)));
    }),
  );
}

/** Whether a connection from `source` to `target` on `port` passes: out of the source and into the target. */
function connects(policies: readonly NetworkPolicy[], source: Pod, target: Pod, port: number): boolean {
  return admits(policies, 'Egress', source, target, port) && admits(policies, 'Ingress', target, source, port);
}

const PULL_SECRET = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'image-pull-secret', namespace: 'devawsk8s' }, type: 'kubernetes.io/dockerconfigjson', data: {} };

/** The NetworkPolicies the operator applies for `instance`, and the ports each component's containers listen on. */
function rendered(instance: Instance): { policies: NetworkPolicy[]; ports: Record<ComponentName, number[]> } {
  const all = desiredChildren(instance, { imagePullSecret: PULL_SECRET, credentials: generateCredentials(), keptEmptyDirs: new Set(), gatewayTls: testGatewayTls(), backupCertificates: testBackupCertificates() }).children.map((c) => c.object);
  const policies = all.filter((o) => o.kind === 'NetworkPolicy') as NetworkPolicy[];
  const ports = Object.fromEntries(
    all
      .filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet')
      .map((o) => [o.metadata.name, ((o as { spec: { template: { spec: V1PodSpec } } }).spec.template.spec.containers[0]!.ports ?? []).map((p) => p.containerPort)]),
  ) as Record<ComponentName, number[]>;
  return { policies, ports };
}

const instance = testInstance({ broker: { replicas: 3 } });
const { policies, ports } = rendered(instance);
const pod = (component: WorkloadName, of: Instance = instance): Pod => ({ namespace: of.namespace, labels: componentLabels(of, component) });

/** The connections the reference components make to one another, `source→target:port`. */
const USED = new Set([
  'gateway→broker:4222',
  'gateway→core:8080',
  'core→database:5432',
  'core→broker:4222',
  'processing→broker:4222',
  'processing→database:5432',
  'broker→broker:6222',
]);

describe('the instance’s NetworkPolicies as an implementation reads them', () => {
  it('the components listen where the test expects (so the matrix below covers every port)', () => {
    assert.deepEqual(ports, { broker: [4222, 6222, 8222], database: [5432], core: [8080, 8081], processing: [8081], gateway: [8883, 8443, 8081] });
  });

  it('between the instance’s components exactly the connections they use pass, each on its port', () => {
    const passing: string[] = [];
    for (const source of COMPONENTS) {
      for (const target of COMPONENTS) {
        for (const port of ports[target]) if (connects(policies, pod(source), pod(target), port)) passing.push(`${source}→${target}:${port}`);
      }
    }
    assert.deepEqual(new Set(passing), USED);
  });

  it('no policy admits the gateway to the database port, nor any component to a health port or the broker’s monitoring', () => {
    assert.equal(connects(policies, pod('gateway'), pod('database'), 5432), false, 'gateway → database:5432');
    assert.equal(admits(policies, 'Ingress', pod('database'), pod('gateway'), 5432), false, 'the database does not let the gateway in');
    assert.equal(admits(policies, 'Egress', pod('gateway'), pod('database'), 5432), false, 'the gateway may not even try');
    for (const source of COMPONENTS) {
      for (const target of ['gateway', 'core', 'processing'] as const) assert.equal(connects(policies, pod(source), pod(target), 8081), false, `${source} → ${target}:8081`);
      assert.equal(connects(policies, pod(source), pod('broker'), 8222), false, `${source} → broker:8222`);
    }
  });

  it('another instance’s pods reach nothing; the landscape (the operator) the broker’s monitoring port only', () => {
    const tenantB = resolveInstance(iotService('tenant-b', { version: '2.4.1' }), TEST_CONFIG);
    assert.ok(tenantB.ok);
    const other = tenantB.instance;
    const operator: Pod = { namespace: 'devawsk8s', labels: { 'app.kubernetes.io/name': 'iot-operator' } };
    const elsewhere: Pod = { namespace: 'apps', labels: { app: 'client' } };
    for (const target of COMPONENTS) {
      for (const port of ports[target]) {
        for (const source of COMPONENTS) assert.equal(admits(policies, 'Ingress', pod(target), pod(source, other), port), false, `tenant-b ${source} → ${target}:${port}`);
        assert.equal(admits(policies, 'Ingress', pod(target), elsewhere, port), false, `a pod of another namespace → ${target}:${port}`);
        assert.equal(admits(policies, 'Ingress', pod(target), operator, port), target === 'broker' && port === 8222, `the landscape → ${target}:${port}`);
      }
    }
  });

  it('an application reaches core’s API port from an address of spec.core.applicationSources only, and no other port of the instance', () => {
    const application: Pod = { namespace: 'apps', labels: { app: 'dashboard' }, ip: '198.51.100.7' };
    const elsewhere: Pod = { ...application, ip: '198.51.101.7' };
    const open = rendered(testInstance({ broker: { replicas: 3 }, core: { applicationSources: ['198.51.100.0/24', '2001:db8::/32'] } })).policies;
    const reached = (of: readonly NetworkPolicy[], from: Pod) => COMPONENTS.flatMap((target) => ports[target].filter((port) => admits(of, 'Ingress', pod(target), from, port)).map((port) => `${target}:${port}`));
    assert.deepEqual(reached(open, application), ['core:8080']);
    assert.deepEqual(reached(open, { ...application, ip: '2001:db8::7' }), ['core:8080'], 'an IPv6 source');
    assert.deepEqual(reached(open, elsewhere), [], 'an address outside the sources');
    assert.deepEqual(reached(policies, application), [], 'without applicationSources no application reaches core');
    assert.ok(connects(open, pod('gateway'), pod('core'), 8080), 'the gateway still reaches core');
    assert.equal(connects(open, pod('processing'), pod('core'), 8080), false, 'the instance’s other components are no applications');
  });

  it('every component reaches DNS in kube-system, and the instance’s pods nothing else of the cluster', () => {
    const dns: Pod = { namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } };
    const elsewhere: Pod = { namespace: 'apps', labels: { app: 'server' } };
    for (const source of COMPONENTS) {
      for (const protocol of ['UDP', 'TCP']) assert.ok(admits(policies, 'Egress', pod(source), dns, 53, protocol), `${source} → DNS 53/${protocol}`);
      assert.equal(admits(policies, 'Egress', pod(source), dns, 8080), false, `${source} → kube-system:8080`);
      assert.equal(admits(policies, 'Egress', pod(source), elsewhere, 8080), false, `${source} → another namespace`);
    }
  });
});

describe('network policies', () => {
  it('instance-isolation selects every pod of the instance and admits nothing by itself', () => {
    const policy = desiredInstanceIsolationPolicy(testInstance());
    assert.equal(policy.metadata?.name, 'instance-isolation');
    assert.deepEqual(policy.spec.podSelector, { matchLabels: { 'app.kubernetes.io/managed-by': 'iot-operator', 'cp.iotservices.io/landscape': 'devawsk8s', 'cp.iotservices.io/instance': 'tenant-a' } });
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    assert.equal(policy.spec.ingress, undefined);
  });

  it('<component>-peers: one per component, in and out exactly its peers, one rule per port, in wire form', () => {
    assert.deepEqual(
      policies.map((p) => p.metadata?.name),
      ['instance-isolation', 'gateway-devices', 'core-applications', 'instance-egress', 'operator-monitoring', 'gateway-peers', 'core-peers', 'processing-peers', 'broker-peers', 'database-peers'],
    );
    const peer = (component: ComponentName) => ({ podSelector: { matchLabels: { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': component } } });
    const tcp = (port: number) => [{ protocol: 'TCP', port }];
    const broker = desiredComponentPeersPolicy(instance, 'broker');
    assert.deepEqual(broker.spec, {
      podSelector: { matchLabels: { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': 'broker' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        { from: [peer('gateway'), peer('core'), peer('processing')], ports: tcp(4222) },
        { from: [peer('broker')], ports: tcp(6222) },
      ],
      egress: [{ to: [peer('broker')], ports: tcp(6222) }],
    });
    assert.deepEqual(desiredComponentPeersPolicy(instance, 'database').spec.ingress, [{ from: [peer('core'), peer('processing')], ports: tcp(5432) }]);
    assert.equal(desiredComponentPeersPolicy(instance, 'database').spec.egress, undefined, 'the database opens no connection');
    const gateway = desiredComponentPeersPolicy(instance, 'gateway');
    assert.equal(gateway.spec.ingress, undefined, 'devices reach the gateway through gateway-devices only');
    assert.deepEqual(gateway.spec.egress, [{ to: [peer('broker')], ports: tcp(4222) }, { to: [peer('core')], ports: tcp(8080) }]);
    assert.deepEqual(desiredComponentPeersPolicy(instance, 'core').spec.ingress, [{ from: [peer('gateway')], ports: tcp(8080) }]);
    assert.equal(desiredComponentPeersPolicy(instance, 'processing').spec.ingress, undefined);
    for (const p of policies) for (const rule of p.spec.ingress ?? []) assert.ok(!('_from' in rule), `${p.metadata?.name}: the wire field is \`from\``);
  });

  it('gateway-devices admits device traffic only from the sources the spec names, on the protocol ports only', () => {
    const closed = desiredGatewayDevicesPolicy(testInstance({ gateway: { protocols: ['mqtts', 'coap'] } }));
    assert.equal(closed.spec.podSelector?.matchLabels?.['app.kubernetes.io/component'], 'gateway');
    assert.deepEqual(closed.spec.policyTypes, ['Ingress']);
    assert.equal(closed.spec.ingress, undefined, 'no sources: no device traffic');
    const open = desiredGatewayDevicesPolicy(testInstance({ gateway: { protocols: ['mqtts', 'coap'], deviceSources: ['203.0.113.0/24', '2001:db8::/32'] } }));
    const [rule, ...more] = open.spec.ingress ?? [];
    assert.equal(more.length, 0);
    assert.deepEqual(rule?.from, [{ ipBlock: { cidr: '203.0.113.0/24' } }, { ipBlock: { cidr: '2001:db8::/32' } }]);
    assert.deepEqual(rule?.ports, [
      { protocol: 'TCP', port: 8883 },
      { protocol: 'UDP', port: 5683 },
    ]);
  });

  it('core-applications admits applications only from the sources the spec names, on core’s API port only', () => {
    const closed = desiredCoreApplicationsPolicy(testInstance());
    assert.equal(closed.metadata?.name, 'core-applications');
    assert.deepEqual(closed.spec.podSelector?.matchLabels, { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': 'core' });
    assert.deepEqual(closed.spec.policyTypes, ['Ingress']);
    assert.equal(closed.spec.ingress, undefined, 'no sources: no application traffic');
    const open = desiredCoreApplicationsPolicy(testInstance({ core: { applicationSources: ['198.51.100.0/24', '2001:db8::/32'] } }));
    assert.deepEqual(open.spec.ingress, [{ from: [{ ipBlock: { cidr: '198.51.100.0/24' } }, { ipBlock: { cidr: '2001:db8::/32' } }], ports: [{ protocol: 'TCP', port: 8080 }] }]);
  });

  it('instance-egress allows every pod DNS in kube-system and the declared destinations only', () => {
    const policy = desiredEgressPolicy(testInstance({ egress: [{ cidr: '198.51.100.0/24', ports: [443] }, { cidr: '192.0.2.7/32' }] }));
    assert.deepEqual(policy.spec.policyTypes, ['Egress']);
    assert.equal(policy.spec.podSelector?.matchLabels?.['cp.iotservices.io/instance'], 'tenant-a');
    assert.equal(policy.spec.podSelector?.matchLabels?.['app.kubernetes.io/component'], undefined, 'every component');
    assert.deepEqual(policy.spec.egress, [
      { to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] },
      { to: [{ ipBlock: { cidr: '198.51.100.0/24' } }], ports: [{ protocol: 'TCP', port: 443 }] },
      { to: [{ ipBlock: { cidr: '192.0.2.7/32' } }] },
    ]);
    assert.equal(desiredEgressPolicy(testInstance()).spec.egress?.length, 1, 'nothing declared: DNS only');
  });

  it('operator-monitoring admits the landscape namespace, where the operator runs, to the broker pods\' monitoring port only', () => {
    const policy = desiredOperatorMonitoringPolicy(testInstance());
    assert.equal(policy.metadata?.name, 'operator-monitoring');
    assert.deepEqual(policy.spec.podSelector?.matchLabels, { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': 'broker' });
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    assert.deepEqual(policy.spec.ingress, [
      { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'devawsk8s' } } }], ports: [{ protocol: 'TCP', port: 8222 }] },
    ]);
  });

  it('device sources, application sources and egress destinations must be CIDRs', () => {
    for (const spec of [{ gateway: { deviceSources: ['0.0.0.0'] } }, { core: { applicationSources: ['198.51.100.0/33'] } }, { egress: [{ cidr: 'example.com/24' }] }]) {
      const resolved = resolveInstance(iotService('tenant-a', { version: '2.4.1', ...spec }), TEST_CONFIG);
      assert.ok(!resolved.ok && /must be a CIDR/.test(resolved.failure.message), JSON.stringify(spec));
    }
  });
});

describe('with spec.backup, the NetworkPolicies', () => {
  const backed = testInstance({ broker: { replicas: 3 }, backup: TEST_BACKUP });
  const { policies: backedPolicies } = rendered(backed);
  const workloads: WorkloadName[] = [...COMPONENTS, 'backup'];
  const operator: Pod = { namespace: 'devawsk8s', labels: { 'app.kubernetes.io/name': 'iot-operator' } };

  it('let the database and the repository host reach each other on pgBackRest’s port, and nothing else of the instance reach it', () => {
    const passing: string[] = [];
    for (const source of workloads) {
      for (const target of workloads) if (connects(backedPolicies, pod(source, backed), pod(target, backed), 8432)) passing.push(`${source}→${target}`);
    }
    assert.deepEqual(passing.sort(), ['backup→database', 'database→backup']);
  });

  it('leave the components’ own connections as they were, and the repository host reaching none of their ports', () => {
    for (const source of COMPONENTS) {
      for (const target of COMPONENTS) {
        for (const port of ports[target]) {
          assert.equal(connects(backedPolicies, pod(source, backed), pod(target, backed), port), USED.has(`${source}→${target}:${port}`), `${source}→${target}:${port}`);
        }
      }
    }
    for (const target of COMPONENTS) for (const port of ports[target]) assert.equal(connects(backedPolicies, pod('backup', backed), pod(target, backed), port), false, `backup→${target}:${port}`);
  });

  it('admit the landscape (the operator) to the repository host’s state (8433) alone', () => {
    assert.equal(admits(backedPolicies, 'Ingress', pod('backup', backed), operator, 8433), true);
    assert.equal(admits(backedPolicies, 'Ingress', pod('backup', backed), operator, 8432), false);
    for (const source of COMPONENTS) assert.equal(connects(backedPolicies, pod(source, backed), pod('backup', backed), 8433), false, `${source}→backup:8433`);
  });

  it('without spec.backup admit nothing on pgBackRest’s port', () => {
    assert.equal(connects(policies, pod('database'), pod('backup'), 8432), false);
    assert.equal(connects(policies, pod('backup'), pod('database'), 8432), false);
  });
});
