import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import type { KubeObject } from '@iot-operator/runtime';
import { convertIoTService } from '../src/api/conversion.ts';
import { iotServiceCrd } from '../src/api/crd.ts';
import { validateIoTServiceSpec } from '../src/api/iotservice.ts';
import { degradedConditionProblem } from '@iot-operator/runtime/testing';

const EXAMPLE_FILE = new URL('../deploy/crds/example-iotservice.yml', import.meta.url);

type Node = Record<string, unknown>;

/** A version of the CRD, v1beta1 (the stored one) unless named. */
function version(name = 'v1beta1'): Node {
  const spec = iotServiceCrd()['spec'] as Node;
  const v = (spec['versions'] as Node[]).find((candidate) => candidate['name'] === name);
  assert.ok(v, name);
  return v;
}

function openApiSchema(): Node {
  return (version()['schema'] as Node)['openAPIV3Schema'] as Node;
}

/** Every schema node with its JSON path. */
function* nodes(node: Node, path = ''): Generator<[string, Node]> {
  yield [path, node];
  for (const [key, child] of Object.entries((node['properties'] as Record<string, Node> | undefined) ?? {})) {
    yield* nodes(child, `${path}.${key}`);
  }
  if (node['items']) yield* nodes(node['items'] as Node, `${path}[]`);
  if (node['additionalProperties'] && typeof node['additionalProperties'] === 'object') {
    yield* nodes(node['additionalProperties'] as Node, `${path}{}`);
  }
}

describe('IoTService CRD', () => {
  it('stores the runtime\'s Degraded condition (status.conditions with every condition field, nothing else required)', () => {
    assert.equal(degradedConditionProblem(iotServiceCrd()), undefined);
  });

  it('names the resource as the API contract says', () => {
    const crd = iotServiceCrd();
    assert.equal(crd['apiVersion'], 'apiextensions.k8s.io/v1');
    assert.equal((crd['metadata'] as Node)['name'], 'iotservices.cp.iotservices.io');
    const spec = crd['spec'] as Node;
    assert.equal(spec['group'], 'cp.iotservices.io');
    assert.equal(spec['scope'], 'Namespaced');
    assert.deepEqual(spec['names'], {
      kind: 'IoTService',
      listKind: 'IoTServiceList',
      plural: 'iotservices',
      singular: 'iotservice',
      shortNames: ['iots'],
    });
    assert.deepEqual(
      (spec['versions'] as Node[]).map((v) => [v['name'], v['served'], v['storage'], v['subresources']]),
      [
        ['v1alpha1', true, false, { status: {} }],
        ['v1beta1', true, true, { status: {} }],
      ],
    );
    assert.deepEqual(spec['conversion'], {
      strategy: 'Webhook',
      webhook: { conversionReviewVersions: ['v1'], clientConfig: { service: { namespace: 'devawsk8s', name: 'iot-operator-webhook', path: '/convert', port: 443 } } },
    });
  });

  it('prints Phase, Ready, Version and Age', () => {
    const columns = (version()['additionalPrinterColumns'] as Node[]).map((c) => [c['name'], c['type'], c['jsonPath']]);
    assert.deepEqual(columns, [
      ['Phase', 'string', '.status.phase'],
      ['Ready', 'string', '.status.ready'],
      ['Version', 'string', '.spec.version'],
      ['Age', 'date', '.metadata.creationTimestamp'],
    ]);
  });

  it('has a structural schema: every node typed, no TypeBox or non-structural keywords, nothing preserves unknown fields', () => {
    const forbidden = ['$id', '$schema', 'const', 'patternProperties', 'uniqueItems', 'errorMessage', 'x-kubernetes-preserve-unknown-fields'];
    for (const [path, node] of nodes(openApiSchema())) {
      if (node['x-kubernetes-int-or-string'] === true) {
        assert.deepEqual(node['anyOf'], [{ type: 'integer' }, { type: 'string' }], `${path}: int-or-string shape`);
        assert.equal(node['type'], undefined, `${path}: int-or-string has no type`);
      } else {
        assert.ok(typeof node['type'] === 'string', `${path}: missing type`);
        assert.equal(node['anyOf'], undefined, `${path}: anyOf outside int-or-string`);
      }
      for (const keyword of forbidden) assert.ok(!(keyword in node), `${path}: has ${keyword}`);
      if (node['properties']) assert.ok(node['additionalProperties'] === undefined, `${path}: properties and additionalProperties`);
    }
  });

  it('carries the defaults and the quantity and enum validations', () => {
    const spec = (openApiSchema()['properties'] as Record<string, Node>)['spec'] as Node;
    const props = spec['properties'] as Record<string, Node>;
    assert.deepEqual(spec['required'], ['version']);
    const gateway = props['gateway'] as Node;
    const gatewayProps = gateway['properties'] as Record<string, Node>;
    assert.deepEqual(gateway['default'], {}, 'nested defaults apply only when the parent object is defaulted');
    assert.equal(gatewayProps['replicas']?.['default'], 2);
    assert.equal(gatewayProps['replicas']?.['maximum'], 50);
    assert.deepEqual(gatewayProps['protocols']?.['default'], ['mqtt', 'http']);
    assert.deepEqual((gatewayProps['protocols']?.['items'] as Node)['enum'], ['mqtt', 'mqtts', 'http', 'coap']);
    assert.equal(gatewayProps['protocols']?.['x-kubernetes-list-type'], 'set');
    assert.deepEqual(gatewayProps['serviceType']?.['enum'], ['ClusterIP', 'NodePort', 'LoadBalancer']);
    const broker = props['broker'] as Node;
    const brokerReplicas = (broker['properties'] as Record<string, Node>)['replicas'] as Node;
    assert.deepEqual([brokerReplicas['minimum'], brokerReplicas['maximum'], brokerReplicas['default']], [1, 3, 1]);
    assert.deepEqual(brokerReplicas['x-kubernetes-validations'], [
      { rule: 'self == 1 || self == 3', message: 'broker.replicas must be 1 or 3: 3 replicates every message on three brokers (any one may fail)' },
    ]);
    const databaseReplicas = ((props['database'] as Node)['properties'] as Record<string, Node>)['replicas'] as Node;
    assert.deepEqual([databaseReplicas['minimum'], databaseReplicas['maximum'], databaseReplicas['default']], [1, 1, 1]);
    assert.deepEqual(databaseReplicas['x-kubernetes-validations'], [{ rule: 'self == 1', message: 'database.replicas must be 1: the database has no replication yet' }]);
    const maxBacklog = (broker['properties'] as Record<string, Node>)['maxBacklog'] as Node;
    assert.equal(maxBacklog['type'], 'string');
    assert.match(String(maxBacklog['description']), /^Most telemetry the broker holds for processing \(bytes\)/);
    assert.equal(((props['database'] as Node)['properties'] as Record<string, Node>)['maxBacklog'], undefined, 'the broker\'s only');
    const alphaBroker = (((version('v1alpha1')['schema'] as Node)['openAPIV3Schema'] as Node)['properties'] as Record<string, Node>)['spec']!['properties'] as Record<string, Node>;
    assert.deepEqual((alphaBroker['broker']!['properties'] as Record<string, Node>)['maxBacklog'], maxBacklog, 'v1alpha1 serves it too');
    assert.deepEqual((alphaBroker['broker']!['properties'] as Record<string, Node>)['replicas'], brokerReplicas);
    const retention = props['retention'] as Node;
    assert.deepEqual(
      { type: retention['type'], default: retention['default'], maxLength: retention['maxLength'], pattern: retention['pattern'] },
      { type: 'string', default: '30d', maxLength: 64, pattern: undefined },
      'a CEL rule instead of a pattern: the API server then gives its message',
    );
    assert.equal(
      retention['description'],
      'How long telemetry is kept: rows older than this (by the time the gateway received them) are deleted by the database in small batches. s, m, h or d, e.g. 30d (default), 12h.',
    );
    assert.deepEqual(retention['x-kubernetes-validations'], [
      { rule: "self.matches('^[1-9][0-9]{0,5}(s|m|h|d)$')", message: 'retention must be a whole number of s, m, h or d, e.g. 30d' },
    ]);
    assert.deepEqual(alphaBroker['retention'], retention, 'v1alpha1 serves it the same way');
    const rules = (broker['x-kubernetes-validations'] as Node[]).map((r) => r['message']);
    assert.ok(rules.includes('storageClassName cannot be set with storage: ephemeral (an emptyDir has no StorageClass)'));
    assert.ok(rules.some((m) => String(m).startsWith('broker.replicas cannot be changed after creation')), 'broker.replicas is fixed');
    const limits = (((gatewayProps['resources'] as Node)['properties'] as Record<string, Node>)['limits'] as Node)[
      'additionalProperties'
    ] as Node;
    assert.equal(limits['x-kubernetes-int-or-string'], true);
    assert.equal(typeof limits['pattern'], 'string');
  });

  it('gives every component a core/v1 affinity: operator enums, weights 1..100, required fields, bounded lists', () => {
    const props = ((openApiSchema()['properties'] as Record<string, Node>)['spec'] as Node)['properties'] as Record<string, Node>;
    const at = (node: Node, path: string): Node =>
      path.split('.').reduce((n, key) => (key === '[]' ? (n['items'] as Node) : ((n['properties'] as Record<string, Node>)[key] as Node)), node);
    for (const component of ['gateway', 'core', 'processing', 'broker', 'database']) {
      const affinity = at(props[component] as Node, 'placement.affinity');
      assert.deepEqual(Object.keys(affinity['properties'] as Node), ['nodeAffinity', 'podAffinity', 'podAntiAffinity'], component);
      const nodeRequired = at(affinity, 'nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution');
      assert.deepEqual(nodeRequired['required'], ['nodeSelectorTerms'], component);
      const requirement = at(nodeRequired, 'nodeSelectorTerms.[].matchExpressions.[]');
      assert.deepEqual(requirement['required'], ['key', 'operator'], component);
      assert.deepEqual(at(requirement, 'operator')['enum'], ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'], component);
      const preferredNode = at(affinity, 'nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.[]');
      assert.deepEqual(preferredNode['required'], ['weight', 'preference'], component);
      for (const kind of ['podAffinity', 'podAntiAffinity']) {
        const weighted = at(affinity, `${kind}.preferredDuringSchedulingIgnoredDuringExecution.[]`);
        assert.deepEqual([at(weighted, 'weight')['minimum'], at(weighted, 'weight')['maximum']], [1, 100], `${component} ${kind}`);
        const term = at(affinity, `${kind}.requiredDuringSchedulingIgnoredDuringExecution.[]`);
        assert.deepEqual(term['required'], ['topologyKey'], `${component} ${kind}`);
        assert.deepEqual(Object.keys(term['properties'] as Node).sort(), ['labelSelector', 'matchLabelKeys', 'mismatchLabelKeys', 'namespaceSelector', 'namespaces', 'topologyKey']);
        assert.deepEqual(at(term, 'labelSelector.matchExpressions.[].operator')['enum'], ['In', 'NotIn', 'Exists', 'DoesNotExist'], `${component} ${kind}`);
        assert.deepEqual(at(weighted, 'podAffinityTerm'), term, 'one PodAffinityTerm schema, reused');
      }
    }
    for (const [path, node] of nodes(openApiSchema())) {
      if (path.includes('.affinity') && node['type'] === 'array') assert.equal(typeof node['maxItems'], 'number', `${path}: bounded`);
    }
  });

  it('lets the status carry conditions as a map keyed by type', () => {
    const status = (openApiSchema()['properties'] as Record<string, Node>)['status'] as Node;
    const conditions = (status['properties'] as Record<string, Node>)['conditions'] as Node;
    assert.equal(conditions['x-kubernetes-list-type'], 'map');
    assert.deepEqual(conditions['x-kubernetes-list-map-keys'], ['type']);
    assert.ok('ready' in (status['properties'] as Node));
  });

  it('ships an example instance (v1alpha1, the seed\'s) that the schema accepts once converted', () => {
    const example = parse(readFileSync(EXAMPLE_FILE, 'utf8')) as KubeObject;
    assert.equal(example['apiVersion'], 'cp.iotservices.io/v1alpha1');
    assert.equal(example['kind'], 'IoTService');
    assert.deepEqual(example['metadata'], { name: 'example-iotservice', namespace: 'devawsk8s' });
    const result = validateIoTServiceSpec((convertIoTService(example, 'cp.iotservices.io/v1beta1') as KubeObject & { spec: unknown }).spec);
    assert.ok(result.ok, JSON.stringify(result));
  });
});
