/**
 * The Memcached CustomResourceDefinition, derived from the TypeBox schema in memcached.ts.
 *
 * Guarantees: `memcachedCrd()` is deterministic and returns an apiextensions.k8s.io/v1 CRD for
 * `memcacheds.cache.example.com` (namespaced, v1alpha1 served and stored, status subresource)
 * whose structural schema is generated from the API schemas; nothing preserves unknown fields,
 * so the API server prunes them. `memcachedCrdYaml()` is the exact content of the committed
 * deploy/crds/cache_v1alpha1_memcached_crd.yaml (a unit test compares them).
 */

import { generatedManifestYaml, singleVersionCustomResourceDefinition } from '@iot-operator/runtime';
import {
  API_GROUP,
  API_VERSION,
  MEMCACHED_KIND,
  MEMCACHED_PLURAL,
  MEMCACHED_SINGULAR,
  MemcachedSpecSchema,
  MemcachedStatusSchema,
} from './memcached.ts';

export const MEMCACHED_CRD_NAME = `${MEMCACHED_PLURAL}.${API_GROUP}`;
export const MEMCACHED_CRD_FILE = 'deploy/crds/cache_v1alpha1_memcached_crd.yaml';

export function memcachedCrd(): Record<string, unknown> {
  return singleVersionCustomResourceDefinition({
    group: API_GROUP,
    scope: 'Namespaced',
    names: { kind: MEMCACHED_KIND, plural: MEMCACHED_PLURAL, singular: MEMCACHED_SINGULAR },
    version: {
      name: API_VERSION,
      printerColumns: [
        { name: 'Size', type: 'integer', jsonPath: '.spec.size', description: 'Desired number of memcached pods' },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
      description: 'Memcached is a memcached cluster of spec.size pods run by the memcached operator.',
      spec: MemcachedSpecSchema,
      status: MemcachedStatusSchema,
    },
  });
}

export function memcachedCrdYaml(): string {
  return generatedManifestYaml(memcachedCrd(), { source: 'operators/memcached/src/api/memcached.ts', command: 'npm run generate (memcached:generate)' });
}
