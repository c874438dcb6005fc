/**
 * A CustomResourceDefinition assembled from TypeBox schemas, and its generated YAML.
 *
 * Guarantees: `customResourceDefinition(definition)` is deterministic and returns an
 * apiextensions.k8s.io/v1 CRD named `<plural>.<group>` whose names carry `listKind:
 * <kind>List`, and whose every version has the structural schema `toStructuralSchema` makes of
 * its spec (required) and status schemas under a top-level object with `apiVersion`, `kind` and
 * `metadata`; nothing preserves unknown fields, so the API server prunes them. Key order is fixed,
 * so the YAML of `generatedManifestYaml` is byte-for-byte stable and can be committed and compared
 * by a unit test.
 */

import type { TSchema } from '@sinclair/typebox';
import { stringify } from 'yaml';
import { toStructuralSchema, type StructuralSchema } from './structural-schema.ts';

/** An `additionalPrinterColumns` entry: what `kubectl get` shows. */
export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
}

export interface CustomResourceVersion {
  name: string;
  served: boolean;
  storage: boolean;
  /** Description of the whole object (the top-level schema node). */
  description: string;
  spec: TSchema;
  status?: TSchema;
  /** e.g. `{ status: {} }` for a status subresource. */
  subresources?: Record<string, unknown>;
  printerColumns?: PrinterColumn[];
}

export interface CustomResourceDefinitionOptions {
  group: string;
  scope: 'Namespaced' | 'Cluster';
  names: { kind: string; plural: string; singular: string; shortNames?: readonly string[] };
  /** Labels of the CRD object itself. */
  labels?: Record<string, string>;
  versions: CustomResourceVersion[];
}

export type CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames?: string[] };
    versions: Array<{
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: Record<string, unknown>;
      additionalPrinterColumns?: PrinterColumn[];
      schema: { openAPIV3Schema: StructuralSchema };
    }>;
  };
};

/** The CustomResourceDefinition object for `<plural>.<group>`. */
export function customResourceDefinition(options: CustomResourceDefinitionOptions): CustomResourceDefinition {
  const { group, scope, names, labels, versions } = options;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${names.plural}.${group}`, ...(labels ? { labels: { ...labels } } : {}) },
    spec: {
      group,
      scope,
      names: {
        kind: names.kind,
        listKind: `${names.kind}List`,
        plural: names.plural,
        singular: names.singular,
        ...(names.shortNames ? { shortNames: [...names.shortNames] } : {}),
      },
      versions: versions.map((version) => ({
        name: version.name,
        served: version.served,
        storage: version.storage,
        ...(version.subresources ? { subresources: version.subresources } : {}),
        ...(version.printerColumns ? { additionalPrinterColumns: version.printerColumns.map((column) => ({ ...column })) } : {}),
        schema: {
          openAPIV3Schema: {
            type: 'object',
            description: version.description,
            required: ['spec'],
            properties: {
              apiVersion: { type: 'string' },
              kind: { type: 'string' },
              metadata: { type: 'object' },
              spec: toStructuralSchema(version.spec),
              ...(version.status ? { status: toStructuralSchema(version.status) } : {}),
            },
          },
        },
      })),
    },
  };
}

/**
 * A generated manifest as committed: a header naming the source and the command that
 * regenerates it, then the object as YAML without line wrapping.
 */
export function generatedManifestYaml(object: unknown, generatedFrom: { source: string; command: string }): string {
  return `# Generated from ${generatedFrom.source}; do not edit.\n# Regenerate with: ${generatedFrom.command}\n${stringify(object, { lineWidth: 0 })}`;
}
