/**
 * The IoTService CustomResourceDefinition, derived from the TypeBox schema in iotservice.ts.
 *
 * Guarantees: `iotServiceCrd()` is deterministic and returns an apiextensions.k8s.io/v1 CRD for
 * `iotservices.cp.iotservices.io` (namespaced; v1alpha1 and v1beta1 served, v1beta1 stored and
 * converted by the operator's webhook; status subresource, short name `iots`) whose schemas are
 * those of crd-schema.ts, made structural by the runtime's `toStructuralSchema`: every node has a
 * `type` (or is an int-or-string quantity), maps are `additionalProperties` schemas, no TypeBox
 * internals remain, and only the objects crd-schema.ts leaves unchecked are marked
 * `x-kubernetes-preserve-unknown-fields`, so the API server prunes unknown fields everywhere
 * else. Defaults and CEL rules (`x-kubernetes-validations`) are carried over unchanged.
 * `iotServiceCrdYaml()` is the exact content of the committed CRD files (a unit test compares
 * them).
 */

import { customResourceDefinition, generatedManifestYaml } from '@iot-operator/runtime';
import {
  API_GROUP,
  API_VERSION,
  IOTSERVICE_KIND,
  IOTSERVICE_PLURAL,
  IOTSERVICE_SHORT_NAMES,
  IOTSERVICE_SINGULAR,
  IoTServiceStatusSchema,
} from './iotservice.ts';
import { IoTServiceCrdSpecSchema, IoTServiceV1alpha1CrdSpecSchema, IoTServiceV1alpha1CrdStatusSchema } from './crd-schema.ts';
import { API_VERSION_V1ALPHA1 } from './v1alpha1.ts';

export const IOTSERVICE_CRD_NAME = `${IOTSERVICE_PLURAL}.${API_GROUP}`;

/** The path of the operator's conversion webhook (conversion-webhook.ts). */
export const IOTSERVICE_CONVERSION_PATH = '/convert';

/** Where the API server reaches the conversion webhook. */
export type ConversionTarget = { url: string } | { service: { namespace: string; name: string; port?: number } };

/** The CRD's `spec.conversion` for a webhook at `target`, trusting the CA `caPem` (PEM; empty: the API server's own trust). */
export function conversionClientConfig(target: ConversionTarget, caPem: string) {
  const clientConfig =
    'url' in target
      ? { url: `${target.url.replace(/\/+$/, '')}${IOTSERVICE_CONVERSION_PATH}` }
      : { service: { namespace: target.service.namespace, name: target.service.name, path: IOTSERVICE_CONVERSION_PATH, port: target.service.port ?? 443 } };
  return {
    strategy: 'Webhook' as const,
    webhook: {
      conversionReviewVersions: ['v1'],
      clientConfig: { ...clientConfig, ...(caPem ? { caBundle: Buffer.from(caPem).toString('base64') } : {}) },
    },
  };
}

const printerColumns = [
  { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Available, Processing or Failed' },
  { name: 'Ready', type: 'string', jsonPath: '.status.ready', description: 'Ready pods / desired pods' },
  { name: 'Version', type: 'string', jsonPath: '.spec.version', description: 'Image tag of every component' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
] as const;

const description = 'IoTService is one IoT service instance of a landscape; its name is the instance id.';
const v1alpha1Description =
  `${description} ${API_VERSION_V1ALPHA1} has the fields of ${API_VERSION} (kubectl explain iotservices --api-version=${API_GROUP}/${API_VERSION} describes them), ` +
  "with each component's nodeSelector, tolerations and affinity beside its other fields instead of under placement; the operator, not the API server, checks affinity.";

/**
 * Until an operator points it at its conversion webhook (conversion-webhook.ts), the CRD names
 * the chart's webhook Service in the seed's landscape namespace.
 */
export const DEFAULT_CONVERSION_SERVICE = { namespace: 'devawsk8s', name: 'iot-operator-webhook' } as const;

/** The CustomResourceDefinition object for `iotservices.cp.iotservices.io`. */
export function iotServiceCrd(): Record<string, unknown> {
  const crd = customResourceDefinition({
    group: API_GROUP,
    scope: 'Namespaced',
    names: { kind: IOTSERVICE_KIND, plural: IOTSERVICE_PLURAL, singular: IOTSERVICE_SINGULAR, shortNames: IOTSERVICE_SHORT_NAMES },
    labels: { 'app.kubernetes.io/part-of': 'iot-operator' },
    versions: [
      { name: API_VERSION_V1ALPHA1, served: true, storage: false, subresources: { status: {} }, printerColumns: [...printerColumns], description: v1alpha1Description, spec: IoTServiceV1alpha1CrdSpecSchema, status: IoTServiceV1alpha1CrdStatusSchema },
      { name: API_VERSION, served: true, storage: true, subresources: { status: {} }, printerColumns: [...printerColumns], description, spec: IoTServiceCrdSpecSchema, status: IoTServiceStatusSchema },
    ],
  });
  return { ...crd, spec: { ...crd.spec, conversion: conversionClientConfig({ service: DEFAULT_CONVERSION_SERVICE }, '') } };
}

/** The CRD as the YAML committed at deploy/crds/iotservices.cp.iotservices.io.yaml. */
export function iotServiceCrdYaml(): string {
  return generatedManifestYaml(iotServiceCrd(), { source: 'operators/iot/src/api/iotservice.ts', command: 'npm run generate (iot:generate)' });
}
