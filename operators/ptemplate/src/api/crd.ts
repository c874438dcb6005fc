/**
 * The Ptemplate CustomResourceDefinition, derived from the TypeBox schema in ptemplate.ts.
 *
 * Guarantees: `ptemplateCrd()` is deterministic and returns an apiextensions.k8s.io/v1 CRD for
 * `ptemplates.pt.example.com` (namespaced, v1alpha1 served and stored, status subresource)
 * whose structural schema, defaults and CEL rule come from the API schemas; nothing preserves
 * unknown fields. `ptemplateCrdYaml()` is the exact content of the committed
 * config/crd/bases/pt.example.com_ptemplates.yaml (a unit test compares them).
 */

import { generatedManifestYaml, singleVersionCustomResourceDefinition } from '@iot-operator/runtime';
import {
  API_GROUP,
  API_VERSION,
  PTEMPLATE_KIND,
  PTEMPLATE_PLURAL,
  PTEMPLATE_SINGULAR,
  PtemplateSpecSchema,
  PtemplateStatusSchema,
} from './ptemplate.ts';

export const PTEMPLATE_CRD_NAME = `${PTEMPLATE_PLURAL}.${API_GROUP}`;
export const PTEMPLATE_CRD_FILE = 'config/crd/bases/pt.example.com_ptemplates.yaml';

export function ptemplateCrd(): Record<string, unknown> {
  return singleVersionCustomResourceDefinition({
    group: API_GROUP,
    scope: 'Namespaced',
    names: { kind: PTEMPLATE_KIND, plural: PTEMPLATE_PLURAL, singular: PTEMPLATE_SINGULAR },
    version: {
      name: API_VERSION,
      printerColumns: [
        { name: 'KMM', type: 'string', jsonPath: ".status.conditions[?(@.type=='KMMAvailable')].status", description: 'Whether the KMM Module exists' },
        { name: 'Consumers', type: 'string', jsonPath: ".status.conditions[?(@.type=='ConsumersReady')].message", description: 'Ready consumer pods' },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
      description: 'Ptemplate loads the pt kernel module through KMM on selected nodes and runs a consumer pod on each.',
      spec: PtemplateSpecSchema,
      status: PtemplateStatusSchema,
    },
  });
}

export function ptemplateCrdYaml(): string {
  return generatedManifestYaml(ptemplateCrd(), { source: 'operators/ptemplate/src/api/ptemplate.ts', command: 'npm run generate (ptemplate:generate)' });
}
