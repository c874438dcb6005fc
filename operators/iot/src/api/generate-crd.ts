/**
 * Writes the generated IoTService CRD to deploy/crds/iotservices.cp.iotservices.io.yaml and into the
 * Helm chart (chart/iot-operator/crds/).
 *
 * Guarantees: both files' content is exactly `iotServiceCrdYaml()`; running it twice changes
 * nothing. A unit test fails while a committed file and the schema disagree.
 * Run with: npm run -w @iot-operator/iot generate
 */

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { iotServiceCrdYaml } from './crd.ts';

const files = ['../../deploy/crds/iotservices.cp.iotservices.io.yaml', '../../chart/iot-operator/crds/iotservices.cp.iotservices.io.yaml'];

for (const relative of files) {
  const file = fileURLToPath(new URL(relative, import.meta.url));
  writeFileSync(file, iotServiceCrdYaml());
  console.log(`wrote ${file}`);
}
