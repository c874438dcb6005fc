/**
 * Every controller of the Armada operator, and the client calls they and Helm make beyond what
 * their `for`, `owns` and `watches` imply. `operator-ts generate rbac` records what
 * `registerControllers` declares (called with the manager alone: the default Helm and sources,
 * which only reconciles use) and writes deploy/role.yml, its chart copy
 * chart/armada-operator/files/role.yml and deploy/role_binding.yml from it (operator-ts.json:
 * a ClusterRole, bound by a RoleBinding in the watched namespace or by a ClusterRoleBinding for
 * every namespace; no metrics Service rules, the chart makes that Service);
 * `npm run generate` runs it, and its check fails while the committed files differ.
 *
 * Helm runs with the operator's identity for charts that name no ServiceAccount (and with no
 * default account), so the operator needs the rights of whatever such charts contain; a chart
 * naming one has Helm impersonate it (`impersonate` on serviceaccounts below). Not declared, as
 * it is cluster-scoped and would make every binding cluster-wide: `create` on
 * subjectaccessreviews, which `upgrade.pre.delete` of such a chart needs (without it the entry is
 * refused, nothing deleted); an administrator grants it for a cluster-wide install. Declared here: the kinds of the project's test chart (Deployment, Service, the
 * `helm test` Pod) and the everyday workload kinds of charts (StatefulSet, DaemonSet, ConfigMap,
 * Secret, ServiceAccount, Job) — nothing cluster-scoped, no RBAC objects, no CRDs. A chart that
 * needs more fails with Helm's "forbidden" message in the ArmadaChart's status; declare the kind
 * it names below and regenerate.
 */
import os from 'node:os';
import path from 'node:path';
import { Kinds, type ExtraPermission, type Manager } from '@iot-operator/runtime';
import { ArmadaChart, ArmadaChartGroup } from './api/armada.ts';
import { registerChartController, type ChartControllerOptions } from './chart/controller.ts';
import { DRIFT_KINDS } from './chart/drift.ts';
import { WAIT_TYPES } from './chart/readiness.ts';
import { SourceResolver } from './chart/source.ts';
import { registerGroupController } from './group/controller.ts';
import { Helm } from './helm/helm.ts';
import { registerManifestController } from './manifest/controller.ts';

const WRITE = ['create', 'update', 'patch', 'delete'];

export const extraPermissions: ExtraPermission[] = [
  { type: ArmadaChart, verbs: ['patch'], reason: 'the uninstall finalizer, and the controller ownerReference and target_state its ArmadaChartGroup sets' },
  { type: ArmadaChartGroup, verbs: ['patch'], reason: 'the controller ownerReference and target_state its ArmadaManifest sets' },
  { type: Kinds.Secret, verbs: WRITE, reason: "Helm's release storage, one Secret per revision (Helm runs as the operator); charts and upgrade.pre.delete may hold Secrets too" },
  // The chart contents the operator watches for drift (read rights from `watches`).
  ...Object.values(DRIFT_KINDS).map((type) => ({ type, verbs: WRITE, reason: 'chart contents: Helm installs, upgrades, rolls back and uninstalls them; upgrade.pre.delete deletes them' })),
  { type: WAIT_TYPES['job']!, verbs: ['get', 'list', 'watch', ...WRITE], reason: 'chart contents and hooks, written by Helm; wait.resources reads and upgrade.pre.delete deletes them' },
  { type: Kinds.Pod, verbs: ['get', 'list', 'watch', 'create', 'delete'], reason: '`helm test` creates its test Pods and waits for them, `helm --wait` and wait.resources read Pods; upgrade.pre.delete and test clean-up delete them' },
  { type: Kinds.ReplicaSet, verbs: ['get', 'list', 'watch'], reason: "`helm --wait` finds a Deployment's current ReplicaSet" },
  { type: Kinds.ServiceAccount, verbs: ['impersonate'], reason: 'Helm acts as the ServiceAccount an ArmadaChart names (spec.serviceAccountName), with that account\'s rights only' },
];

/** Helm on PATH and git checkouts under the system's temporary directory, unless the operator passes its own (operator.ts). */
function defaultChartOptions(): ChartControllerOptions {
  return { helm: new Helm({ binary: 'helm' }), sources: new SourceResolver({ workDir: path.join(os.tmpdir(), 'armada-sources') }) };
}

export function registerControllers(mgr: Manager, chart: ChartControllerOptions = defaultChartOptions()): void {
  registerChartController(mgr, chart);
  registerGroupController(mgr);
  registerManifestController(mgr);
}
