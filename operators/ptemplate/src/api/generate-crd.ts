/**
 * Writes the generated Ptemplate CRD to config/crd/bases/pt.example.com_ptemplates.yaml (the seed's path).
 *
 * Guarantees: the file's content is exactly `ptemplateCrdYaml()`; running it twice changes
 * nothing. A unit test fails while the committed file and the schema disagree.
 * Run with: npm run -w @iot-operator/ptemplate generate
 */

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PTEMPLATE_CRD_FILE, ptemplateCrdYaml } from './crd.ts';

const file = fileURLToPath(new URL(`../../${PTEMPLATE_CRD_FILE}`, import.meta.url));
writeFileSync(file, ptemplateCrdYaml());
console.log(`wrote ${file}`);
