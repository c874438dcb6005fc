/**
 * The IoTService CustomResourceDefinition, derived from the TypeBox schema in iotservice.ts.
 *
 * Guarantees: `iotServiceCrd()` is deterministic and returns an apiextensions.k8s.io/v1 CRD whose
 * schema is structural: every node has a `type` (or is an int-or-string quantity), maps are
 * `additionalProperties` schemas, no TypeBox internals (`$id`, symbols, `const`, `anyOf` of
 * literals, `patternProperties`, `additionalProperties: false`, `uniqueItems`) remain, and
 * nothing is marked `x-kubernetes-preserve-unknown-fields`, so the API server prunes unknown
 * fields. Defaults and CEL rules (`x-kubernetes-validations`) are carried over unchanged.
 */

import type { TSchema } from '@sinclair/typebox';
import { stringify } from 'yaml';
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

/** JSON-Schema-props keywords the API server accepts and that we use. Everything else is dropped. */
const KEPT_KEYWORDS = new Set([
  'type',
  'format',
  'description',
  'default',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
  'enum',
  'required',
  'items',
  'properties',
  'additionalProperties',
  'anyOf',
  'nullable',
]);

/** A node of an apiextensions.k8s.io/v1 JSONSchemaProps tree (the subset we emit). */
export interface StructuralSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  [keyword: string]: unknown;
}

/** Converts a TypeBox schema into a structural OpenAPI v3 schema for a CRD. */
export function toStructuralSchema(schema: TSchema): StructuralSchema {
  // JSON round trip drops TypeBox's symbol-keyed metadata ([Kind], [OptionalKind], ...).
  return convert(JSON.parse(JSON.stringify(schema)) as Record<string, unknown>);
}

function convert(node: Record<string, unknown>): StructuralSchema {
  const anyOf = node['anyOf'] as Record<string, unknown>[] | undefined;
  if (anyOf) {
    const literals = anyOf.every((member) => 'const' in member && member['type'] === 'string');
    if (literals) {
      const rest = keep({ ...node, anyOf: undefined });
      return typeFirst({ ...rest, type: 'string', enum: anyOf.map((member) => member['const']) });
    }
    const types = anyOf.map((member) => member['type']).sort();
    if (types.length === 2 && types[0] === 'integer' && types[1] === 'string') {
      const stringMember = anyOf.find((member) => member['type'] === 'string');
      const pattern = stringMember?.['pattern'];
      return {
        ...typeFirst(keep({ ...node, anyOf: undefined })),
        anyOf: [{ type: 'integer' }, { type: 'string' }],
        ...(typeof pattern === 'string' ? { pattern } : {}),
        'x-kubernetes-int-or-string': true,
      };
    }
    throw new Error(`cannot express anyOf of ${JSON.stringify(types)} in a structural schema`);
  }
  if ('const' in node) {
    const { const: value, ...rest } = node;
    return typeFirst({ ...keep(rest), enum: [value] });
  }

  const out: StructuralSchema = keep(node);
  const properties = node['properties'] as Record<string, Record<string, unknown>> | undefined;
  if (properties) {
    out['properties'] = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, convert(v)]));
  }
  const patternProperties = node['patternProperties'] as Record<string, Record<string, unknown>> | undefined;
  if (patternProperties) {
    const entries = Object.entries(patternProperties);
    const [first] = entries;
    if (entries.length !== 1 || !first || first[0] !== '^(.*)$') {
      throw new Error(`patternProperties ${JSON.stringify(Object.keys(patternProperties))} cannot be expressed in a CRD`);
    }
    out['additionalProperties'] = convert(first[1]);
  }
  const additional = node['additionalProperties'];
  if (additional && typeof additional === 'object') out['additionalProperties'] = convert(additional as Record<string, unknown>);
  else if (!patternProperties) delete out['additionalProperties'];
  const items = node['items'];
  if (items && typeof items === 'object') out['items'] = convert(items as Record<string, unknown>);
  if (node['uniqueItems'] === true && !('x-kubernetes-list-type' in node)) out['x-kubernetes-list-type'] = 'set';
  if (Array.isArray(out['required']) && out['required'].length === 0) delete out['required'];
  if (out.type === undefined) throw new Error(`schema node without type: ${JSON.stringify(node).slice(0, 200)}`);
  return typeFirst(out);
}

/** `type` then `description` first: the generated YAML reads like hand-written CRDs. */
function typeFirst(node: StructuralSchema): StructuralSchema {
  const { type, description, ...rest } = node;
  return { ...(type ? { type } : {}), ...(description !== undefined ? { description } : {}), ...rest };
}

/** Keeps JSON-Schema-props keywords and `x-kubernetes-*` extensions; nested schemas are handled by the caller. */
function keep(node: Record<string, unknown>): StructuralSchema {
  const out: StructuralSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (value === undefined) continue;
    if (key === 'properties' || key === 'items' || key === 'anyOf') continue;
    if (KEPT_KEYWORDS.has(key) || key.startsWith('x-kubernetes-')) out[key] = value;
  }
  return out;
}

export const IOTSERVICE_CRD_NAME = `${IOTSERVICE_PLURAL}.${API_GROUP}`;

/** The CustomResourceDefinition object for `iotservices.cp.iotservices.io`. */
export function iotServiceCrd(): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: IOTSERVICE_CRD_NAME,
      labels: { 'app.kubernetes.io/part-of': 'iot-operator' },
    },
    spec: {
      group: API_GROUP,
      scope: 'Namespaced',
      names: {
        kind: IOTSERVICE_KIND,
        listKind: `${IOTSERVICE_KIND}List`,
        plural: IOTSERVICE_PLURAL,
        singular: IOTSERVICE_SINGULAR,
        shortNames: [...IOTSERVICE_SHORT_NAMES],
      },
      versions: [
        {
          name: API_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Available, Processing or Failed' },
            { name: 'Ready', type: 'string', jsonPath: '.status.ready', description: 'Ready pods / desired pods' },
            { name: 'Version', type: 'string', jsonPath: '.spec.version', description: 'Image tag of every component' },
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: 'IoTService is one IoT service instance of a landscape; its name is the instance id.',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: toStructuralSchema(IoTServiceSpecSchema),
                status: toStructuralSchema(IoTServiceStatusSchema),
              },
            },
          },
        },
      ],
    },
  };
}

/** The CRD as the YAML committed at deploy/crds/cp_v1alpha1_iotservice_crd.yml. */
export function iotServiceCrdYaml(): string {
  return (
    '# Generated from operators/iot/src/api/iotservice.ts; do not edit.\n' +
    '# Regenerate with: npm run -w @iot-operator/iot generate\n' +
    stringify(iotServiceCrd(), { lineWidth: 0 })
  );
}
