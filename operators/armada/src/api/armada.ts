/**
 * The Armada API (armada.airshipit.org/v1alpha1): ArmadaChart, ArmadaChartGroup and
 * ArmadaManifest, defined once.
 *
 * Guarantees: the TypeBox schemas below are the single source of the TypeScript types, of the
 * operator-side checks (`isValidChartSpec`, ...) and of the CRDs' OpenAPI schemas (crd.ts).
 * Field names keep Armada's snake_case, so the seed's YAML works unchanged. `values` is
 * free-form (`x-kubernetes-preserve-unknown-fields`): any key a chart reads reaches Helm, none
 * is silently dropped. `source.type` is a plain string on purpose: an unknown type is accepted
 * by the API server and reported by the operator (`actual_state: error` and a reason) instead of
 * being refused without a trace on the object.
 */

import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { customResource, type Condition, type KubeObject, type ObjectMeta } from '@iot-operator/runtime';

export const API_GROUP = 'armada.airshipit.org';
export const API_VERSION = 'v1alpha1';
export const ARMADA_API_VERSION = `${API_GROUP}/${API_VERSION}` as const;

export const CHART_KIND = 'ArmadaChart' as const;
export const GROUP_KIND = 'ArmadaChartGroup' as const;
export const MANIFEST_KIND = 'ArmadaManifest' as const;

/** The runtime's resource types of the three kinds. */
export const ArmadaChart = customResource(API_GROUP, API_VERSION, CHART_KIND, 'armadacharts');
export const ArmadaChartGroup = customResource(API_GROUP, API_VERSION, GROUP_KIND, 'armadachartgroups');
export const ArmadaManifest = customResource(API_GROUP, API_VERSION, MANIFEST_KIND, 'armadamanifests');

export const SOURCE_TYPES = ['local', 'tar', 'git'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];

const TargetStateSchema = Type.Union([Type.Literal('deployed'), Type.Literal('uninitialized')], {
  description: 'deployed: install the release and keep it installed; uninitialized: not enabled yet, nothing is installed.',
});
export type TargetState = Static<typeof TargetStateSchema>;

const LabelsSchema = Type.Record(Type.String(), Type.String());

export const ChartSourceSchema = Type.Object(
  {
    type: Type.String({ description: 'local (a directory on the operator\'s filesystem), tar (an http(s) URL of a chart archive, .tgz) or git (a repository URL).' }),
    location: Type.String({ minLength: 1, description: 'The directory, the archive URL or the git repository URL.' }),
    subpath: Type.Optional(Type.String({ description: 'The chart\'s folder inside the directory, archive or repository (default: its root; for an archive also its single top folder). A `helm package` archive holds its chart under the chart\'s name.' })),
    reference: Type.Optional(Type.String({ description: 'git only: the branch, tag or commit to check out (default: the remote\'s default branch).' })),
    interval: Type.Optional(
      Type.Integer({ minimum: 10, default: 600, description: 'tar and git: seconds between checks for new content at the URL or a moved branch (default 600); a change upgrades the release.' }),
    ),
  },
  { description: 'Where the chart comes from.' },
);

export const ChartSpecSchema = Type.Object(
  {
    chart_name: Type.String({ minLength: 1, description: 'The chart\'s name.' }),
    release: Type.String({ minLength: 1, maxLength: 53, description: 'The Helm release name.' }),
    namespace: Type.Optional(Type.String({ description: 'The release namespace (default: the ArmadaChart\'s own).' })),
    source: ChartSourceSchema,
    values: Type.Optional(Type.Object({}, { 'x-kubernetes-preserve-unknown-fields': true, description: 'Values passed to Helm, free-form.' })),
    target_state: TargetStateSchema,
    dependencies: Type.Optional(Type.Array(Type.String(), { description: 'ArmadaCharts (same namespace) that must be deployed first.' })),
    wait: Type.Optional(
      Type.Object(
        {
          timeout: Type.Optional(Type.Integer({ minimum: 1, description: 'Seconds Helm waits for the release\'s resources (default 900).' })),
          labels: Type.Optional(LabelsSchema),
          resources: Type.Optional(
            Type.Array(
              Type.Object({
                type: Type.String({ description: 'deployment, statefulset, daemonset or pod.' }),
                labels: Type.Optional(LabelsSchema),
                min_ready: Type.Optional(Type.Integer({ minimum: 0 })),
              }),
            ),
          ),
          native: Type.Optional(Type.Object({ enabled: Type.Optional(Type.Boolean({ description: 'Pass --wait to Helm (default true).' })) })),
        },
        { description: 'When the release counts as ready.' },
      ),
    ),
    test: Type.Optional(
      Type.Object(
        {
          enabled: Type.Optional(Type.Boolean({ description: 'Run `helm test` after each install or upgrade.' })),
          timeout: Type.Optional(Type.Integer({ minimum: 1, description: 'Seconds (default 300).' })),
          options: Type.Optional(Type.Object({ cleanup: Type.Optional(Type.Boolean({ description: 'Delete the test pods after the test.' })) })),
        },
        { description: '`helm test` after install or upgrade.' },
      ),
    ),
    upgrade: Type.Optional(
      Type.Object(
        {
          no_hooks: Type.Optional(Type.Boolean()),
          options: Type.Optional(Type.Object({ force: Type.Optional(Type.Boolean()), recreate_pods: Type.Optional(Type.Boolean()) })),
          pre: Type.Optional(
            Type.Object({
              delete: Type.Optional(
                Type.Array(
                  Type.Object({
                    type: Type.String({ description: 'job, pod, deployment, statefulset, daemonset, service, configmap, ...' }),
                    labels: Type.Optional(LabelsSchema),
                  }),
                  { description: 'Resources of the release namespace deleted before an upgrade.' },
                ),
              ),
            }),
          ),
        },
        { description: 'How upgrades are done.' },
      ),
    ),
    delete: Type.Optional(Type.Object({ timeout: Type.Optional(Type.Integer({ minimum: 1, description: 'Uninstall timeout in seconds (default 300).' })) })),
    protected: Type.Optional(
      Type.Object(
        { continue_processing: Type.Optional(Type.Boolean()) },
        { description: 'A protected release is never uninstalled or replaced by the operator.' },
      ),
    ),
    drift: Type.Optional(
      Type.Object(
        {
          mode: Type.Optional(
            Type.Union([Type.Literal('repair'), Type.Literal('warn'), Type.Literal('off')], {
              default: 'repair',
              description: 'repair (default): a drifted resource is restored by helm upgrade; warn: reported (Drifted condition, Event), not repaired; off: not checked.',
            }),
          ),
          ignore: Type.Optional(
            Type.Array(
              Type.Object({
                paths: Type.Array(Type.String({ pattern: '^/' }), { description: 'JSON pointers (e.g. /spec/replicas) of fields that are never drift, with everything under them.' }),
                target: Type.Optional(Type.Object({ kind: Type.Optional(Type.String()), name: Type.Optional(Type.String()) }, { description: 'The objects the rule applies to (default: every object of the release).' })),
              }),
            ),
          ),
        },
        { description: 'Drift detection of the release\'s resources (as Flux\'s driftDetection).' },
      ),
    ),
    serviceAccountName: Type.Optional(
      Type.String({
        minLength: 1,
        description: 'The ServiceAccount of this ArmadaChart\'s namespace whose authority Helm acts with (impersonated): the release can contain only what it may create. Default: the operator\'s default account, else the operator itself (unless the operator requires an account). Named as in Flux.',
      }),
    ),
    adopt: Type.Optional(
      Type.Boolean({
        default: false,
        description: 'Take over a release of this name that exists without an owner record (installed by hand or by another tool). Off: such a release is left untouched, and kept when the ArmadaChart is deleted.',
      }),
    ),
  },
  { description: 'ArmadaChartSpec: one Helm release.' },
);

export const GroupSpecSchema = Type.Object(
  {
    chart_group: Type.Array(Type.String(), { description: 'The ArmadaCharts of the group (same namespace).' }),
    sequenced: Type.Optional(Type.Boolean({ description: 'Enable the charts one at a time, each after the previous one is deployed.' })),
    description: Type.Optional(Type.String()),
    target_state: Type.Optional({ ...TargetStateSchema, default: 'deployed' }),
  },
  { description: 'ArmadaChartGroupSpec: an ordered or parallel set of ArmadaCharts.' },
);

export const ManifestSpecSchema = Type.Object(
  {
    chart_groups: Type.Array(Type.String(), { description: 'The ArmadaChartGroups, processed in order.' }),
    release_prefix: Type.String({ minLength: 1, maxLength: 63, description: 'Recorded as a label on every release of the manifest.' }),
    target_state: Type.Optional({ ...TargetStateSchema, default: 'deployed' }),
  },
  { description: 'ArmadaManifestSpec: an ordered set of ArmadaChartGroups.' },
);

export const ACTUAL_STATES = ['uninitialized', 'initialized', 'pending', 'running', 'deployed', 'uninstalled', 'failed', 'error'] as const;
export type ActualState = (typeof ACTUAL_STATES)[number];

const ConditionSchema = Type.Object({
  type: Type.String(),
  status: Type.Union([Type.Literal('True'), Type.Literal('False'), Type.Literal('Unknown')]),
  reason: Type.String(),
  message: Type.String(),
  lastTransitionTime: Type.String({ format: 'date-time' }),
  observedGeneration: Type.Optional(Type.Integer()),
});

const commonStatus = {
  actual_state: Type.Optional(Type.Union(ACTUAL_STATES.map((s) => Type.Literal(s)), { description: 'What the operator observed.' })),
  satisfied: Type.Optional(Type.Boolean({ description: 'actual_state equals target_state.' })),
  reason: Type.Optional(Type.String({ description: 'Why the object is not satisfied, in one sentence a user can act on.' })),
  observedGeneration: Type.Optional(Type.Integer()),
  conditions: Type.Optional(Type.Array(ConditionSchema)),
  release_prefix: Type.Optional(Type.String({ description: "The release_prefix of the manifest above this object when its state was observed (absent when none): a parent counts a child deployed only under its own prefix." })),
};

export const ChartStatusSchema = Type.Object(
  {
    ...commonStatus,
    revision: Type.Optional(Type.Integer({ description: 'The Helm revision of the release.' })),
    version: Type.Optional(Type.String({ description: 'The chart version of the release.' })),
    install_failures: Type.Optional(Type.Integer({ description: 'Failed installs since the last success.' })),
    upgrade_failures: Type.Optional(Type.Integer({ description: 'Failed upgrades since the last success.' })),
    failed_inputs: Type.Optional(Type.String({ description: 'Digest of the inputs (source, values, labels) of the last failed upgrade; retried when they change.' })),
  },
  { description: 'ArmadaChartStatus.' },
);

export const GroupStatusSchema = Type.Object(commonStatus, { description: 'ArmadaChartGroupStatus.' });
export const ManifestStatusSchema = Type.Object(commonStatus, { description: 'ArmadaManifestStatus.' });

export type ChartSource = Static<typeof ChartSourceSchema>;
export type ChartSpec = Static<typeof ChartSpecSchema>;
export type GroupSpec = Static<typeof GroupSpecSchema>;
export type ManifestSpec = Static<typeof ManifestSpecSchema>;

export interface CommonStatus {
  actual_state?: ActualState;
  satisfied?: boolean;
  reason?: string;
  observedGeneration?: number;
  conditions?: Condition[];
  release_prefix?: string;
}

export interface ChartStatus extends CommonStatus {
  revision?: number;
  version?: string;
  install_failures?: number;
  upgrade_failures?: number;
  failed_inputs?: string;
}

export interface ArmadaChartObject extends KubeObject {
  metadata: ObjectMeta;
  spec: ChartSpec;
  status?: ChartStatus;
}

export interface ArmadaChartGroupObject extends KubeObject {
  metadata: ObjectMeta;
  spec: GroupSpec;
  status?: CommonStatus;
}

export interface ArmadaManifestObject extends KubeObject {
  metadata: ObjectMeta;
  spec: ManifestSpec;
  status?: CommonStatus;
}

/** True when `spec` satisfies the schema (the API server has already checked it; this guards old objects). */
export function isValidChartSpec(spec: unknown): spec is ChartSpec {
  return Value.Check(ChartSpecSchema, spec);
}

export function isValidGroupSpec(spec: unknown): spec is GroupSpec {
  return Value.Check(GroupSpecSchema, spec);
}

export function isValidManifestSpec(spec: unknown): spec is ManifestSpec {
  return Value.Check(ManifestSpecSchema, spec);
}

/** The first schema error of a spec, as "path: message", for a reason a user can act on. */
export function specError(schema: typeof ChartSpecSchema | typeof GroupSpecSchema | typeof ManifestSpecSchema, spec: unknown): string | undefined {
  const first = Value.Errors(schema, spec).First();
  return first ? `spec${first.path.replaceAll('/', '.')}: ${first.message}` : undefined;
}

/** The release namespace of a chart: `spec.namespace`, else the ArmadaChart's own. */
export function releaseNamespace(chart: ArmadaChartObject): string {
  return chart.spec.namespace || chart.metadata.namespace || 'default';
}
