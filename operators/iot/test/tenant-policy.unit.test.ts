import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { validateIoTServiceSpec } from '../src/api/validation.ts';
import { desiredLimitRange, desiredResourceQuota, renderConfigYaml, resolveInstance, type OperatorConfig } from '../src/resources/index.ts';
import { DEFAULT_NODE_LABEL_KEYS } from '../src/resources/placement-policy.ts';
import { defaultTenantPolicy, type TenantPolicy } from '../src/resources/tenant-policy.ts';
import { iotService, TEST_CONFIG, testInstance } from './fixtures.ts';

/** The failure reason and message of a spec the policy (default: the operator's default) refuses. */
function refusal(spec: Record<string, unknown>, config: OperatorConfig = TEST_CONFIG): { reason: string; message: string } {
  const resolved = resolveInstance(iotService('tenant-a', { version: '2.4.1', ...spec }), config);
  assert.ok(!resolved.ok, `${JSON.stringify(spec)} is refused`);
  return resolved.failure;
}

/** Whether the policy (default: the operator's default) accepts the spec. */
function accepted(spec: Record<string, unknown>, config: OperatorConfig = TEST_CONFIG): boolean {
  const resolved = resolveInstance(iotService('tenant-a', { version: '2.4.1', ...spec }), config);
  return resolved.ok || assert.fail(`${JSON.stringify(spec)} is refused: ${resolved.failure.message}`);
}

/** An operator whose placement policy is the default one changed by `placement`. */
const withPolicy = (placement: Partial<TenantPolicy>): OperatorConfig => ({ ...TEST_CONFIG, tenancy: { ...defaultTenantPolicy(TEST_CONFIG.defaultRegistry), ...placement } });

/** `component` placed as given (v1beta1). */
const placed = (component: string, placement: Record<string, unknown>) => ({ [component]: { placement } });

/** A node affinity whose required term uses `key`. */
const nodeAffinity = (key: string, list: 'matchExpressions' | 'matchFields' = 'matchExpressions') => ({
  nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ [list]: [{ key, operator: 'In', values: ['x'] }] }] } },
});

/** A preferred pod anti-affinity with the given term fields (topologyKey defaults to the host name). */
const antiAffinity = (term: Record<string, unknown>) => ({
  podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'x' } }, ...term } }] },
});

describe('tenant policy', () => {
  it('images come only from allowed registries, matched on whole path segments', () => {
    assert.ok(resolveInstance(iotService('a', { version: '1', registry: 'registry.example.com/iot/team' }), TEST_CONFIG).ok, 'below the allowed registry');
    const lookalike = refusal({ registry: 'registry.example.com/iotx' });
    assert.equal(lookalike.reason, 'RegistryNotAllowed');
    assert.match(lookalike.message, /--allowed-registries: registry\.example\.com\/iot/);
    assert.equal(refusal({ registry: 'registry.example.com.evil.io/iot' }).reason, 'RegistryNotAllowed');
    const image = refusal({ core: { image: 'docker.io/attacker/miner:1' } });
    assert.equal(image.reason, 'RegistryNotAllowed');
    assert.match(image.message, /^spec\.core\.image docker\.io\/attacker\/miner:1 is not from a registry this operator allows/);
    assert.ok(resolveInstance(iotService('a', { version: '1', core: { image: 'registry.example.com/iot/core@sha256:abc' } }), TEST_CONFIG).ok);
  });

  it('the gateway Service type is ClusterIP unless the operator allows more', () => {
    const failure = refusal({ gateway: { serviceType: 'LoadBalancer' } });
    assert.equal(failure.reason, 'ServiceTypeNotAllowed');
    assert.match(failure.message, /--allowed-service-types: ClusterIP/);
    assert.equal(refusal({ gateway: { serviceType: 'NodePort' } }).reason, 'ServiceTypeNotAllowed');
  });

  it('the quota takes spec values within the maximum, defaults otherwise, and refuses more', () => {
    assert.deepEqual(desiredResourceQuota(testInstance()).spec?.hard, { 'requests.cpu': '4', 'requests.memory': '8Gi', 'requests.storage': '100Gi' });
    assert.deepEqual(desiredResourceQuota(testInstance({ quota: { cpu: '16', memory: '1024Mi' } })).spec?.hard, { 'requests.cpu': '16', 'requests.memory': '1Gi', 'requests.storage': '100Gi' });
    const failure = refusal({ quota: { memory: '33Gi' } });
    assert.equal(failure.reason, 'QuotaAboveLimit');
    assert.match(failure.message, /spec\.quota\.memory 33Gi .*--max-quota memory=32Gi/);
    const limits = desiredLimitRange(testInstance()).spec.limits[0]!;
    assert.deepEqual([limits.type, limits.default, limits.defaultRequest], ['Container', { cpu: '1', memory: '1Gi' }, { cpu: '10m', memory: '32Mi' }]);
  });
});

describe('placement within the tenant policy', () => {
  it('tolerates no taint by default; a refusal names the component, the field, the key, the allowed keys and the flag', () => {
    const failure = refusal(placed('broker', { tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'iot', effect: 'NoSchedule' }] }));
    assert.deepEqual(failure, {
      reason: 'TolerationNotAllowed',
      message: 'spec.broker.placement.tolerations[0].key dedicated is not allowed by this operator (--allowed-toleration-keys: (none)); tolerate only taints of those keys.',
    });
  });

  it('tolerates the taints of the allowed keys only; a toleration without a key (every taint) only with *', () => {
    const config = withPolicy({ allowedTolerationKeys: ['example.com/dedicated', 'nvidia.com/gpu'] });
    assert.ok(accepted(placed('gateway', { tolerations: [{ key: 'example.com/dedicated', operator: 'Exists' }, { key: 'nvidia.com/gpu', operator: 'Equal', value: 'a100', effect: 'NoExecute', tolerationSeconds: 60 }] }), config));
    const other = refusal(placed('gateway', { tolerations: [{ key: 'example.com/dedicated', operator: 'Exists' }, { key: 'node.kubernetes.io/unschedulable', operator: 'Exists' }] }), config);
    assert.equal(other.reason, 'TolerationNotAllowed');
    assert.match(other.message, /^spec\.gateway\.placement\.tolerations\[1\]\.key node\.kubernetes\.io\/unschedulable is not allowed by this operator \(--allowed-toleration-keys: example\.com\/dedicated, nvidia\.com\/gpu\)/);
    for (const everyTaint of [{ operator: 'Exists' }, { key: '', operator: 'Exists', effect: 'NoSchedule' }]) {
      const failure = refusal(placed('core', { tolerations: [everyTaint] }), config);
      assert.equal(failure.reason, 'TolerationNotAllowed', JSON.stringify(everyTaint));
      assert.match(failure.message, /^spec\.core\.placement\.tolerations\[0\] has no key and so tolerates every taint, which this operator does not allow \(--allowed-toleration-keys: example\.com\/dedicated, nvidia\.com\/gpu; only \* allows it\)/);
    }
    const everything = withPolicy({ allowedTolerationKeys: ['*'] });
    assert.ok(accepted(placed('core', { tolerations: [{ operator: 'Exists' }, { key: 'anything', operator: 'Exists' }] }), everything));
  });

  it('nodeSelector uses the well-known node labels by default, and only the allowed keys otherwise', () => {
    assert.deepEqual([...DEFAULT_NODE_LABEL_KEYS], [
      'kubernetes.io/hostname', 'kubernetes.io/os', 'kubernetes.io/arch', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region', 'node.kubernetes.io/instance-type', 'metadata.name',
    ]);
    assert.ok(accepted(placed('database', { nodeSelector: { 'kubernetes.io/os': 'linux', 'topology.kubernetes.io/zone': 'zone-a', 'kubernetes.io/hostname': 'node-1' } })));
    const failure = refusal(placed('database', { nodeSelector: { 'kubernetes.io/os': 'linux', 'example.com/pool': 'gold' } }));
    assert.deepEqual(failure, {
      reason: 'NodeLabelNotAllowed',
      message:
        'spec.database.placement.nodeSelector key example.com/pool is not allowed by this operator (--allowed-node-label-keys: kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch, ' +
        'topology.kubernetes.io/zone, topology.kubernetes.io/region, node.kubernetes.io/instance-type, metadata.name); place pods by those node labels only.',
    });
    const pool = withPolicy({ allowedNodeLabelKeys: ['example.com/pool'] });
    assert.ok(accepted(placed('database', { nodeSelector: { 'example.com/pool': 'gold' } }), pool));
    assert.equal(refusal(placed('database', { nodeSelector: { 'kubernetes.io/os': 'linux' } }), pool).reason, 'NodeLabelNotAllowed', 'the list replaces the default');
    assert.equal(refusal(placed('database', { nodeSelector: { 'kubernetes.io/os': 'linux' } }), withPolicy({ allowedNodeLabelKeys: [] })).reason, 'NodeLabelNotAllowed', 'an empty list allows none');
    assert.ok(accepted(placed('database', { nodeSelector: { anything: 'x' } }), withPolicy({ allowedNodeLabelKeys: ['*'] })));
  });

  it('node affinity: every key of required and preferred terms, matchExpressions and matchFields, is checked', () => {
    assert.ok(accepted(placed('gateway', { affinity: nodeAffinity('kubernetes.io/hostname') })));
    assert.ok(accepted(placed('gateway', { affinity: nodeAffinity('metadata.name', 'matchFields') })));
    const required = refusal(placed('gateway', { affinity: nodeAffinity('example.com/pool') }));
    assert.equal(required.reason, 'NodeLabelNotAllowed');
    assert.match(required.message, /^spec\.gateway\.placement\.affinity\.nodeAffinity\.requiredDuringSchedulingIgnoredDuringExecution\.nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.key example\.com\/pool is not allowed by this operator \(--allowed-node-label-keys: /);
    const fields = refusal(placed('gateway', { affinity: nodeAffinity('metadata.name', 'matchFields') }), withPolicy({ allowedNodeLabelKeys: ['kubernetes.io/hostname'] }));
    assert.match(fields.message, /nodeSelectorTerms\[0\]\.matchFields\[0\]\.key metadata\.name is not allowed by this operator \(--allowed-node-label-keys: kubernetes\.io\/hostname\)/);
    const preferred = refusal(
      placed('processing', {
        affinity: {
          nodeAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              { weight: 1, preference: { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['a'] }] } },
              { weight: 2, preference: { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, { key: 'example.com/gpu', operator: 'Exists' }] } },
            ],
          },
        },
      }),
    );
    assert.match(preferred.message, /^spec\.processing\.placement\.affinity\.nodeAffinity\.preferredDuringSchedulingIgnoredDuringExecution\[1\]\.preference\.matchExpressions\[1\]\.key example\.com\/gpu is not allowed/);
  });

  it('pod (anti-)affinity: the topology key is a node label key, and only the instance’s own namespace may be selected', () => {
    assert.ok(accepted(placed('gateway', { affinity: antiAffinity({}) })), 'no namespaces, no namespaceSelector: the instance’s own pods');
    assert.ok(accepted(placed('gateway', { affinity: antiAffinity({ namespaces: ['devawsk8s-tenant-a'] }) })));
    assert.ok(accepted(placed('gateway', { affinity: antiAffinity({ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'devawsk8s-tenant-a' } } }) })));
    assert.ok(accepted(placed('gateway', { affinity: antiAffinity({ namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['devawsk8s-tenant-a'] }, { key: 'team', operator: 'Exists' }] } }) })));
    const topology = refusal(placed('gateway', { affinity: antiAffinity({ topologyKey: 'example.com/rack' }) }));
    assert.equal(topology.reason, 'NodeLabelNotAllowed');
    assert.match(topology.message, /^spec\.gateway\.placement\.affinity\.podAntiAffinity\.preferredDuringSchedulingIgnoredDuringExecution\[0\]\.podAffinityTerm\.topologyKey example\.com\/rack is not allowed/);

    const other = refusal(placed('core', { affinity: { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', namespaces: ['devawsk8s-tenant-a', 'devawsk8s-tenant-b'] }] } } }));
    assert.deepEqual(other, {
      reason: 'PodAffinityNotAllowed',
      message:
        'spec.core.placement.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces devawsk8s-tenant-b may select pods outside the instance namespace devawsk8s-tenant-a, ' +
        "which this operator does not allow (no flag allows it): pod affinity may name the instance's own pods only; leave namespaces and namespaceSelector unset.",
    });
    for (const namespaceSelector of [
      {},
      { matchLabels: { team: 'a' } },
      { matchLabels: { 'kubernetes.io/metadata.name': 'devawsk8s-tenant-b' } },
      { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['devawsk8s-tenant-a', 'kube-system'] }] },
      { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['devawsk8s-tenant-b'] }] },
    ]) {
      const failure = refusal(placed('broker', { affinity: antiAffinity({ namespaceSelector }) }));
      assert.equal(failure.reason, 'PodAffinityNotAllowed', JSON.stringify(namespaceSelector));
      assert.ok(
        failure.message.startsWith(`spec.broker.placement.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaceSelector ${JSON.stringify(namespaceSelector)} may select pods outside`),
        failure.message,
      );
    }
    assert.equal(refusal(placed('broker', { affinity: antiAffinity({ namespaceSelector: {} }) }), withPolicy({ allowedNodeLabelKeys: ['*'], allowedTolerationKeys: ['*'] })).reason, 'PodAffinityNotAllowed', 'no flag allows it');
  });

  it('every component is checked, in the order of the components', () => {
    const spec = { ...placed('database', { nodeSelector: { pool: 'a' } }), ...placed('gateway', { tolerations: [{ key: 't', operator: 'Exists' }] }) };
    assert.match(refusal(spec).message, /^spec\.gateway\.placement\.tolerations\[0\]/);
    for (const component of ['gateway', 'core', 'processing', 'broker', 'database']) {
      assert.equal(refusal(placed(component, { nodeSelector: { pool: 'a' } })).reason, 'NodeLabelNotAllowed', component);
    }
  });
});

describe('config keys', () => {
  it('no spelling of a reserved key is accepted, and keys keep a plain grammar', () => {
    for (const key of ['Instance', 'VERSION', 'end_points', 'name-space', 'land.scape', 'Stream', 'stre.am', 'Retention', 'reten_tion', 'Events', 'ev.ents']) {
      const result = validateIoTServiceSpec({ version: '1', config: { [key]: 'x' } });
      assert.ok(!result.ok && result.errors.some((e) => /must not set instance, landscape, namespace, version, endpoints, stream, retention, events in any case or spelling/.test(e)), key);
    }
    for (const key of ['<<', ' instance', 'a b', '-x', 'ｉnstance']) {
      const result = validateIoTServiceSpec({ version: '1', config: { [key]: 'x' } });
      assert.ok(!result.ok && result.errors.some((e) => /config keys may hold only letters, digits/.test(e)), JSON.stringify(key));
    }
    assert.ok(validateIoTServiceSpec({ version: '1', config: { 'log.level': 'debug', Feature_X: 'on' } }).ok);
  });

  it('keys and values are written as quoted strings: nothing becomes YAML syntax', () => {
    const text = renderConfigYaml(testInstance({ config: { yes: 'no', merge: '<<', anchor: '*ref', empty: '~' } }));
    assert.match(text, /^"yes": "no"$/m);
    assert.match(text, /^"merge": "<<"$/m);
    assert.match(text, /^"instance": "tenant-a"$/m);
    assert.deepEqual(parse(text, { version: '1.1', merge: true }), {
      instance: 'tenant-a',
      landscape: 'devawsk8s',
      namespace: 'devawsk8s-tenant-a',
      version: '2.4.1',
      endpoints: parse(text).endpoints,
      stream: { replicas: 1, maxBytes: 805306368 },
      retention: { seconds: 2592000 },
      anchor: '*ref',
      empty: '~',
      merge: '<<',
      yes: 'no',
    });
  });
});
