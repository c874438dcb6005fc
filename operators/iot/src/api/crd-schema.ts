/**
 * The OpenAPI schemas of the IoTService CRD's two versions, projected from the TypeBox API
 * (iotservice.ts) so that the CRD stays small: client-side `kubectl apply -f` keeps the whole
 * object in an annotation of at most 262,144 bytes, and a structural schema spells out each
 * subtree wherever it occurs (there are no references). Typed in full, a component's core/v1
 * `affinity` appeared ten times (five components, two versions) and made up most of the CRD.
 *
 * Design:
 * - The TypeBox schemas stay complete: `validateIoTServiceSpec` checks every field, bound and
 *   label selector with its messages, and the operator reports a spec it refuses as Failed with
 *   the reason. Only what the API server checks is projected here.
 * - v1beta1 (stored, and the version `kubectl` uses) types `tolerations` and `affinity` the way
 *   core/v1 does: every field with its type, `required`, enums and numeric ranges (weights
 *   1..100). Below the field itself the projection leaves out descriptions (the field keeps its
 *   one line, which links to the core/v1 reference) and this API's own length and count bounds
 *   (`maxLength`, `maxItems`, `maxProperties`, which core/v1 does not have); a meta/v1 label
 *   selector (a pod affinity term's `labelSelector` and `namespaceSelector`, eight per affinity)
 *   is an object whose content the API server keeps without checking it
 *   (`x-kubernetes-preserve-unknown-fields`). Every field typed before is still typed or inside
 *   such an object, so the API server prunes nothing of an object already stored.
 * - v1alpha1 (the seed's version, which had no scheduling fields) types `nodeSelector` and
 *   `tolerations` as v1beta1 does, and `affinity` is an object the API server keeps without
 *   checking it: conversion.ts moves it under `placement` unchanged, where the operator checks
 *   it. v1alpha1 carries no descriptions: its fields are v1beta1's, which `kubectl explain`
 *   describes (crd.ts says so in the version's own description).
 * - Everything else is the TypeBox schema as it is (the runtime's `toStructuralSchema`).
 *
 * Guarantees: the exported schemas differ from the TypeBox schemas of their versions only as
 * described above; every field of the TypeBox schema is either in the projection or inside an
 * object that preserves unknown fields (a unit test checks both on objects setting every field).
 */

import type { TSchema } from '@sinclair/typebox';
import { COMPONENTS, IoTServiceSpecSchema, IoTServiceStatusSchema } from './iotservice.ts';
import { LabelSelectorSchema } from './scheduling.ts';
import { IoTServiceV1alpha1SpecSchema } from './v1alpha1.ts';

type Node = Record<string, unknown>;

/**
 * Keywords left out below a core/v1 field: descriptions, and this API's bounds that core/v1 does
 * not have (the operator checks them).
 */
const LEFT_OUT_BELOW_CORE_V1_FIELD: readonly string[] = ['description', 'maxLength', 'maxItems', 'maxProperties'];

/** A plain-JSON copy of a TypeBox schema (TypeBox's symbol-keyed metadata dropped). */
function json(schema: TSchema): Node {
  return JSON.parse(JSON.stringify(schema)) as Node;
}

const LABEL_SELECTOR = JSON.stringify(json(LabelSelectorSchema));

/** A field as an object whose content the API server keeps without checking it. */
function uncheckedField(field: Node): Node {
  return { type: field['type'], 'x-kubernetes-preserve-unknown-fields': true };
}

/** Every schema `node` nests (properties, map values, list items, union members), each replaced by `replace(child)`. */
function mapChildren(node: Node, replace: (child: Node) => Node): Node {
  const out: Node = { ...node };
  if (node['properties']) out['properties'] = Object.fromEntries(Object.entries(node['properties'] as Record<string, Node>).map(([k, v]) => [k, replace(v)]));
  if (node['patternProperties']) out['patternProperties'] = Object.fromEntries(Object.entries(node['patternProperties'] as Record<string, Node>).map(([k, v]) => [k, replace(v)]));
  if (typeof node['additionalProperties'] === 'object') out['additionalProperties'] = replace(node['additionalProperties'] as Node);
  if (typeof node['items'] === 'object') out['items'] = replace(node['items'] as Node);
  if (Array.isArray(node['anyOf'])) out['anyOf'] = (node['anyOf'] as Node[]).map(replace);
  return out;
}

/** A node below a core/v1 field: types, enums, `required` and ranges; label selectors unchecked. */
function belowCoreV1Field(node: Node): Node {
  if (JSON.stringify(node) === LABEL_SELECTOR) return { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  const trimmed = Object.fromEntries(Object.entries(node).filter(([key]) => !LEFT_OUT_BELOW_CORE_V1_FIELD.includes(key)));
  return mapChildren(trimmed, belowCoreV1Field);
}

/** A core/v1 field (`tolerations`, `affinity`): its own keywords, and its content as `belowCoreV1Field`. */
function coreV1Field(field: Node): Node {
  return mapChildren(field, belowCoreV1Field);
}

/** `node` with the named properties replaced. */
function withProperties(node: Node, replace: Record<string, (property: Node) => Node>): Node {
  const properties = node['properties'] as Record<string, Node>;
  return { ...node, properties: { ...properties, ...Object.fromEntries(Object.entries(replace).map(([key, f]) => [key, f(properties[key]!)])) } };
}

/** `spec` with every component replaced by `project(component)`. */
function withComponents(spec: Node, project: (component: Node) => Node): Node {
  return withProperties(spec, Object.fromEntries(COMPONENTS.map((component) => [component, project])));
}

/** The v1beta1 spec as the CRD serves it. */
export const IoTServiceCrdSpecSchema = withComponents(json(IoTServiceSpecSchema), (component) =>
  withProperties(component, { placement: (placement) => withProperties(placement, { tolerations: coreV1Field, affinity: coreV1Field }) }),
) as unknown as TSchema;

/** `node` and everything below it without descriptions. */
function withoutDescriptions(node: Node): Node {
  const { description: _, ...rest } = node;
  return mapChildren(rest, withoutDescriptions);
}

/** The v1alpha1 spec as the CRD serves it. */
export const IoTServiceV1alpha1CrdSpecSchema = withoutDescriptions(
  withComponents(json(IoTServiceV1alpha1SpecSchema), (component) => withProperties(component, { tolerations: coreV1Field, affinity: uncheckedField })),
) as unknown as TSchema;

/** The v1alpha1 status as the CRD serves it. */
export const IoTServiceV1alpha1CrdStatusSchema = withoutDescriptions(json(IoTServiceStatusSchema)) as unknown as TSchema;
