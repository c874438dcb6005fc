/**
 * The IoTService CustomResourceDefinition, derived from the TypeBox schema in iotservice.ts.
 *
 * Guarantees: `iotServiceCrd()` is deterministic and returns an apiextensions.k8s.io/v1 CRD for
 * `iotservices.cp.iotservices.io` (namespaced, v1alpha1 served and stored, status subresource,
 * short name `iots`) whose schema is structural (see the runtime's `toStructuralSchema`): every
 * node has a `type` (or is an int-or-string quantity), maps are `additionalProperties` schemas,
 * no TypeBox internals remain, and nothing is marked `x-kubernetes-preserve-unknown-fields`, so
 * the API server prunes unknown fields. Defaults and CEL rules (`x-kubernetes-validations`) are
 * carried over unchanged. `iotServiceCrdYaml()` is the exact content of the committed CRD files
 * (a unit test compares them).
 */

import { customResourceDefinition, generatedManifestYaml } from '@iot-operator/runtime';
import {
  API_GROUP,
  API_VERSION,
  IOTSERVICE_KIND,
  IOTSERVICE_PLURAL,
  IOTSERVICE_SHORT_NAMES,
  IOTSERVICE_SINGULAR,
  IoTServiceSpecSchema,
  IoTServiceStatusSchema,
} from './iotservice.ts';

export const IOTSERVICE_CRD_NAME = `${IOTSERVICE_PLURAL}.${API_GROUP}`;

/** The CustomResourceDefinition object for `iotservices.cp.iotservices.io`. */
export function iotServiceCrd(): Record<string, unknown> {
  return customResourceDefinition({
    group: API_GROUP,
    scope: 'Namespaced',
    names: { kind: IOTSERVICE_KIND, plural: IOTSERVICE_PLURAL, singular: IOTSERVICE_SINGULAR, shortNames: IOTSERVICE_SHORT_NAMES },
    labels: { 'app.kubernetes.io/part-of': 'iot-operator' },
    versions: [
      {
        name: API_VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        printerColumns: [
          { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Available, Processing or Failed' },
          { name: 'Ready', type: 'string', jsonPath: '.status.ready', description: 'Ready pods / desired pods' },
          { name: 'Version', type: 'string', jsonPath: '.spec.version', description: 'Image tag of every component' },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        description: 'IoTService is one IoT service instance of a landscape; its name is the instance id.',
        spec: IoTServiceSpecSchema,
        status: IoTServiceStatusSchema,
      },
    ],
  });
}

/** The CRD as the YAML committed at deploy/crds/cp_v1alpha1_iotservice_crd.yml. */
export function iotServiceCrdYaml(): string {
  return generatedManifestYaml(iotServiceCrd(), { source: 'operators/iot/src/api/iotservice.ts', command: 'npm run -w @iot-operator/iot generate' });
}
