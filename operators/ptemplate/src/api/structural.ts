/**
 * TypeBox schema → structural OpenAPI v3 schema, as a CustomResourceDefinition needs it.
 *
 * Guarantees: the output keeps only JSON-Schema-props keywords the API server accepts (plus
 * `x-kubernetes-*` extensions), every node has a `type`, string maps (`Type.Record`) become
 * `additionalProperties` schemas, TypeBox's symbol-keyed metadata and `additionalProperties:
 * false` are dropped, and key order is stable (`type`, `description`, then the rest), so the
 * generated YAML is deterministic. A schema it cannot express structurally raises an error
 * naming the offending node instead of producing a CRD the API server would reject.
 */

import type { TSchema } from '@sinclair/typebox';

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
]);

/** A node of an apiextensions.k8s.io/v1 JSONSchemaProps tree (the subset emitted here). */
export interface StructuralSchema {
  type: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  [keyword: string]: unknown;
}

export function toStructuralSchema(schema: TSchema): StructuralSchema {
  // A JSON round trip drops TypeBox's symbol-keyed metadata ([Kind], [OptionalKind], ...).
  return convert(JSON.parse(JSON.stringify(schema)) as Record<string, unknown>, '');
}

function convert(node: Record<string, unknown>, at: string): StructuralSchema {
  if (typeof node['type'] !== 'string') throw new Error(`schema node ${at || '<root>'} has no single type: ${JSON.stringify(node).slice(0, 200)}`);
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (value === undefined) continue;
    if (KEPT_KEYWORDS.has(key) || key.startsWith('x-kubernetes-')) out[key] = value;
  }
  const properties = node['properties'] as Record<string, Record<string, unknown>> | undefined;
  if (properties) out['properties'] = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, convert(v, `${at}.${k}`)]));
  const patternProperties = node['patternProperties'] as Record<string, Record<string, unknown>> | undefined;
  if (patternProperties) {
    const entries = Object.entries(patternProperties);
    if (entries.length !== 1 || entries[0]![0] !== '^(.*)$') throw new Error(`schema node ${at} has patternProperties a CRD cannot express`);
    out['additionalProperties'] = convert(entries[0]![1], `${at}[*]`);
  }
  const additional = node['additionalProperties'];
  if (additional && typeof additional === 'object') out['additionalProperties'] = convert(additional as Record<string, unknown>, `${at}[*]`);
  const items = node['items'];
  if (items && typeof items === 'object') out['items'] = convert(items as Record<string, unknown>, `${at}[]`);
  if (Array.isArray(out['required']) && out['required'].length === 0) delete out['required'];
  const { type, description, ...rest } = out;
  return { type: type as StructuralSchema['type'], ...(description !== undefined ? { description } : {}), ...rest };
}
