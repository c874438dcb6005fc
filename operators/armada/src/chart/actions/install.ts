/**
 * Install: the first release of a chart, and Flux's install remediation.
 *
 * Guarantees: `install` runs `helm install` with the chart's authority; a failure removes only
 * what this chart made (a release whose newest revision records another owner, or none — one
 * installed by hand meanwhile — is never uninstalled), then stalls the chart when the failure is
 * deterministic (failure.ts; the inputs are recorded in `failed_inputs`, not tried again) or
 * schedules a retry with backoff when it is transient. `reinstall` uninstalls a release left
 * broken by a failed or interrupted install of this chart, then installs it again. A success
 * goes on to the checks and `helm test` of test.ts.
 */
import type { ReconcileResult } from '@iot-operator/runtime';
import { HelmError, type HelmRelease, type ReleaseInputs } from '../../helm/helm.ts';
import { helmFailureStalls, stalledReason } from '../failure.ts';
import { INPUTS_LABEL } from '../plan.ts';
import { releaseOwner } from '../release-owner.ts';
import { afterRelease, chartLabel } from './test.ts';
import { DEFAULT_DELETE_SECONDS, type ChartRun, type Conditions } from './run.ts';

export async function install(run: ChartRun, inputs: ReleaseInputs): Promise<ReconcileResult> {
  const { chart } = run;
  await run.report('running', `helm install of release ${inputs.release} is running`);
  let release: HelmRelease;
  try {
    release = await run.helm.install(inputs);
  } catch (err) {
    if (!(err instanceof HelmError)) throw err;
    const failures = (chart.status?.install_failures ?? 0) + 1;
    // Flux's remediation: a failed install is uninstalled, so that the retry is a clean install.
    // Only what this install made is removed: a release that existed before it (someone else's) stays.
    if (run.history(inputs.namespace, inputs.release).length === 0 && (await releaseExists(run, inputs))) {
      await run.cacheShows(inputs.namespace, inputs.release, (h) => h.length > 0);
    }
    const left = run.history(inputs.namespace, inputs.release);
    if (left.length > 0 && releaseOwner(left.at(-1)!.labels, chart).kind === 'ours') {
      await run.helm.uninstall(inputs.release, inputs.namespace, chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS).catch(() => undefined);
      await run.cacheShows(inputs.namespace, inputs.release, (h) => h.length === 0);
    }
    const condition: Conditions = [{ type: 'Released', status: 'False', reason: 'InstallFailed', message: err.helmMessage }];
    if (helmFailureStalls(err.helmMessage)) {
      return run.report('failed', `helm install failed and is not retried until the spec changes: ${err.helmMessage}`, { install_failures: failures, failed_inputs: inputs.labels[INPUTS_LABEL] }, condition, stalledReason(err.helmMessage));
    }
    return run.retryLater('failed', `helm install${run.asWho} failed: ${err.helmMessage}`, { install_failures: failures }, condition);
  }
  await run.cacheShows(inputs.namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) >= release.version);
  run.event('Normal', 'Installed', `release ${inputs.release} installed: revision ${release.version}, chart ${chartLabel(release)}`);
  return afterRelease(run, inputs, release, { install_failures: 0 }, []);
}

async function releaseExists(run: ChartRun, inputs: ReleaseInputs): Promise<boolean> {
  return run.reader.status(inputs.release, inputs.namespace).then(() => true, () => false);
}

export async function reinstall(run: ChartRun, inputs: ReleaseInputs, why: string): Promise<ReconcileResult> {
  run.event('Warning', 'Replacing', `${why}: uninstalling it to install again`);
  await run.helm.uninstall(inputs.release, inputs.namespace, run.chart.spec.delete?.timeout ?? DEFAULT_DELETE_SECONDS);
  await run.cacheShows(inputs.namespace, inputs.release, (h) => h.length === 0);
  return install(run, inputs);
}
