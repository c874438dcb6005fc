/**
 * TypeBox schema → structural OpenAPI v3 schema, as a CustomResourceDefinition needs it.
 *
 * Guarantees: the output keeps only JSON-Schema-props keywords the API server accepts (plus
 * `x-kubernetes-*` extensions, defaults and CEL rules unchanged); every node has a `type`,
 * except int-or-string nodes (`x-kubernetes-int-or-string` with `anyOf` integer | string);
 * string maps (`Type.Record`) become `additionalProperties` schemas; a union of string
 * literals and a `Type.Literal` become `enum`; `uniqueItems` becomes
 * `x-kubernetes-list-type: set`; TypeBox's symbol-keyed metadata, `$id`, `const`,
 * `patternProperties` and `additionalProperties: false` are dropped; nothing is marked
 * `x-kubernetes-preserve-unknown-fields`, so the API server prunes unknown fields. Key order is
 * stable (`type`, `description`, then the rest), so generated YAML is deterministic. A schema it
 * cannot express structurally raises an error naming the offending node instead of producing a
 * CRD the API server would reject.
 */

import type { TSchema } from '@sinclair/typebox';

/** JSON-Schema-props keywords the API server accepts and that are carried over. Everything else is dropped. */
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

/** A node of an apiextensions.k8s.io/v1 JSONSchemaProps tree (the subset emitted here). */
export interface StructuralSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  [keyword: string]: unknown;
}

/** Converts a TypeBox schema into a structural OpenAPI v3 schema for a CRD. */
export function toStructuralSchema(schema: TSchema): StructuralSchema {
  // A JSON round trip drops TypeBox's symbol-keyed metadata ([Kind], [OptionalKind], ...).
  return convert(JSON.parse(JSON.stringify(schema)) as Record<string, unknown>, '');
}

function convert(node: Record<string, unknown>, at: string): StructuralSchema {
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
    throw new Error(`schema node ${at || '<root>'}: cannot express anyOf of ${JSON.stringify(types)} in a structural schema`);
  }
  if ('const' in node) {
    const { const: value, ...rest } = node;
    return typeFirst({ ...keep(rest), enum: [value] });
  }

  const out: StructuralSchema = keep(node);
  const properties = node['properties'] as Record<string, Record<string, unknown>> | undefined;
  if (properties) {
    out['properties'] = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, convert(v, `${at}.${k}`)]));
  }
  const patternProperties = node['patternProperties'] as Record<string, Record<string, unknown>> | undefined;
  if (patternProperties) {
    const entries = Object.entries(patternProperties);
    const [first] = entries;
    if (entries.length !== 1 || !first || first[0] !== '^(.*)$') {
      throw new Error(`schema node ${at || '<root>'}: patternProperties ${JSON.stringify(Object.keys(patternProperties))} cannot be expressed in a CRD`);
    }
    out['additionalProperties'] = convert(first[1], `${at}[*]`);
  }
  const additional = node['additionalProperties'];
  if (additional && typeof additional === 'object') out['additionalProperties'] = convert(additional as Record<string, unknown>, `${at}[*]`);
  else if (!patternProperties) delete out['additionalProperties'];
  const items = node['items'];
  if (items && typeof items === 'object') out['items'] = convert(items as Record<string, unknown>, `${at}[]`);
  if (node['uniqueItems'] === true && !('x-kubernetes-list-type' in node)) out['x-kubernetes-list-type'] = 'set';
  if (Array.isArray(out['required']) && out['required'].length === 0) delete out['required'];
  if (out.type === undefined) throw new Error(`schema node ${at || '<root>'} has no type: ${JSON.stringify(node).slice(0, 200)}`);
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
