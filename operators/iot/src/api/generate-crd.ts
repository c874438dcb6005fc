/**
 * Writes the generated IoTService CRD to deploy/crds/cp_v1alpha1_iotservice_crd.yml.
 *
 * Guarantees: the file's content is exactly `iotServiceCrdYaml()`; running it twice changes
 * nothing. A unit test fails while the committed file and the schema disagree.
 * Run with: npm run -w @iot-operator/iot generate
 */

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { iotServiceCrdYaml } from './crd.ts';

export const CRD_FILE = fileURLToPath(new URL('../../deploy/crds/cp_v1alpha1_iotservice_crd.yml', import.meta.url));

writeFileSync(CRD_FILE, iotServiceCrdYaml());
console.log(`wrote ${CRD_FILE}`);
