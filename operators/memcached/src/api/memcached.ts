/**
 * The Memcached API (cache.example.com/v1alpha1), defined once.
 *
 * Guarantees: the TypeBox schemas below are the single source of the TypeScript types
 * (`MemcachedSpec`, `MemcachedStatus`, `Memcached`), of the operator-side check
 * (`isValidMemcachedSpec`) and of the CRD's OpenAPI schema (see crd.ts). The group, version and
 * kind are those of the Operator Framework walkthrough, so its commands and YAML work unchanged.
 *
 * `spec.size` is an int32 ≥ 0: the API server rejects a negative size (reason Invalid) before
 * the operator ever sees it; 0 is allowed and scales the memcached Deployment to no pods.
 */

import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { customResource, type KubeObject, type ObjectMeta } from '@iot-operator/runtime';

export const API_GROUP = 'cache.example.com';
export const API_VERSION = 'v1alpha1';
export const MEMCACHED_API_VERSION = `${API_GROUP}/${API_VERSION}` as const;
export const MEMCACHED_KIND = 'Memcached' as const;
export const MEMCACHED_PLURAL = 'memcacheds';
export const MEMCACHED_SINGULAR = 'memcached';

/** The largest value of an int32, the Go type of the walkthrough's `Size`. */
export const INT32_MAX = 2_147_483_647;

/** The runtime's resource type for Memcached objects. */
export const Memcached = customResource(API_GROUP, API_VERSION, MEMCACHED_KIND, MEMCACHED_PLURAL);

export const MemcachedSpecSchema = Type.Object(
  {
    size: Type.Integer({
      description: 'Size is the size of the memcached deployment: the number of memcached pods.',
      format: 'int32',
      minimum: 0,
      maximum: INT32_MAX,
    }),
  },
  { description: 'MemcachedSpec defines the desired state of Memcached.' },
);

export const MemcachedStatusSchema = Type.Object(
  {
    nodes: Type.Array(Type.String(), { description: 'Nodes are the names of the memcached pods, sorted.' }),
  },
  { description: 'MemcachedStatus defines the observed state of Memcached.' },
);

export type MemcachedSpec = Static<typeof MemcachedSpecSchema>;
export type MemcachedStatus = Static<typeof MemcachedStatusSchema>;

export interface MemcachedObject extends KubeObject {
  apiVersion?: typeof MEMCACHED_API_VERSION;
  kind?: typeof MEMCACHED_KIND;
  metadata: ObjectMeta;
  spec: MemcachedSpec;
  status?: MemcachedStatus;
}

/** True when `spec` satisfies the schema (the API server has already checked it; this guards old objects). */
export function isValidMemcachedSpec(spec: unknown): spec is MemcachedSpec {
  return Value.Check(MemcachedSpecSchema, spec);
}
