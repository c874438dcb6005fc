/**
 * Writes the generated Armada CRDs to deploy/crds/ (one file per kind, see CRD_FILES).
 *
 * Guarantees: each file's content is exactly `crdYaml(crd)`; running it twice changes nothing.
 * A unit test fails while the committed files and the schemas disagree.
 * Run with: npm run -w @iot-operator/armada generate
 */

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { armadaCrds, CRD_FILES, crdYaml } from './crd.ts';

for (const crd of armadaCrds()) {
  const file = fileURLToPath(new URL(`../../${CRD_FILES[crd.spec.names.kind]}`, import.meta.url));
  writeFileSync(file, crdYaml(crd));
  console.log(`wrote ${file}`);
}
