/**
 * TypeBox → structural CRD schema and CRD assembly: what the API server needs (a type on every
 * node, maps as additionalProperties, enums for literals, int-or-string quantities, no TypeBox
 * internals), a stable key order, and an error naming the node it cannot express.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import { customResourceDefinition, generatedManifestYaml, singleVersionCustomResourceDefinition } from '../src/crd/crd.ts';
import { toStructuralSchema } from '../src/crd/structural-schema.ts';

describe('toStructuralSchema', () => {
  it('keeps API-server keywords, defaults and x-kubernetes extensions; drops TypeBox internals; puts type and description first', () => {
    const schema = Type.Object(
      {
        size: Type.Integer({ minimum: 0, format: 'int32', default: 1, description: 'Pods.' }),
        name: Type.Optional(Type.String({ minLength: 1, $id: 'Name', errorMessage: 'x' })),
      },
      { description: 'Spec.', additionalProperties: false, 'x-kubernetes-validations': [{ rule: 'self.size < 9', message: 'small' }] },
    );
    const out = toStructuralSchema(schema);
    assert.deepEqual(out, {
      type: 'object',
      description: 'Spec.',
      required: ['size'],
      'x-kubernetes-validations': [{ rule: 'self.size < 9', message: 'small' }],
      properties: {
        size: { type: 'integer', description: 'Pods.', minimum: 0, format: 'int32', default: 1 },
        name: { type: 'string', minLength: 1 },
      },
    });
    assert.deepEqual(Object.keys(out).slice(0, 2), ['type', 'description']);
  });

  it('turns string maps into additionalProperties and drops an empty required list', () => {
    assert.deepEqual(toStructuralSchema(Type.Record(Type.String(), Type.String())), { type: 'object', additionalProperties: { type: 'string' } });
    assert.deepEqual(toStructuralSchema(Type.Object({ a: Type.Optional(Type.String()) })), { type: 'object', properties: { a: { type: 'string' } } });
  });

  it('turns literals into enums, unique lists into sets and integer | string into int-or-string', () => {
    assert.deepEqual(toStructuralSchema(Type.Union([Type.Literal('a'), Type.Literal('b')], { default: 'a' })), { type: 'string', default: 'a', enum: ['a', 'b'] });
    assert.deepEqual(toStructuralSchema(Type.Literal('only')), { type: 'string', enum: ['only'] });
    assert.deepEqual(toStructuralSchema(Type.Array(Type.String(), { uniqueItems: true })), { type: 'array', items: { type: 'string' }, 'x-kubernetes-list-type': 'set' });
    assert.deepEqual(toStructuralSchema(Type.Union([Type.Integer(), Type.String({ pattern: '^[0-9]+m?$' })])), {
      anyOf: [{ type: 'integer' }, { type: 'string' }],
      pattern: '^[0-9]+m?$',
      'x-kubernetes-int-or-string': true,
    });
  });

  it('refuses what a structural schema cannot express, naming the node', () => {
    assert.throws(() => toStructuralSchema(Type.Object({ spec: Type.Object({ x: Type.Union([Type.Boolean(), Type.String()]) }) })), /\.spec\.x: cannot express anyOf/);
    assert.throws(() => toStructuralSchema(Type.Object({ any: Type.Unknown() })), /schema node \.any has no type/);
    assert.throws(() => toStructuralSchema(Type.Object({ m: Type.Record(Type.Number(), Type.String()) })), /\.m: patternProperties/);
  });
});

describe('customResourceDefinition', () => {
  const options = {
    group: 'example.com',
    scope: 'Namespaced' as const,
    names: { kind: 'Widget', plural: 'widgets', singular: 'widget' },
    versions: [{ name: 'v1', served: true, storage: true, description: 'A widget.', spec: Type.Object({ size: Type.Integer() }) }],
  };

  it('names the CRD <plural>.<group>, adds listKind and wraps the schemas in a top-level object', () => {
    const crd = customResourceDefinition(options);
    assert.deepEqual(crd, {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.example.com' },
      spec: {
        group: 'example.com',
        scope: 'Namespaced',
        names: { kind: 'Widget', listKind: 'WidgetList', plural: 'widgets', singular: 'widget' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                description: 'A widget.',
                required: ['spec'],
                properties: {
                  apiVersion: { type: 'string' },
                  kind: { type: 'string' },
                  metadata: { type: 'object' },
                  spec: { type: 'object', required: ['size'], properties: { size: { type: 'integer' } } },
                },
              },
            },
          },
        ],
      },
    });
  });

  it('carries labels, short names, subresources, printer columns and the status schema in a fixed order', () => {
    const crd = customResourceDefinition({
      ...options,
      labels: { team: 'a' },
      names: { ...options.names, shortNames: ['wd'] },
      versions: [{ ...options.versions[0]!, status: Type.Object({ ready: Type.Boolean() }), subresources: { status: {} }, printerColumns: [{ name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }] }],
    });
    assert.deepEqual(crd.metadata, { name: 'widgets.example.com', labels: { team: 'a' } });
    assert.deepEqual(crd.spec.names.shortNames, ['wd']);
    const [version] = crd.spec.versions;
    assert.deepEqual(Object.keys(version!), ['name', 'served', 'storage', 'subresources', 'additionalPrinterColumns', 'schema']);
    assert.deepEqual(Object.keys(version!.schema.openAPIV3Schema['properties'] as object), ['apiVersion', 'kind', 'metadata', 'spec', 'status']);
  });

  it('writes the same YAML every time, headed by the command that regenerates it and its source', () => {
    const yaml = generatedManifestYaml(customResourceDefinition(options), { source: 'src/widget.ts', command: 'npm run generate' });
    assert.ok(yaml.startsWith('# Generated by npm run generate; edit src/widget.ts instead.\napiVersion: apiextensions.k8s.io/v1\n'));
    assert.equal(yaml, generatedManifestYaml(customResourceDefinition(options), { source: 'src/widget.ts', command: 'npm run generate' }));
  });

  it('singleVersionCustomResourceDefinition: the one version served and stored, with a status subresource', () => {
    const { versions: [version], ...rest } = options;
    assert.deepEqual(
      singleVersionCustomResourceDefinition({ ...rest, version: { name: version!.name, description: version!.description, spec: version!.spec } }),
      customResourceDefinition({ ...rest, versions: [{ ...version!, subresources: { status: {} } }] }),
    );
  });
});
