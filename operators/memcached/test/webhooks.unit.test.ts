/**
 * The Memcached webhooks as the operator-sdk Go sample has them, called as plain functions: a
 * missing or 0 size becomes 3, a size given is kept; an even size is refused with the sample's
 * message, an odd one allowed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MemcachedObject } from '../src/api/memcached.ts';
import { defaultMemcached, validateMemcached } from '../src/webhooks/memcached.ts';

const memcached = (spec: Partial<MemcachedObject['spec']>) => ({ apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name: 'example' }, spec }) as MemcachedObject;

test('a missing or 0 size is defaulted to 3; a size given is kept', () => {
  assert.equal(defaultMemcached(memcached({})).spec.size, 3);
  assert.equal(defaultMemcached(memcached({ size: 0 })).spec.size, 3);
  assert.equal(defaultMemcached({ ...memcached({}), spec: undefined } as unknown as MemcachedObject).spec.size, 3);
  assert.equal(defaultMemcached(memcached({ size: 5 })).spec.size, 5);
});

test('an even size is refused with the sample message; an odd one is allowed', () => {
  assert.equal(validateMemcached(memcached({ size: 2 })), 'Cluster size must be an odd number');
  assert.equal(validateMemcached(memcached({ size: 1 })), undefined);
  assert.equal(validateMemcached(memcached({ size: 7 })), undefined);
});
