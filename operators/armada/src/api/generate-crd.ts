/**
 * Writes the generated Armada CRDs to deploy/crds/ (one file per kind, see CRD_FILES) and the
 * same files into the Helm chart (chart/armada-operator/crds/).
 *
 * Guarantees: each file's content is exactly `crdYaml(crd)`; running it twice changes nothing.
 * `npm run generate -- --check` fails while the committed files and the schemas disagree.
 * Run with: npm run -w @iot-operator/armada generate (or npm run generate, which runs it)
 */

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { armadaCrds, CRD_FILES, crdYaml } from './crd.ts';

for (const crd of armadaCrds()) {
  const deployed = CRD_FILES[crd.spec.names.kind]!;
  for (const relative of [deployed, path.join('chart/armada-operator/crds', path.basename(deployed))]) {
    const file = fileURLToPath(new URL(`../../${relative}`, import.meta.url));
    writeFileSync(file, crdYaml(crd));
    console.log(`wrote ${file}`);
  }
}
