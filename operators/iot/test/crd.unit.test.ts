import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import type { KubeObject } from '@iot-operator/runtime';
import { convertIoTService } from '../src/api/conversion.ts';
import { iotServiceCrd } from '../src/api/crd.ts';
import { IoTServiceSpecSchema } from '../src/api/iotservice.ts';
import { degradedConditionProblem } from '@iot-operator/runtime/testing';
import { AffinitySchema } from '../src/api/scheduling.ts';
import { IoTServiceV1alpha1SpecSchema } from '../src/api/v1alpha1.ts';
import { validateIoTServiceSpec } from '../src/api/validation.ts';
import { FULL_PLACEMENT } from './full-placement.ts';

const EXAMPLE_FILE = new URL('../deploy/crds/example-iotservice.yml', import.meta.url);

type Node = Record<string, unknown>;

/** A version of the CRD, v1beta1 (the stored one) unless named. */
function version(name = 'v1beta1'): Node {
  const spec = iotServiceCrd()['spec'] as Node;
  const v = (spec['versions'] as Node[]).find((candidate) => candidate['name'] === name);
  assert.ok(v, name);
  return v;
}

function openApiSchema(name = 'v1beta1'): Node {
  return (version(name)['schema'] as Node)['openAPIV3Schema'] as Node;
}

/** `node` without its description. */
function undescribed(node: Node): Node {
  const { description: _, ...rest } = node;
  return rest;
}

/** A value of `schema` (plain-JSON TypeBox) that sets every field it has, each map with one key and each list with one item. */
function everyField(schema: Node): unknown {
  const anyOf = schema['anyOf'] as Node[] | undefined;
  if (anyOf) return 'const' in anyOf[0]! ? anyOf[0]!['const'] : 1;
  const properties = schema['properties'] as Record<string, Node> | undefined;
  if (properties) return Object.fromEntries(Object.entries(properties).map(([key, child]) => [key, everyField(child)]));
  const values = (schema['patternProperties'] as Record<string, Node> | undefined)?.['^(.*)$'];
  if (values) return { 'example.com/key': everyField(values) };
  if (schema['type'] === 'array') return [everyField(schema['items'] as Node)];
  if (schema['type'] === 'string') return 'x';
  if (schema['type'] === 'integer') return (schema['minimum'] as number | undefined) ?? 1;
  if (schema['type'] === 'boolean') return true;
  throw new Error(`no value for ${JSON.stringify(schema).slice(0, 100)}`);
}

/** What the API server keeps of `value` under a structural `schema` (it prunes unknown fields on every write and every read from etcd). */
function prune(value: unknown, schema: Node): unknown {
  if (Array.isArray(value)) return schema['items'] ? value.map((item) => prune(item, schema['items'] as Node)) : value;
  if (value === null || typeof value !== 'object' || schema['x-kubernetes-preserve-unknown-fields'] === true) return value;
  const properties = schema['properties'] as Record<string, Node> | undefined;
  const additional = schema['additionalProperties'] as Node | undefined;
  const kept = Object.entries(value).flatMap(([key, child]) => {
    const childSchema = properties?.[key] ?? additional;
    return childSchema ? [[key, prune(child, childSchema)] as const] : [];
  });
  return Object.fromEntries(kept);
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

  it('has a structural schema: every node typed, no TypeBox or non-structural keywords, unknown fields kept only in the objects left unchecked', () => {
    const forbidden = ['$id', '$schema', 'const', 'patternProperties', 'uniqueItems', 'errorMessage'];
    const unchecked: Record<string, string[]> = { v1alpha1: [], v1beta1: [] };
    for (const name of ['v1alpha1', 'v1beta1']) {
      for (const [path, node] of nodes(openApiSchema(name))) {
        if (node['x-kubernetes-int-or-string'] === true) {
          assert.deepEqual(node['anyOf'], [{ type: 'integer' }, { type: 'string' }], `${path}: int-or-string shape`);
          assert.equal(node['type'], undefined, `${path}: int-or-string has no type`);
        } else {
          assert.ok(typeof node['type'] === 'string', `${path}: missing type`);
          assert.equal(node['anyOf'], undefined, `${path}: anyOf outside int-or-string`);
        }
        for (const keyword of forbidden) assert.ok(!(keyword in node), `${path}: has ${keyword}`);
        if (node['properties']) assert.ok(node['additionalProperties'] === undefined, `${path}: properties and additionalProperties`);
        if (node['x-kubernetes-preserve-unknown-fields'] !== undefined) {
          assert.deepEqual(node, { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }, `${path}: an unchecked object, nothing typed inside`);
          unchecked[name]!.push(path);
        }
      }
    }
    const components = ['gateway', 'core', 'processing', 'broker', 'database'];
    const selectors = ['podAffinity', 'podAntiAffinity'].flatMap((kind) =>
      ['requiredDuringSchedulingIgnoredDuringExecution[]', 'preferredDuringSchedulingIgnoredDuringExecution[].podAffinityTerm'].flatMap((term) =>
        ['labelSelector', 'namespaceSelector'].map((selector) => `${kind}.${term}.${selector}`),
      ),
    );
    assert.deepEqual(unchecked['v1beta1'], components.flatMap((c) => selectors.map((selector) => `.spec.${c}.placement.affinity.${selector}`)), 'v1beta1: the label selectors of the affinities');
    assert.deepEqual(unchecked['v1alpha1'], components.map((c) => `.spec.${c}.affinity`), 'v1alpha1: the affinities');
  });

  it('stays small: at most 70,000 bytes as compact JSON (client-side kubectl apply keeps it in a 262,144-byte annotation)', () => {
    const bytes = Buffer.byteLength(JSON.stringify(iotServiceCrd()));
    assert.ok(bytes <= 70_000, `the CRD is ${bytes} bytes as compact JSON`);
  });

  it('prunes no field of either version: an object setting every field of the API reads back unchanged', () => {
    for (const [name, schema] of [['v1beta1', IoTServiceSpecSchema], ['v1alpha1', IoTServiceV1alpha1SpecSchema]] as const) {
      const spec = everyField(JSON.parse(JSON.stringify(schema)) as Node) as Node;
      const crdSpec = (openApiSchema(name)['properties'] as Record<string, Node>)['spec'] as Node;
      assert.deepEqual(prune(spec, crdSpec), spec, name);
      const gateway = spec['gateway'] as Node;
      const withUnknown = { ...spec, gateway: { ...gateway, port: 1883 } };
      assert.deepEqual(prune(withUnknown, crdSpec), spec, `${name}: an unknown typed-level field is pruned`);
    }
    const placement = ((everyField(JSON.parse(JSON.stringify(IoTServiceSpecSchema)) as Node) as Node)['core'] as Node)['placement'] as Node;
    assert.ok(JSON.stringify(placement).includes('"namespaceSelector":{"matchLabels"'), 'the generated object sets the label selectors\' fields');
  });

  it('test/full-placement.ts (what placement-storage.e2e writes) is valid and sets every scheduling field, so the API server could prune none unseen', () => {
    const paths = (value: unknown, at = ''): string[] =>
      Array.isArray(value)
        ? value.flatMap((item) => paths(item, `${at}[]`))
        : value !== null && typeof value === 'object'
          ? Object.entries(value).flatMap(([key, child]) => paths(child, `${at}.${key.includes('/') ? '{}' : key}`))
          : [at];
    const schemaPlacement = ((everyField(JSON.parse(JSON.stringify(IoTServiceSpecSchema)) as Node) as Node)['gateway'] as Node)['placement'];
    assert.deepEqual([...new Set(paths(FULL_PLACEMENT))].sort(), [...new Set(paths(schemaPlacement))].sort());
    const result = validateIoTServiceSpec({ version: '1', gateway: { placement: FULL_PLACEMENT } });
    assert.ok(result.ok, JSON.stringify(result));
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
    assert.deepEqual(gatewayProps['protocols']?.['default'], ['mqtts', 'https']);
    assert.deepEqual((gatewayProps['protocols']?.['items'] as Node)['enum'], ['mqtt', 'mqtts', 'http', 'https', 'coap']);
    assert.equal(gatewayProps['protocols']?.['x-kubernetes-list-type'], 'set');
    assert.deepEqual(gatewayProps['serviceType']?.['enum'], ['ClusterIP', 'NodePort', 'LoadBalancer']);
    const broker = props['broker'] as Node;
    const brokerReplicas = (broker['properties'] as Record<string, Node>)['replicas'] as Node;
    assert.deepEqual([brokerReplicas['minimum'], brokerReplicas['maximum'], brokerReplicas['default']], [1, 3, 1]);
    assert.deepEqual(brokerReplicas['x-kubernetes-validations'], [
      { rule: 'self == 1 || self == 3', message: 'broker.replicas must be 1 or 3: 3 replicates every message on three brokers (any one may fail)' },
    ]);
    const databaseReplicas = ((props['database'] as Node)['properties'] as Record<string, Node>)['replicas'] as Node;
    assert.deepEqual([databaseReplicas['minimum'], databaseReplicas['maximum'], databaseReplicas['default']], [1, 3, 1]);
    assert.deepEqual(databaseReplicas['x-kubernetes-validations'], [
      { rule: 'self == 1 || self == 3', message: 'database.replicas must be 1 or 3: 3 runs a primary and two synchronous standbys (any one may fail)' },
    ]);
    const maxBacklog = (broker['properties'] as Record<string, Node>)['maxBacklog'] as Node;
    assert.equal(maxBacklog['type'], 'string');
    assert.match(String(maxBacklog['description']), /^Most telemetry the broker holds for processing \(bytes\)/);
    assert.equal(((props['database'] as Node)['properties'] as Record<string, Node>)['maxBacklog'], undefined, 'the broker\'s only');
    const alphaBroker = ((openApiSchema('v1alpha1')['properties'] as Record<string, Node>)['spec'] as Node)['properties'] as Record<string, Node>;
    assert.deepEqual((alphaBroker['broker']!['properties'] as Record<string, Node>)['maxBacklog'], undescribed(maxBacklog), 'v1alpha1 serves it too (v1beta1 describes it)');
    assert.deepEqual((alphaBroker['broker']!['properties'] as Record<string, Node>)['replicas'], undescribed(brokerReplicas));
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
    assert.deepEqual(alphaBroker['retention'], undescribed(retention), 'v1alpha1 serves it the same way');
    const rules = (broker['x-kubernetes-validations'] as Node[]).map((r) => r['message']);
    assert.ok(rules.includes('storageClassName cannot be set with storage: ephemeral (an emptyDir has no StorageClass)'));
    assert.ok(rules.some((m) => String(m).startsWith('broker.replicas cannot be changed after creation')), 'broker.replicas is fixed');
    const limits = (((gatewayProps['resources'] as Node)['properties'] as Record<string, Node>)['limits'] as Node)[
      'additionalProperties'
    ] as Node;
    assert.equal(limits['x-kubernetes-int-or-string'], true);
    assert.equal(typeof limits['pattern'], 'string');
  });

  it('types every component\'s v1beta1 affinity as core/v1 does: operator enums, weights 1..100, required fields; descriptions and bounds only where the operator alone has them', () => {
    const props = ((openApiSchema()['properties'] as Record<string, Node>)['spec'] as Node)['properties'] as Record<string, Node>;
    const at = (node: Node, path: string): Node =>
      path.split('.').reduce((n, key) => (key === '[]' ? (n['items'] as Node) : ((n['properties'] as Record<string, Node>)[key] as Node)), node);
    for (const component of ['gateway', 'core', 'processing', 'broker', 'database']) {
      const affinity = at(props[component] as Node, 'placement.affinity');
      assert.equal(affinity['description'], 'Scheduling constraints of the pods (core/v1 Affinity).');
      assert.deepEqual(Object.keys(affinity['properties'] as Node), ['nodeAffinity', 'podAffinity', 'podAntiAffinity'], component);
      const nodeRequired = at(affinity, 'nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution');
      assert.deepEqual(nodeRequired['required'], ['nodeSelectorTerms'], component);
      assert.equal(at(nodeRequired, 'nodeSelectorTerms')['minItems'], 1, component);
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
        assert.deepEqual(at(weighted, 'podAffinityTerm'), term, 'one PodAffinityTerm schema, reused');
      }
      const tolerations = at(props[component] as Node, 'placement.tolerations');
      assert.deepEqual(at(tolerations, '[].effect')['enum'], ['NoSchedule', 'PreferNoSchedule', 'NoExecute'], component);
    }
    for (const [path, node] of nodes(openApiSchema())) {
      const below = /\.placement\.(affinity|tolerations)[.[]/.test(path);
      for (const keyword of ['description', 'maxLength', 'maxItems', 'maxProperties']) assert.ok(!(below && keyword in node), `${path}: ${keyword} below a core/v1 field`);
    }
  });

  it('leaves to the operator what the CRD does not check: this API\'s bounds and label selectors, reported with the field and why', () => {
    const errors = (affinity: unknown) => {
      const result = validateIoTServiceSpec({ version: '1', broker: { placement: { affinity } } });
      return result.ok ? [] : result.errors;
    };
    const term = (labelSelector: unknown) => ({ podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', labelSelector }] } });
    const at = 'spec.broker.placement.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]';
    assert.deepEqual(errors(term({ matchLabel: { app: 'broker' } })), [`${at}.labelSelector.matchLabel: unknown field`]);
    assert.deepEqual(errors(term({ matchExpressions: [{ key: 'app', operator: 'in', values: ['broker'] }] })), [
      `${at}.labelSelector.matchExpressions[0].operator: must be one of In, NotIn, Exists, DoesNotExist`,
    ]);
    assert.deepEqual(errors(term({ matchLabels: { app: 'b'.repeat(64) } })), [`${at}.labelSelector.matchLabels.app: expected string length less or equal to 63`]);
    assert.deepEqual(errors({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: Array.from({ length: 17 }, () => ({ key: 'metadata.name', operator: 'Exists' })) }] } } }), [
      'spec.broker.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields: must be a list of at most 16 requirements',
    ]);
    const arrays = [...nodes(JSON.parse(JSON.stringify(AffinitySchema)) as Node)].filter(([, node]) => node['type'] === 'array');
    assert.ok(arrays.length > 0);
    for (const [path, node] of arrays) assert.equal(typeof node['maxItems'], 'number', `affinity${path}: bounded by the operator`);
  });

  it('serves v1alpha1 without checking affinity, which the operator checks once converted', () => {
    const props = ((openApiSchema('v1alpha1')['properties'] as Record<string, Node>)['spec'] as Node)['properties'] as Record<string, Node>;
    for (const component of ['gateway', 'core', 'processing', 'broker', 'database']) {
      const fields = props[component]!['properties'] as Record<string, Node>;
      assert.equal(fields['placement'], undefined, component);
      assert.deepEqual(fields['affinity'], { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }, component);
      assert.deepEqual(fields['nodeSelector'], { type: 'object', additionalProperties: { type: 'string' } }, component);
      assert.deepEqual(((fields['tolerations']!['items'] as Node)['properties'] as Record<string, Node>)['operator'], { type: 'string', enum: ['Exists', 'Equal'] }, component);
    }
    assert.match(String(openApiSchema('v1alpha1')['description']), /kubectl explain iotservices --api-version=cp\.iotservices\.io\/v1beta1 describes them.*the operator, not the API server, checks affinity/);
    const written = {
      apiVersion: 'cp.iotservices.io/v1alpha1',
      kind: 'IoTService',
      metadata: { name: 'a', namespace: 'devawsk8s' },
      spec: { version: '1', gateway: { affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 500, preference: {} }] } } } },
    } as KubeObject;
    const stored = convertIoTService(written, 'cp.iotservices.io/v1beta1') as KubeObject & { spec: unknown };
    assert.deepEqual(validateIoTServiceSpec(stored.spec), {
      ok: false,
      errors: ['spec.gateway.placement.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be an integer from 1 to 100'],
    });
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
