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
 * - Status, written only by `report`: actual_state, satisfied, reason, observedGeneration,
 *   revision, version, install/upgrade failure counts and the conditions Ready, Reconciling,
 *   Stalled (kstatus, status.ts), Released, TestSuccess, Drifted; every transition is an Event.
 */

import {
  addFinalizer,
  controller,
  hasFinalizer,
  isNotFound,
  Kinds,
  removeFinalizer,
  requeueAfter,
  type ConditionUpdate,
  type Controller,
  type KubeObject,
  type Manager,
  type MapFunc,
  type Predicate,
  type ReconcileContext,
  type ReconcileResult,
  type Request,
  type ResourceType,
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
  type ChartStatus,
} from '../api/armada.ts';
import { HelmError, Helm, type HelmRelease, type ReleaseInputs } from '../helm/helm.ts';
import { releaseHistory, type ReleaseRevision } from '../helm/release-state.ts';
import { isDeployed, nextStatus, writeStatus } from '../status.ts';
import { describeDrift, DRIFT_KINDS, findDrift, manifestObjects, releaseOf } from './drift.ts';
import { INPUTS_LABEL, inputsDigest, planRelease, type ReleasePlan } from './plan.ts';
import { authorityOf, describeAuthority, type AuthorityOptions } from './authority.ts';
import { helmFailureStalls, retryDelayMs, stalledReason } from './failure.ts';
import { WAIT_TYPES, waitForResources } from './readiness.ts';
import { CHART_NAME_LABEL, CHART_NAMESPACE_LABEL, ownerLabels, previousReleases, releaseOwner } from './release-owner.ts';
import { SourceError, type ResolvedSource, type SourceResolver } from './source.ts';

export const CHART_FINALIZER = 'armada.airshipit.org/uninstall';
export { CHART_NAME_LABEL, CHART_NAMESPACE_LABEL } from './release-owner.ts';
/** Release label recording the manifest's `release_prefix`. */
export const RELEASE_PREFIX_LABEL = 'armada.airshipit.org/release-prefix';

/** `upgrade.pre.delete[].type` → resource type. */
const PRE_DELETE_TYPES: Record<string, ResourceType> = {
  job: WAIT_TYPES['job']!,
  pod: Kinds.Pod,
  deployment: Kinds.Deployment,
  statefulset: Kinds.StatefulSet,
  daemonset: Kinds.DaemonSet,
  service: Kinds.Service,
  configmap: Kinds.ConfigMap,
  secret: Kinds.Secret,
};

const DEFAULT_WAIT_SECONDS = 900;
const DEFAULT_TEST_SECONDS = 300;
const DEFAULT_DELETE_SECONDS = 300;
/** A drift seen again within this time after its repair is reported instead of repaired again. */
const REPAIR_QUIET_MS = 60_000;

export interface ChartControllerOptions extends AuthorityOptions {
  helm: Helm;
  sources: SourceResolver;
  /** The namespace the operator watches ("" or undefined = all): releases elsewhere are invisible to it. */
  watchNamespace?: string;
  maxConcurrentReconciles?: number;
}

type Conditions = ConditionUpdate[];

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
  /** Parsed `helm get manifest` per release revision. */
  private readonly manifests = new Map<string, KubeObject[]>();
  /** The last drift repaired per chart (uid), to tell a persisting drift from a new one. */
  private readonly repairs = new Map<string, { description: string; at: number }>();
  /** The resolved source per chart (uid) and generation, and when: fetched again after `source.interval`. */
  private readonly resolved = new Map<string, { generation: number; source: ResolvedSource; at: number }>();
  /** A source error that only a spec change can fix, per chart (uid) and generation: not fetched again meanwhile. */
  private readonly badSources = new Map<string, { generation: number; error: SourceError }>();
  /**
   * Transient failures in a row per chart (uid), and when the next attempt is due: events (a
   * release Secret written by the failed attempt, say) do not bring the attempt forward.
   */
  private readonly retries = new Map<string, { generation: number; failures: number; due: number }>();

  constructor(private readonly options: ChartControllerOptions) {}

  reconcile = async (req: Request, ctx: ReconcileContext): Promise<ReconcileResult> => {
    const cached = ctx.cache.get<ArmadaChartObject>(ArmadaChart, req.name, req.namespace);
    if (!cached) return;
    // A working copy: status writes within this reconcile update it, never the cache's object.
    const chart = structuredClone(cached);
    if (chart.metadata.deletionTimestamp) return this.finalize(chart, ctx);
    if (!hasFinalizer(chart, CHART_FINALIZER)) {
      await addFinalizer(ctx.client, ArmadaChart, chart, CHART_FINALIZER);
      return; // the update event brings the chart back with the finalizer
    }
    if (!isValidChartSpec(chart.spec)) {
      return this.report(ctx, chart, 'error', `the spec is invalid: ${specError(ChartSpecSchema, chart.spec)}`, {}, [], 'InvalidSpec');
    }
    const authority = authorityOf(chart, this.options);
    if (authority.kind === 'none') return this.report(ctx, chart, 'error', authority.reason, {}, [], 'ServiceAccountRequired');
    const namespace = releaseNamespace(chart);
    const watched = this.options.watchNamespace;
    if (watched && namespace !== watched) {
      return this.report(ctx, chart, 'error', `the release namespace ${namespace} is not watched by the operator (it watches ${watched}): set spec.namespace to ${watched} or run the operator for all namespaces`, {}, [], 'NamespaceNotWatched');
    }
    const history = this.history(ctx, namespace, chart.spec.release);
    const owner = releaseOwner(history.at(-1)?.labels, chart);
    if (owner.kind === 'other-chart') {
      return this.report(ctx, chart, 'error', `release ${chart.spec.release} in namespace ${namespace} belongs to ArmadaChart ${owner.chart}: left untouched; choose another release name`, {}, [
        { type: 'Released', status: 'False', reason: 'ForeignRelease', message: `release ${chart.spec.release} belongs to ArmadaChart ${owner.chart}` },
      ], 'ForeignRelease');
    }
    if (owner.kind === 'unrecorded') {
      if (!chart.spec.adopt) {
        return this.report(ctx, chart, 'error', `release ${chart.spec.release} in namespace ${namespace} was not installed by this ArmadaChart (it has no owner record: installed by hand or by another tool): left untouched, and kept when this ArmadaChart is deleted; set spec.adopt: true to take it over`, {}, [
          { type: 'Released', status: 'False', reason: 'ForeignRelease', message: `release ${chart.spec.release} has no owner record; spec.adopt is not set` },
        ], 'ForeignRelease');
      }
      ctx.recorder.event(chart, 'Normal', 'Adopting', `release ${chart.spec.release} in namespace ${namespace} has no owner record; adopting it (spec.adopt: true): its next revision is this ArmadaChart's`);
    }

    if (chart.spec.target_state === 'uninitialized') {
      return history.length === 0
        ? this.report(ctx, chart, 'uninitialized', undefined)
        : this.report(ctx, chart, 'deployed', `release ${chart.spec.release} is installed but target_state is uninitialized: delete the ArmadaChart to uninstall it`, { revision: history.at(-1)!.revision });
    }

    try {
      await this.retirePrevious(ctx, chart, namespace);
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      return this.retryLater(ctx, chart, 'failed', `helm uninstall of the chart's previous release failed: ${err.helmMessage}`);
    }

    const waitingFor = (chart.spec.dependencies ?? []).filter((name) => !isDeployed(ctx.cache.get<ArmadaChartObject>(ArmadaChart, name, chart.metadata.namespace)));
    if (waitingFor.length > 0) {
      return this.report(ctx, chart, 'pending', `waiting for ArmadaChart ${waitingFor.join(', ')} (dependencies) to be deployed`);
    }

    const retry = this.retries.get(chart.metadata.uid!);
    if (retry && retry.generation === chart.metadata.generation && Date.now() < retry.due) return requeueAfter(retry.due - Date.now());

    let source: ResolvedSource;
    try {
      source = await this.resolve(chart);
    } catch (err) {
      if (!(err instanceof SourceError)) throw err;
      if (!err.transient) return this.report(ctx, chart, 'error', err.message, {}, [], 'SourceInvalid');
      return this.retryLater(ctx, chart, 'error', err.message);
    }

    const labels: Record<string, string> = ownerLabels(chart);
    const prefix = releasePrefix(ctx, chart);
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
    if (plan.action === 'install' && chart.status?.failed_inputs === digest) {
      // These inputs failed to install for a reason only a spec change can fix: stalled, not retried.
      return this.report(ctx, chart, 'failed', chart.status.reason ?? 'helm install failed', {}, [], chart.status.conditions?.find((c) => c.type === 'Stalled' && c.status === 'True')?.reason ?? 'InstallFailed');
    }
    try {
      const result = await this.carryOut(ctx, chart, plan, inputs, digest);
      // A tar URL or a git branch may change without the spec: look again after the interval.
      return result ?? (chart.spec.source.type === 'local' ? undefined : requeueAfter(sourceIntervalMs(chart)));
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      // A Helm failure outside the remediated paths (a rollback or uninstall that fails, say).
      return this.retryLater(ctx, chart, 'failed', `${err.command} as ${describeAuthority(authorityOf(chart, this.options))} failed: ${err.helmMessage}`);
    }
  };

  private async carryOut(ctx: ReconcileContext, chart: ArmadaChartObject, plan: ReleasePlan, inputs: ReleaseInputs, digest: string): Promise<ReconcileResult> {
    const namespace = inputs.namespace;
    if (plan.action !== 'none' && plan.action !== 'blocked') await requireFresh(ctx, chart);
    switch (plan.action) {
      case 'install':
        return this.install(ctx, chart, inputs);
      case 'replace': {
        ctx.recorder.event(chart, 'Warning', 'Replacing', `${plan.why}: uninstalling it to install again`);
        await this.helmOf(chart).uninstall(inputs.release, namespace, chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS);
        await this.cacheShows(ctx, namespace, inputs.release, (h) => h.length === 0);
        return this.install(ctx, chart, inputs);
      }
      case 'rollback': {
        ctx.recorder.event(chart, 'Warning', 'Recovering', `revision ${plan.revision.revision} was left ${plan.revision.status}; rolling back to revision ${plan.to}`);
        await this.helmOf(chart).rollback(inputs.release, namespace, plan.to, inputs.timeoutSeconds, inputs.wait);
        await this.cacheShows(ctx, namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) > plan.revision.revision);
        return; // the release Secret's event brings the chart back for its upgrade
      }
      case 'upgrade':
        return this.upgrade(ctx, chart, inputs, digest, plan.revision, []);
      case 'blocked': {
        const reason = chart.status?.failed_inputs === digest && chart.status.reason ? chart.status.reason : plan.why;
        return this.report(ctx, chart, 'failed', reason, { revision: plan.revision.revision }, [], 'UpgradeFailed');
      }
      case 'none':
        return this.keep(ctx, chart, inputs, digest, plan.revision);
    }
  }

  /** The release is as declared: report it, and repair drift of its resources. */
  private async keep(ctx: ReconcileContext, chart: ArmadaChartObject, inputs: ReleaseInputs, digest: string, revision: ReleaseRevision): Promise<ReconcileResult> {
    if (chart.status?.failed_inputs === digest) {
      // These inputs are installed but failed their test: stays failed until the spec changes.
      return this.report(ctx, chart, 'failed', chart.status.reason ?? 'helm test failed', { revision: revision.revision }, [], chart.status.conditions?.find((c) => c.type === 'Stalled' && c.status === 'True')?.reason ?? 'TestFailed');
    }
    const objects = await this.manifestOf(inputs.namespace, inputs.release, revision.revision);
    const drifts = findDrift(objects, (type, name, namespace) => ctx.cache.get(type, name, namespace));
    if (drifts.length > 0) {
      const description = describeDrift(drifts);
      const last = this.repairs.get(chart.metadata.uid!);
      if (last && last.description === description && Date.now() - last.at < REPAIR_QUIET_MS) {
        return this.report(ctx, chart, 'deployed', undefined, { revision: revision.revision }, [
          { type: 'Drifted', status: 'True', reason: 'DriftPersists', message: `${description}, again right after a repair; not repairing it in a loop` },
        ]);
      }
      await requireFresh(ctx, chart);
      ctx.recorder.event(chart, 'Warning', 'DriftDetected', `${description}: restoring it with helm upgrade`);
      const result = await this.upgrade(ctx, chart, inputs, digest, revision, [{ type: 'Drifted', status: 'True', reason: 'DriftRepaired', message: `${description}; restored by helm upgrade` }]);
      this.repairs.set(chart.metadata.uid!, { description, at: Date.now() });
      return result;
    }
    const version = chart.status?.version ?? (await this.options.helm.status(inputs.release, inputs.namespace)).chart?.metadata?.version;
    return this.report(ctx, chart, 'deployed', undefined, { revision: revision.revision, version, failed_inputs: undefined }, [released(revision.revision)]);
  }

  private async install(ctx: ReconcileContext, chart: ArmadaChartObject, inputs: ReleaseInputs): Promise<ReconcileResult> {
    await this.report(ctx, chart, 'running', `helm install of release ${inputs.release} is running`);
    let release: HelmRelease;
    try {
      release = await this.helmOf(chart).install(inputs);
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      const failures = (chart.status?.install_failures ?? 0) + 1;
      // Flux's remediation: a failed install is uninstalled, so that the retry is a clean install.
      // Only what this install made is removed: a release that existed before it (someone else's) stays.
      if (this.history(ctx, inputs.namespace, inputs.release).length === 0 && (await this.releaseExists(inputs))) {
        await this.cacheShows(ctx, inputs.namespace, inputs.release, (h) => h.length > 0);
      }
      const left = this.history(ctx, inputs.namespace, inputs.release);
      if (left.length > 0 && releaseOwner(left.at(-1)!.labels, chart).kind === 'ours') {
        await this.helmOf(chart).uninstall(inputs.release, inputs.namespace, chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS).catch(() => undefined);
        await this.cacheShows(ctx, inputs.namespace, inputs.release, (h) => h.length === 0);
      }
      const condition: Conditions = [{ type: 'Released', status: 'False', reason: 'InstallFailed', message: err.helmMessage }];
      if (helmFailureStalls(err.helmMessage)) {
        return this.report(ctx, chart, 'failed', `helm install failed and is not retried until the spec changes: ${err.helmMessage}`, { install_failures: failures, failed_inputs: inputs.labels[INPUTS_LABEL] }, condition, stalledReason(err.helmMessage));
      }
      return this.retryLater(ctx, chart, 'failed', `helm install as ${describeAuthority(authorityOf(chart, this.options))} failed: ${err.helmMessage}`, { install_failures: failures }, condition);
    }
    await this.cacheShows(ctx, inputs.namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) >= release.version);
    ctx.recorder.event(chart, 'Normal', 'Installed', `release ${inputs.release} installed: revision ${release.version}, chart ${chartLabel(release)}`);
    return this.afterRelease(ctx, chart, inputs, release, { install_failures: 0 }, []);
  }

  private async upgrade(ctx: ReconcileContext, chart: ArmadaChartObject, inputs: ReleaseInputs, digest: string, from: ReleaseRevision, drifted: Conditions): Promise<ReconcileResult> {
    await this.report(ctx, chart, 'running', `helm upgrade of release ${inputs.release} is running`, {}, drifted);
    let release: HelmRelease;
    try {
      await this.preUpgradeDelete(ctx, chart, inputs.namespace);
      release = await this.helmOf(chart).upgrade(inputs, { noHooks: chart.spec.upgrade?.no_hooks, force: chart.spec.upgrade?.options?.force });
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      const failures = (chart.status?.upgrade_failures ?? 0) + 1;
      const history = await this.settledHistory(ctx, inputs.namespace, inputs.release, from.revision);
      const failedRevision = history.at(-1);
      let outcome = 'no revision was recorded';
      if (failedRevision && failedRevision.revision > from.revision && failedRevision.status !== 'deployed') {
        const good = history.filter((r) => r.revision < failedRevision.revision && (r.status === 'deployed' || r.status === 'superseded')).at(-1);
        if (good) {
          try {
            await this.helmOf(chart).rollback(inputs.release, inputs.namespace, good.revision, inputs.timeoutSeconds, inputs.wait);
            await this.cacheShows(ctx, inputs.namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) > failedRevision.revision);
            outcome = `rolled back to revision ${good.revision}`;
          } catch (rollbackErr) {
            if (!(rollbackErr instanceof HelmError)) throw rollbackErr;
            outcome = `the rollback to revision ${good.revision} failed too: ${rollbackErr.helmMessage}`;
          }
        }
      }
      const reason = `helm upgrade as ${describeAuthority(authorityOf(chart, this.options))} failed (${outcome}); fix the spec to try again: ${err.helmMessage}`;
      await this.report(ctx, chart, 'failed', reason, { upgrade_failures: failures, failed_inputs: digest, revision: this.history(ctx, inputs.namespace, inputs.release).at(-1)?.revision }, [
        { type: 'Released', status: 'False', reason: 'UpgradeFailed', message: err.helmMessage },
      ], 'UpgradeFailed');
      return;
    }
    await this.cacheShows(ctx, inputs.namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) >= release.version);
    ctx.recorder.event(chart, 'Normal', drifted.length > 0 ? 'DriftRepaired' : 'Upgraded', `release ${inputs.release} upgraded: revision ${release.version}, chart ${chartLabel(release)}`);
    const driftCondition: Conditions = drifted.length > 0 ? drifted : [{ type: 'Drifted', status: 'False', reason: 'NoDrift', message: 'the release\'s resources are as Helm applied them' }];
    return this.afterRelease(ctx, chart, inputs, release, { upgrade_failures: 0 }, driftCondition);
  }

  /** After a successful install or upgrade: `helm test` when enabled, then the status. */
  private async afterRelease(ctx: ReconcileContext, chart: ArmadaChartObject, inputs: ReleaseInputs, release: HelmRelease, counters: Partial<ChartStatus>, conditions: Conditions): Promise<ReconcileResult> {
    const fields: Partial<ChartStatus> = { ...counters, revision: release.version, version: release.chart?.metadata?.version, failed_inputs: undefined };
    const all: Conditions = [released(release.version), ...conditions];
    const wait = chart.spec.wait;
    const checks = wait?.resources ?? (wait?.labels ? [{ type: 'pod' }] : []);
    if (checks.length > 0) {
      const timeout = wait?.timeout ?? DEFAULT_WAIT_SECONDS;
      const problems = await waitForResources(ctx.client, inputs.namespace, checks, wait?.labels ?? {}, timeout, ctx.signal);
      if (problems.length > 0) {
        return this.report(ctx, chart, 'failed', `the release's resources are not ready after ${timeout} s (wait.resources): ${problems.join('; ')}`, { ...fields, failed_inputs: inputs.labels[INPUTS_LABEL] }, all, 'NotReady');
      }
    }
    if (chart.spec.test?.enabled) {
      try {
        await this.helmOf(chart).test(inputs.release, inputs.namespace, chart.spec.test.timeout ?? DEFAULT_TEST_SECONDS);
        ctx.recorder.event(chart, 'Normal', 'TestSucceeded', `helm test of release ${inputs.release} succeeded`);
        all.push({ type: 'TestSuccess', status: 'True', reason: 'Succeeded', message: `helm test passed for revision ${release.version}` });
      } catch (err) {
        if (!(err instanceof HelmError)) throw err;
        all.push({ type: 'TestSuccess', status: 'False', reason: 'Failed', message: err.helmMessage });
        return this.report(ctx, chart, 'failed', `helm test of release ${inputs.release} failed; fix the chart or values: ${err.helmMessage}`, { ...fields, failed_inputs: inputs.labels[INPUTS_LABEL] }, all, 'TestFailed');
      } finally {
        if (chart.spec.test.options?.cleanup) await this.deleteTestPods(ctx, inputs);
      }
    }
    return this.report(ctx, chart, 'deployed', undefined, fields, all);
  }

  private async finalize(chart: ArmadaChartObject, ctx: ReconcileContext): Promise<ReconcileResult> {
    if (!hasFinalizer(chart, CHART_FINALIZER)) return;
    const namespace = releaseNamespace(chart);
    const history = isValidChartSpec(chart.spec) ? this.history(ctx, namespace, chart.spec.release) : [];
    const owner = releaseOwner(history.at(-1)?.labels, chart);
    if (chart.spec.protected) {
      ctx.recorder.event(chart, 'Normal', 'Protected', `release ${chart.spec.release} is protected: kept installed`);
    } else if (owner.kind === 'unrecorded' || owner.kind === 'other-chart') {
      ctx.recorder.event(chart, 'Normal', 'ForeignReleaseKept', `release ${chart.spec.release} in namespace ${namespace} was not installed by this ArmadaChart: kept installed`);
    } else if (owner.kind === 'ours' && authorityOf(chart, this.options).kind === 'none') {
      ctx.recorder.event(chart, 'Warning', 'UninstallRefused', `release ${chart.spec.release} kept installed: the chart names no ServiceAccount to uninstall it with, and the operator requires one`);
    } else if (owner.kind === 'ours') {
      try {
        await this.helmOf(chart).uninstall(chart.spec.release, namespace, chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS);
      } catch (err) {
        if (!(err instanceof HelmError) || err.name !== 'ReleaseNotFoundError') {
          ctx.recorder.event(chart, 'Warning', 'UninstallFailed', `helm uninstall of release ${chart.spec.release} as ${describeAuthority(authorityOf(chart, this.options))} failed: ${err instanceof HelmError ? err.helmMessage : String(err)}`);
          throw err;
        }
      }
      ctx.recorder.event(chart, 'Normal', 'Uninstalled', `release ${chart.spec.release} uninstalled`);
    }
    for (const memory of [this.resolved, this.badSources, this.retries, this.repairs]) memory.delete(chart.metadata.uid!);
    await removeFinalizer(ctx.client, ArmadaChart, chart, CHART_FINALIZER).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    });
  }

  /**
   * The one place that writes a chart's status. `stalled` names why the chart cannot progress
   * until its spec changes (kstatus `Stalled`); a deployed chart forgets its transient failures.
   */
  private async report(ctx: ReconcileContext, chart: ArmadaChartObject, state: ChartStatus['actual_state'] & string, reason: string | undefined, fields: Partial<ChartStatus> = {}, conditions: Conditions = [], stalled?: string): Promise<void> {
    if (state === 'deployed') this.retries.delete(chart.metadata.uid!);
    const next = nextStatus<ChartStatus>(chart, state, reason, fields, conditions, stalled);
    for (const [key, value] of Object.entries(fields)) if (value === undefined) delete (next as Record<string, unknown>)[key];
    const written = await writeStatus(ctx, ArmadaChart, chart, next);
    // Later writes in the same reconcile start from what was written (and its resourceVersion).
    chart.metadata = written.metadata;
    chart.status = written === chart ? next : written.status;
  }

  /**
   * A renamed `release` or `namespace`: the release this chart made under the old name is
   * uninstalled before anything is installed under the new one (kept when `protected`), so a
   * chart never owns two releases. Only a release whose newest revision is still this chart's.
   */
  private async retirePrevious(ctx: ReconcileContext, chart: ArmadaChartObject, namespace: string): Promise<void> {
    for (const old of previousReleases(ctx.cache.list(Kinds.Secret), chart, { release: chart.spec.release, namespace })) {
      const history = this.history(ctx, old.namespace, old.release);
      if (history.length === 0 || releaseOwner(history.at(-1)!.labels, chart).kind !== 'ours') continue;
      if (chart.spec.protected) {
        ctx.recorder.event(chart, 'Normal', 'PreviousReleaseKept', `release ${old.release} in namespace ${old.namespace} (the chart's previous release name or namespace) is protected: kept installed`);
        continue;
      }
      await requireFresh(ctx, chart);
      await this.helmOf(chart).uninstall(old.release, old.namespace, chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS);
      await this.cacheShows(ctx, old.namespace, old.release, (h) => h.length === 0);
      ctx.recorder.event(chart, 'Normal', 'PreviousReleaseUninstalled', `release ${old.release} in namespace ${old.namespace} uninstalled: spec.release / spec.namespace now name ${chart.spec.release} in ${namespace}`);
    }
  }

  /**
   * Helm acting with the chart's authority (authority.ts: its ServiceAccount, impersonated) for
   * everything that changes a release; reads of release state stay the operator's.
   */
  private helmOf(chart: ArmadaChartObject): Helm {
    const authority = authorityOf(chart, this.options);
    return authority.kind === 'service-account' ? this.options.helm.as(authority.user) : this.options.helm;
  }

  /** A transient failure: reported, and the reconcile retried after a growing delay (10 s … 5 min). */
  private async retryLater(ctx: ReconcileContext, chart: ArmadaChartObject, state: 'error' | 'failed', reason: string, fields: Partial<ChartStatus> = {}, conditions: Conditions = []): Promise<ReconcileResult> {
    const generation = chart.metadata.generation ?? 0;
    const previous = this.retries.get(chart.metadata.uid!);
    const failures = (previous?.generation === generation ? previous.failures : 0) + 1;
    const delay = retryDelayMs(failures);
    this.retries.set(chart.metadata.uid!, { generation, failures, due: Date.now() + delay });
    await this.report(ctx, chart, state, `${reason} (attempt ${failures}, retrying in ${delay / 1000} s)`, fields, conditions);
    return requeueAfter(delay);
  }

  /**
   * The chart's source, resolved again on a spec change and, for tar and git, every
   * `source.interval`; a source error only the spec can fix is not fetched again before it changes.
   */
  private async resolve(chart: ArmadaChartObject): Promise<ResolvedSource> {
    const uid = chart.metadata.uid!;
    const generation = chart.metadata.generation ?? 0;
    const bad = this.badSources.get(uid);
    if (bad?.generation === generation) throw bad.error;
    const known = this.resolved.get(uid);
    const fresh = (at: number) => chart.spec.source.type === 'local' || Date.now() - at < sourceIntervalMs(chart);
    if (known && known.generation === generation && fresh(known.at)) return known.source;
    try {
      const source = await this.options.sources.resolve(chart.spec.source);
      this.resolved.set(uid, { generation, source, at: Date.now() });
      this.badSources.delete(uid);
      return source;
    } catch (err) {
      if (err instanceof SourceError && !err.transient) this.badSources.set(uid, { generation, error: err });
      throw err;
    }
  }

  private history(ctx: ReconcileContext, namespace: string, release: string): ReleaseRevision[] {
    return releaseHistory(ctx.cache.list(Kinds.Secret, { namespace }), release);
  }

  /** Waits (at most 15 s) until the cached release history satisfies `done`: the cache lags Helm's writes. */
  private async cacheShows(ctx: ReconcileContext, namespace: string, release: string, done: (history: ReleaseRevision[]) => boolean): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (!done(this.history(ctx, namespace, release)) && Date.now() < deadline && !ctx.signal.aborted) await new Promise((r) => setTimeout(r, 100));
  }

  /** The history once no revision above `from` is pending (a failed upgrade's revision lands a moment later). */
  private async settledHistory(ctx: ReconcileContext, namespace: string, release: string, from: number): Promise<ReleaseRevision[]> {
    await this.cacheShows(ctx, namespace, release, (h) => h.some((r) => r.revision > from && !r.status.startsWith('pending-')));
    return this.history(ctx, namespace, release);
  }

  private async releaseExists(inputs: ReleaseInputs): Promise<boolean> {
    return this.options.helm.status(inputs.release, inputs.namespace).then(() => true, () => false);
  }

  private async manifestOf(namespace: string, release: string, revision: number): Promise<KubeObject[]> {
    const key = `${namespace}/${release}/${revision}`;
    let objects = this.manifests.get(key);
    if (!objects) {
      objects = manifestObjects(await this.options.helm.manifest(release, namespace, revision), namespace);
      if (this.manifests.size > 1000) this.manifests.clear();
      this.manifests.set(key, objects);
    }
    return objects;
  }

  private async preUpgradeDelete(ctx: ReconcileContext, chart: ArmadaChartObject, namespace: string): Promise<void> {
    for (const entry of chart.spec.upgrade?.pre?.delete ?? []) {
      const type = PRE_DELETE_TYPES[entry.type.toLowerCase()];
      if (!type) throw new HelmError('upgrade.pre.delete', `unknown resource type "${entry.type}": use one of ${Object.keys(PRE_DELETE_TYPES).join(', ')}`, null);
      const selector = Object.entries(entry.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
      const found = await ctx.client.list(type, { namespace, labelSelector: selector || undefined });
      for (const obj of found.items) {
        await ctx.client.delete(type, obj.metadata.name!, namespace, { propagationPolicy: 'Background' }).catch(() => undefined);
      }
      if (found.items.length > 0) ctx.recorder.event(chart, 'Normal', 'PreUpgradeDelete', `deleted ${found.items.length} ${type.kind}(s) matching "${selector}" before the upgrade`);
    }
  }

  private async deleteTestPods(ctx: ReconcileContext, inputs: ReleaseInputs): Promise<void> {
    const status = await this.options.helm.status(inputs.release, inputs.namespace).catch(() => undefined);
    for (const hook of status?.hooks ?? []) {
      if (hook.kind === 'Pod' && hook.events?.includes('test')) await ctx.client.delete(Kinds.Pod, hook.name, inputs.namespace).catch(() => undefined);
    }
  }
}

/**
 * Fails (the reconcile is retried) unless the cached chart is the API server's current one: a
 * Helm operation is never decided on a stale status (e.g. one that does not yet record a failed
 * upgrade's inputs).
 */
async function requireFresh(ctx: ReconcileContext, chart: ArmadaChartObject): Promise<void> {
  const current = await ctx.client.get(ArmadaChart, chart.metadata.name!, chart.metadata.namespace);
  if (current.metadata.resourceVersion !== chart.metadata.resourceVersion) {
    throw new Error(`the cached ArmadaChart ${chart.metadata.namespace}/${chart.metadata.name} is stale (${chart.metadata.resourceVersion} vs ${current.metadata.resourceVersion}); retrying before any Helm operation`);
  }
}

function released(revision: number): ConditionUpdate {
  return { type: 'Released', status: 'True', reason: 'Released', message: `revision ${revision} is deployed` };
}

function chartLabel(release: HelmRelease): string {
  const meta = release.chart?.metadata;
  return meta ? `${meta.name}-${meta.version}` : 'unknown';
}

/** The `release_prefix` of the manifest owning the group owning the chart, if any. */
export function releasePrefix(ctx: { cache: ReconcileContext['cache'] }, chart: ArmadaChartObject): string | undefined {
  const groupRef = chart.metadata.ownerReferences?.find((r) => r.controller && r.kind === ArmadaChartGroup.kind);
  const group = groupRef && ctx.cache.get<ArmadaChartGroupObject>(ArmadaChartGroup, groupRef.name, chart.metadata.namespace);
  const manifestRef = group?.metadata.ownerReferences?.find((r) => r.controller && r.kind === ArmadaManifest.kind);
  const manifest = manifestRef && ctx.cache.get<ArmadaManifestObject>(ArmadaManifest, manifestRef.name, chart.metadata.namespace);
  return manifest?.spec.release_prefix;
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
