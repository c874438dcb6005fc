/**
 * The three Armada CustomResourceDefinitions, derived from the TypeBox schemas in armada.ts.
 *
 * Guarantees: `armadaCrds()` is deterministic and returns the apiextensions.k8s.io/v1 CRDs of
 * ArmadaChart (`act`), ArmadaChartGroup (`acg`) and ArmadaManifest (`amf`): namespaced,
 * v1alpha1 served and stored, a status subresource, the printer columns State / Target State /
 * Satisfied / Age, structural schemas in which only `spec.values` preserves unknown fields.
 * `crdYaml(crd)` is the exact content of the committed file `CRD_FILES[kind]` (a unit test
 * compares them).
 */

import { generatedManifestYaml, singleVersionCustomResourceDefinition, type CustomResourceDefinition, type PrinterColumn } from '@iot-operator/runtime';
import type { TSchema } from '@sinclair/typebox';
import {
  API_GROUP,
  API_VERSION,
  CHART_KIND,
  ChartSpecSchema,
  ChartStatusSchema,
  GROUP_KIND,
  GroupSpecSchema,
  GroupStatusSchema,
  MANIFEST_KIND,
  ManifestSpecSchema,
  ManifestStatusSchema,
} from './armada.ts';

const printerColumns: PrinterColumn[] = [
  { name: 'State', type: 'string', jsonPath: '.status.actual_state', description: 'What the operator observed' },
  { name: 'Target State', type: 'string', jsonPath: '.spec.target_state', description: 'What the object asks for' },
  { name: 'Satisfied', type: 'boolean', jsonPath: '.status.satisfied', description: 'State equals Target State' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

interface KindDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortName: string;
  description: string;
  spec: TSchema;
  status: TSchema;
}

const kinds: KindDefinition[] = [
  { kind: CHART_KIND, plural: 'armadacharts', singular: 'armadachart', shortName: 'act', description: 'ArmadaChart is one Helm release, installed and kept by the Armada operator.', spec: ChartSpecSchema, status: ChartStatusSchema },
  { kind: GROUP_KIND, plural: 'armadachartgroups', singular: 'armadachartgroup', shortName: 'acg', description: 'ArmadaChartGroup is an ordered or parallel set of ArmadaCharts.', spec: GroupSpecSchema, status: GroupStatusSchema },
  { kind: MANIFEST_KIND, plural: 'armadamanifests', singular: 'armadamanifest', shortName: 'amf', description: 'ArmadaManifest is an ordered set of ArmadaChartGroups.', spec: ManifestSpecSchema, status: ManifestStatusSchema },
];

/** The committed file of each kind's CRD, relative to operators/armada. */
export const CRD_FILES: Record<string, string> = {
  [CHART_KIND]: 'deploy/crds/armada_v1alpha1_armadachart_crd.yml',
  [GROUP_KIND]: 'deploy/crds/armada_v1alpha1_armadachartgroup_crd.yml',
  [MANIFEST_KIND]: 'deploy/crds/armada_v1alpha1_armadamanifest_crd.yml',
};

export function armadaCrds(): CustomResourceDefinition[] {
  return kinds.map((k) =>
    singleVersionCustomResourceDefinition({
      group: API_GROUP,
      scope: 'Namespaced',
      names: { kind: k.kind, plural: k.plural, singular: k.singular, shortNames: [k.shortName] },
      labels: { 'app.kubernetes.io/part-of': 'armada-operator' },
      version: { name: API_VERSION, printerColumns, description: k.description, spec: k.spec, status: k.status },
    }),
  );
}

export function crdYaml(crd: CustomResourceDefinition): string {
  return generatedManifestYaml(crd, { source: 'operators/armada/src/api/armada.ts', command: 'npm run generate (armada:generate)' });
}
