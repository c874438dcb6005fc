/**
 * The ArmadaChart controller: one Helm release per ArmadaChart, kept as declared.
 *
 * Guarantees:
 * - Watches: ArmadaCharts (spec and metadata changes; status writes do not re-trigger), Helm's
 *   release Secrets (`owner=helm`, payload dropped), the Helm-managed resources of the kinds in
 *   `DRIFT_KINDS` (any change but status), the charts a chart depends on, and the groups and
 *   manifests that give a chart its release prefix.
 * - `target_state: deployed` installs the release; afterwards `helm upgrade` runs only when the
 *   digest of the inputs (source identity, values, release name/namespace, release labels) differs
 *   from the one recorded on the newest revision (release label `armada.airshipit.org/inputs`),
 *   or to repair drift. `upgrade.pre.delete` runs before every upgrade; after every install or
 *   upgrade, `wait.resources` / `wait.labels` are checked (readiness.ts) and `helm test` runs
 *   when `test.enabled`; either failing reports `failed` until the inputs change.
 * - Failures as in Flux: a deterministic one (invalid spec, a source only a spec change can fix,
 *   a foreign release, values or templates Helm rejects, a failed upgrade, test or readiness
 *   check) sets `Stalled` and is not retried until the spec changes; a transient one (network,
 *   API server, timeouts) keeps `Reconciling` and is retried with a growing delay (10 s → 5 min).
 * - Remediation: a failed install is uninstalled (only when this chart owns it) and, when
 *   transient, retried, `install_failures` counting; a failed upgrade is rolled back to the newest good
 *   revision, reported `failed` with Helm's message and not retried until the inputs change
 *   (`failed_inputs`), `upgrade_failures` counting. A release left `pending-*` by an interrupted
 *   operator is recovered (rolled back, or uninstalled and installed again): never a second
 *   release.
 * - Drift: a resource of the release that was deleted or edited is restored by `helm upgrade`
 *   with the same inputs (Helm recreates and patches it; nothing is rendered here), reported by
 *   the `Drifted` condition and an Event. The same drift persisting right after a repair is
 *   reported, not repaired in a loop.
 * - Ownership (release-owner.ts): only a release whose newest revision records this chart is
 *   changed; one without an owner record only with `adopt` (Event `Adopting`); one of another
 *   chart never. A renamed `release` / `namespace` uninstalls the chart's previous release
 *   before installing the new one (kept when `protected`).
 * - Deleting an ArmadaChart uninstalls its release (finalizer `armada.airshipit.org/uninstall`)
 *   unless `protected`; the release is kept then and the finalizer removed.
 * - A Helm operation is decided only on the API server's current ArmadaChart (checked with one
 *   GET before it; a stale cache makes the reconcile retry), and status writes are conditional
 *   on the resourceVersion they were computed from.
 * - Bad input (invalid spec, unknown source type, missing directory, not a chart, unknown git
 *   reference, a release namespace the operator does not watch) → `error` with a reason naming
 *   the problem; a Helm failure → `failed` with Helm's message. Nothing else is touched and the
 *   operator keeps running.
 * - Structure: this file decides (admission checks, source, plan) and hands each plan to its
 *   action in actions/ (install, upgrade, test, uninstall, drift) around the shared context of
 *   actions/run.ts, whose `report` is the one place a chart's status is written.
 * - Status: actual_state, satisfied, reason, observedGeneration,
 *   revision, version, install/upgrade failure counts and the conditions Ready, Reconciling,
 *   Stalled (kstatus, status.ts), Released, TestSuccess, Drifted; every transition is an Event.
 */

import {
  addFinalizer,
  controller,
  hasFinalizer,
  Kinds,
  requeueAfter,
  type Controller,
  type KubeObject,
  type Manager,
  type MapFunc,
  type Predicate,
  type ReconcileContext,
  type ReconcileResult,
  type Request,
} from '@iot-operator/runtime';
import {
  ArmadaChart,
  ArmadaChartGroup,
  ArmadaManifest,
  ChartSpecSchema,
  isValidChartSpec,
  releaseNamespace,
  specError,
  type ArmadaChartGroupObject,
  type ArmadaChartObject,
  type ArmadaManifestObject,
} from '../api/armada.ts';
import { HelmError, type Helm, type ReleaseInputs } from '../helm/helm.ts';
import { isDeployed } from '../status.ts';
import { reinstall, install } from './actions/install.ts';
import { keep } from './actions/drift.ts';
import { ChartRun, DEFAULT_WAIT_SECONDS, newChartMemory } from './actions/run.ts';
import { CHART_FINALIZER, finalize, retirePrevious } from './actions/uninstall.ts';
import { recover, upgrade } from './actions/upgrade.ts';
import { authorityOf, type AuthorityOptions } from './authority.ts';
import { DRIFT_KINDS, releaseOf } from './drift.ts';
import { INPUTS_LABEL, inputsDigest, planRelease, type ReleasePlan } from './plan.ts';
import { CHART_NAME_LABEL, CHART_NAMESPACE_LABEL, ownerLabels, releaseOwner } from './release-owner.ts';
import { SourceError, type ResolvedSource, type SourceResolver } from './source.ts';

export { CHART_FINALIZER } from './actions/uninstall.ts';
export { CHART_NAME_LABEL, CHART_NAMESPACE_LABEL } from './release-owner.ts';
/** Release label recording the manifest's `release_prefix`. */
export const RELEASE_PREFIX_LABEL = 'armada.airshipit.org/release-prefix';

export interface ChartControllerOptions extends AuthorityOptions {
  helm: Helm;
  sources: SourceResolver;
  /** The namespace the operator watches ("" or undefined = all): releases elsewhere are invisible to it. */
  watchNamespace?: string;
  maxConcurrentReconciles?: number;
}


const DEFAULT_SOURCE_INTERVAL_SECONDS = 600;
const sourceIntervalMs = (chart: ArmadaChartObject) => (chart.spec.source.interval ?? DEFAULT_SOURCE_INTERVAL_SECONDS) * 1000;

/** Object updates that matter to a reconcile: anything but status and server bookkeeping. */
export const specOrMetadataChanged: Predicate = {
  update: (oldObj, newObj) => comparableObject(oldObj) !== comparableObject(newObj),
};

function comparableObject(obj: KubeObject): string {
  const { status: _status, metadata, ...rest } = obj;
  const { resourceVersion: _rv, managedFields: _mf, ...meta } = metadata;
  return JSON.stringify({ ...rest, metadata: meta });
}

export class ChartReconciler {
  private readonly memory = newChartMemory();

  constructor(private readonly options: ChartControllerOptions) {}

  reconcile = async (req: Request, ctx: ReconcileContext): Promise<ReconcileResult> => {
    const cached = ctx.cache.get<ArmadaChartObject>(ArmadaChart, req.name, req.namespace);
    if (!cached) return;
    // A working copy: status writes within this reconcile update it, never the cache's object.
    const run = new ChartRun(ctx, structuredClone(cached), this.options.helm, this.options, this.memory);
    const chart = run.chart;
    if (chart.metadata.deletionTimestamp) return finalize(run);
    if (!hasFinalizer(chart, CHART_FINALIZER)) {
      await addFinalizer(ctx.client, ArmadaChart, chart, CHART_FINALIZER);
      return; // the update event brings the chart back with the finalizer
    }
    if (!isValidChartSpec(chart.spec)) {
      return run.report('error', `the spec is invalid: ${specError(ChartSpecSchema, chart.spec)}`, {}, [], 'InvalidSpec');
    }
    const authority = authorityOf(chart, this.options);
    if (authority.kind === 'none') return run.report('error', authority.reason, {}, [], 'ServiceAccountRequired');
    const namespace = releaseNamespace(chart);
    const watched = this.options.watchNamespace;
    if (watched && namespace !== watched) {
      return run.report('error', `the release namespace ${namespace} is not watched by the operator (it watches ${watched}): set spec.namespace to ${watched} or run the operator for all namespaces`, {}, [], 'NamespaceNotWatched');
    }
    const history = run.history(namespace, chart.spec.release);
    const owner = releaseOwner(history.at(-1)?.labels, chart);
    if (owner.kind === 'other-chart') {
      return run.report('error', `release ${chart.spec.release} in namespace ${namespace} belongs to ArmadaChart ${owner.chart}: left untouched; choose another release name`, {}, [
        { type: 'Released', status: 'False', reason: 'ForeignRelease', message: `release ${chart.spec.release} belongs to ArmadaChart ${owner.chart}` },
      ], 'ForeignRelease');
    }
    if (owner.kind === 'unrecorded') {
      if (!chart.spec.adopt) {
        return run.report('error', `release ${chart.spec.release} in namespace ${namespace} was not installed by this ArmadaChart (it has no owner record: installed by hand or by another tool): left untouched, and kept when this ArmadaChart is deleted; set spec.adopt: true to take it over`, {}, [
          { type: 'Released', status: 'False', reason: 'ForeignRelease', message: `release ${chart.spec.release} has no owner record; spec.adopt is not set` },
        ], 'ForeignRelease');
      }
      run.event('Normal', 'Adopting', `release ${chart.spec.release} in namespace ${namespace} has no owner record; adopting it (spec.adopt: true): its next revision is this ArmadaChart's`);
    }

    if (chart.spec.target_state === 'uninitialized') {
      return history.length === 0
        ? run.report('uninitialized', undefined)
        : run.report('deployed', `release ${chart.spec.release} is installed but target_state is uninitialized: delete the ArmadaChart to uninstall it`, { revision: history.at(-1)!.revision });
    }

    try {
      await retirePrevious(run, namespace);
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      return run.retryLater('failed', `helm uninstall of the chart's previous release${run.asWho} failed: ${err.helmMessage}`);
    }

    const waitingFor = (chart.spec.dependencies ?? []).filter((name) => !isDeployed(ctx.cache.get<ArmadaChartObject>(ArmadaChart, name, chart.metadata.namespace)));
    if (waitingFor.length > 0) {
      return run.report('pending', `waiting for ArmadaChart ${waitingFor.join(', ')} (dependencies) to be deployed`);
    }

    const retry = this.memory.retries.get(run.uid);
    if (retry && retry.generation === chart.metadata.generation && Date.now() < retry.due) return requeueAfter(retry.due - Date.now());

    let source: ResolvedSource;
    try {
      source = await this.resolve(chart);
    } catch (err) {
      if (!(err instanceof SourceError)) throw err;
      if (!err.transient) return run.report('error', err.message, {}, [], 'SourceInvalid');
      return run.retryLater('error', err.message);
    }

    const labels: Record<string, string> = ownerLabels(chart);
    const prefix = run.releasePrefix;
    if (prefix) labels[RELEASE_PREFIX_LABEL] = prefix;
    const values = (chart.spec.values ?? {}) as Record<string, unknown>;
    const digest = inputsDigest({ source: source.identity, values, release: chart.spec.release, namespace, labels });
    const inputs: ReleaseInputs = {
      release: chart.spec.release,
      namespace,
      chart: source.chart,
      values,
      labels: { ...labels, [INPUTS_LABEL]: digest },
      wait: chart.spec.wait?.native?.enabled ?? true,
      timeoutSeconds: chart.spec.wait?.timeout ?? DEFAULT_WAIT_SECONDS,
    };

    const plan = planRelease(history, digest, chart.status?.failed_inputs, !!chart.spec.protected);
    try {
      const result = await this.carryOut(run, plan, inputs, digest);
      // A tar URL or a git branch may change without the spec: look again after the interval.
      return result ?? (chart.spec.source.type === 'local' ? undefined : requeueAfter(sourceIntervalMs(chart)));
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      // A Helm failure outside the remediated paths (a rollback or uninstall that fails, say).
      return run.retryLater('failed', `${err.command}${run.asWho} failed: ${err.helmMessage}`);
    }
  };

  /** Hands the plan to its action (actions/): the one decision of what Helm does this time. */
  private async carryOut(run: ChartRun, plan: ReleasePlan, inputs: ReleaseInputs, digest: string): Promise<ReconcileResult> {
    const chart = run.chart;
    if (plan.action === 'install' && chart.status?.failed_inputs === digest) {
      // These inputs failed to install for a reason only a spec change can fix: stalled, not retried.
      return run.report('failed', chart.status.reason ?? 'helm install failed', {}, [], run.stalledReason() ?? 'InstallFailed');
    }
    if (plan.action !== 'none' && plan.action !== 'blocked') await run.requireFresh();
    switch (plan.action) {
      case 'install':
        return install(run, inputs);
      case 'replace':
        return reinstall(run, inputs, plan.why);
      case 'rollback':
        return recover(run, inputs, plan.revision, plan.to);
      case 'upgrade':
        return upgrade(run, inputs, digest, plan.revision, []);
      case 'blocked': {
        const reason = chart.status?.failed_inputs === digest && chart.status.reason ? chart.status.reason : plan.why;
        return run.report('failed', reason, { revision: plan.revision.revision }, [], 'UpgradeFailed');
      }
      case 'none':
        return keep(run, inputs, digest, plan.revision);
    }
  }

  /**
   * The chart's source, resolved again on a spec change and, for tar and git, every
   * `source.interval`; a source error only the spec can fix is not fetched again before it changes.
   */
  private async resolve(chart: ArmadaChartObject): Promise<ResolvedSource> {
    const uid = chart.metadata.uid!;
    const generation = chart.metadata.generation ?? 0;
    const bad = this.memory.badSources.get(uid);
    if (bad?.generation === generation) throw bad.error;
    const known = this.memory.resolved.get(uid);
    const fresh = (at: number) => chart.spec.source.type === 'local' || Date.now() - at < sourceIntervalMs(chart);
    if (known && known.generation === generation && fresh(known.at)) return known.source;
    try {
      const source = await this.options.sources.resolve(chart.spec.source);
      this.memory.resolved.set(uid, { generation, source, at: Date.now() });
      this.memory.badSources.delete(uid);
      return source;
    } catch (err) {
      if (err instanceof SourceError && !err.transient) this.memory.badSources.set(uid, { generation, error: err });
      throw err;
    }
  }

}


/** Registers the ArmadaChart controller with the manager. */
export function registerChartController(mgr: Manager, options: ChartControllerOptions): Controller {
  const reconciler = new ChartReconciler(options);
  const charts = () => mgr.cache.list<ArmadaChartObject>(ArmadaChart);
  const key = (chart: ArmadaChartObject): Request => ({ namespace: chart.metadata.namespace, name: chart.metadata.name! });
  const chartsOfRelease = (release: string, namespace: string): Request[] =>
    charts().filter((c) => c.spec?.release === release && releaseNamespace(c) === namespace).map(key);

  const secretToCharts: MapFunc = (secret) => {
    const labels = secret.metadata.labels ?? {};
    if (labels[CHART_NAME_LABEL] && labels[CHART_NAMESPACE_LABEL]) return [{ namespace: labels[CHART_NAMESPACE_LABEL], name: labels[CHART_NAME_LABEL] }];
    return labels['name'] ? chartsOfRelease(labels['name'], secret.metadata.namespace ?? '') : [];
  };
  const resourceToCharts: MapFunc = (obj) => {
    const release = releaseOf(obj);
    return release ? chartsOfRelease(release.release, release.namespace) : [];
  };
  const dependents: MapFunc = (dependency) =>
    charts().filter((c) => c.metadata.namespace === dependency.metadata.namespace && c.spec?.dependencies?.includes(dependency.metadata.name!)).map(key);
  const groupToCharts: MapFunc = (group) =>
    ((group as ArmadaChartGroupObject).spec?.chart_group ?? []).map((name) => ({ namespace: group.metadata.namespace, name }));
  const manifestToCharts: MapFunc = (manifest) =>
    ((manifest as ArmadaManifestObject).spec?.chart_groups ?? []).flatMap((name) => {
      const group = mgr.cache.get<ArmadaChartGroupObject>(ArmadaChartGroup, name, manifest.metadata.namespace);
      return group ? groupToCharts(group) : [];
    });
  const statusChanged: Predicate = { update: (o, n) => JSON.stringify(o['status']) !== JSON.stringify(n['status']) };

  let builder = controller(mgr)
    .named('armadachart')
    .for(ArmadaChart, specOrMetadataChanged)
    .watches(ArmadaChart, dependents, statusChanged)
    .watches(Kinds.Secret, secretToCharts)
    .watches(ArmadaChartGroup, groupToCharts, specOrMetadataChanged)
    .watches(ArmadaManifest, manifestToCharts, specOrMetadataChanged);
  for (const type of Object.values(DRIFT_KINDS)) builder = builder.watches(type, resourceToCharts, specOrMetadataChanged);
  return builder.maxConcurrentReconciles(options.maxConcurrentReconciles ?? 4).reconcile(reconciler.reconcile);
}
