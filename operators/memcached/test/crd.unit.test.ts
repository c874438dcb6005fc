/**
 * The Memcached CRD's schema says what the walkthrough needs (`npm run generate -- --check`,
 * scripts/test/generate.unit.test.ts, holds the committed CRD to it): size an int32 ≥ 0 and required, nodes a list of strings, a status
 * subresource.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import { memcachedCrd, memcachedCrdYaml } from '../src/api/crd.ts';
import { isValidMemcachedSpec } from '../src/api/memcached.ts';

test('the CRD serves cache.example.com/v1alpha1 Memcached with a status subresource', () => {
  const crd = parse(memcachedCrdYaml());
  assert.equal(crd.metadata.name, 'memcacheds.cache.example.com');
  assert.equal(crd.spec.group, 'cache.example.com');
  assert.equal(crd.spec.scope, 'Namespaced');
  assert.equal(crd.spec.names.kind, 'Memcached');
  const [version] = crd.spec.versions;
  assert.equal(version.name, 'v1alpha1');
  assert.deepEqual(version.subresources, { status: {} });
});

test('spec.size is a required int32 of at least 0; status.nodes is a list of strings', () => {
  const schema = (memcachedCrd() as { spec: { versions: Array<{ schema: { openAPIV3Schema: any } }> } }).spec.versions[0]!.schema.openAPIV3Schema;
  const spec = schema.properties.spec;
  assert.deepEqual(spec.required, ['size']);
  assert.deepEqual(
    { type: spec.properties.size.type, format: spec.properties.size.format, minimum: spec.properties.size.minimum },
    { type: 'integer', format: 'int32', minimum: 0 },
  );
  assert.deepEqual(schema.properties.status.properties.nodes, { type: 'array', description: 'Nodes are the names of the memcached pods, sorted.', items: { type: 'string' } });
  assert.equal(JSON.stringify(schema).includes('x-kubernetes-preserve-unknown-fields'), false);
});

test('the operator-side check accepts what the CRD accepts and rejects a negative size', () => {
  assert.equal(isValidMemcachedSpec({ size: 3 }), true);
  assert.equal(isValidMemcachedSpec({ size: 0 }), true);
  assert.equal(isValidMemcachedSpec({ size: -1 }), false);
  assert.equal(isValidMemcachedSpec({ size: 1.5 }), false);
  assert.equal(isValidMemcachedSpec({}), false);
});
