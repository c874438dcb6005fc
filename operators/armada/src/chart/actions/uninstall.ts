/**
 * Uninstall: what happens to a chart's releases when it is deleted or renamed.
 *
 * Guarantees: deleting an ArmadaChart uninstalls its release with the chart's authority only
 * when the release's newest revision records this chart; a `protected` chart's release, a
 * foreign release (another chart's, or one without an owner record) and, when the operator
 * requires a ServiceAccount the chart does not name, its own release are kept, each with an
 * Event; then the finalizer is removed and the chart forgotten. A renamed `release` or
 * `namespace` uninstalls the release the chart made under the old name first (kept when
 * `protected`), so a chart never owns two releases.
 */
import { hasFinalizer, isNotFound, Kinds, removeFinalizer, type ReconcileResult } from '@iot-operator/runtime';
import { ArmadaChart, isValidChartSpec, releaseNamespace } from '../../api/armada.ts';
import { HelmError } from '../../helm/helm.ts';
import { previousReleases, releaseOwner } from '../release-owner.ts';
import { DEFAULT_DELETE_SECONDS, forget, type ChartRun } from './run.ts';

export const CHART_FINALIZER = 'armada.airshipit.org/uninstall';

/** The finalizer's work: uninstall the chart's own release unless it must be kept, then let the chart go. */
export async function finalize(run: ChartRun): Promise<ReconcileResult> {
  const { chart, ctx } = run;
  if (!hasFinalizer(chart, CHART_FINALIZER)) return;
  const namespace = releaseNamespace(chart);
  const history = isValidChartSpec(chart.spec) ? run.history(namespace, chart.spec.release) : [];
  const owner = releaseOwner(history.at(-1)?.labels, chart);
  if (chart.spec.protected) {
    run.event('Normal', 'Protected', `release ${chart.spec.release} is protected: kept installed`);
  } else if (owner.kind === 'unrecorded' || owner.kind === 'other-chart') {
    run.event('Normal', 'ForeignReleaseKept', `release ${chart.spec.release} in namespace ${namespace} was not installed by this ArmadaChart: kept installed`);
  } else if (owner.kind === 'ours' && run.authorityMissing) {
    run.event('Warning', 'UninstallRefused', `release ${chart.spec.release} kept installed: the chart names no ServiceAccount to uninstall it with, and the operator requires one`);
  } else if (owner.kind === 'ours') {
    try {
      await run.helm.uninstall(chart.spec.release, namespace, chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS);
    } catch (err) {
      if (!(err instanceof HelmError) || err.name !== 'ReleaseNotFoundError') {
        run.event('Warning', 'UninstallFailed', `helm uninstall of release ${chart.spec.release}${run.asWho} failed: ${err instanceof HelmError ? err.helmMessage : String(err)}`);
        throw err;
      }
    }
    run.event('Normal', 'Uninstalled', `release ${chart.spec.release} uninstalled`);
  }
  forget(run.memory, run.uid);
  await removeFinalizer(ctx.client, ArmadaChart, chart, CHART_FINALIZER).catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });
}

/** Uninstalls the releases this chart made under an earlier `release` / `namespace` (kept when protected). */
export async function retirePrevious(run: ChartRun, namespace: string): Promise<void> {
  const { chart, ctx } = run;
  for (const old of previousReleases(ctx.cache.list(Kinds.Secret), chart, { release: chart.spec.release, namespace })) {
    const history = run.history(old.namespace, old.release);
    if (history.length === 0 || releaseOwner(history.at(-1)!.labels, chart).kind !== 'ours') continue;
    if (chart.spec.protected) {
      run.event('Normal', 'PreviousReleaseKept', `release ${old.release} in namespace ${old.namespace} (the chart's previous release name or namespace) is protected: kept installed`);
      continue;
    }
    await run.requireFresh();
    await run.helm.uninstall(old.release, old.namespace, chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS);
    await run.cacheShows(old.namespace, old.release, (h) => h.length === 0);
    run.event('Normal', 'PreviousReleaseUninstalled', `release ${old.release} in namespace ${old.namespace} uninstalled: spec.release / spec.namespace now name ${chart.spec.release} in ${namespace}`);
  }
}
