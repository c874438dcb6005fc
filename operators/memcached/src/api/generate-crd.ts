/**
 * Writes the generated Memcached CRD to deploy/crds/cache_v1alpha1_memcached_crd.yaml.
 *
 * Guarantees: the file's content is exactly `memcachedCrdYaml()`; running it twice changes
 * nothing. A unit test fails while the committed file and the schema disagree.
 * Run with: npm run -w @iot-operator/memcached generate
 */

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MEMCACHED_CRD_FILE, memcachedCrdYaml } from './crd.ts';

const file = fileURLToPath(new URL(`../../${MEMCACHED_CRD_FILE}`, import.meta.url));
writeFileSync(file, memcachedCrdYaml());
console.log(`wrote ${file}`);
