/**
 * Writes the generated IoTService CRD to deploy/crds/cp_v1alpha1_iotservice_crd.yml and into the
 * Helm chart (chart/iot-operator/crds/).
 *
 * Guarantees: both files' content is exactly `iotServiceCrdYaml()`; running it twice changes
 * nothing. A unit test fails while a committed file and the schema disagree.
 * Run with: npm run -w @iot-operator/iot generate
 */

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { iotServiceCrdYaml } from './crd.ts';

const files = ['../../deploy/crds/cp_v1alpha1_iotservice_crd.yml', '../../chart/iot-operator/crds/cp_v1alpha1_iotservice_crd.yml'];

for (const relative of files) {
  const file = fileURLToPath(new URL(relative, import.meta.url));
  writeFileSync(file, iotServiceCrdYaml());
  console.log(`wrote ${file}`);
}
