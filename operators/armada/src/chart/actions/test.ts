/**
 * After a successful install or upgrade: `wait.resources` / `wait.labels` checks (readiness.ts)
 * and `helm test` when `test.enabled`, then the chart's status.
 *
 * Guarantees: a check or test that fails reports `failed`, records the inputs in
 * `failed_inputs` and stalls the chart (`NotReady`, `TestFailed`) until they change; a passing
 * test sets `TestSuccess`; `test.options.cleanup` deletes the test pods whatever the outcome.
 * Otherwise the chart is `deployed` with the revision and chart version Helm reported.
 */
import { Kinds, type ReconcileResult } from '@iot-operator/runtime';
import type { ChartStatus } from '../../api/armada.ts';
import { HelmError, type HelmRelease, type ReleaseInputs } from '../../helm/helm.ts';
import { INPUTS_LABEL } from '../plan.ts';
import { waitForResources } from '../readiness.ts';
import { DEFAULT_TEST_SECONDS, DEFAULT_WAIT_SECONDS, type ChartRun, type Conditions } from './run.ts';

export async function afterRelease(run: ChartRun, inputs: ReleaseInputs, release: HelmRelease, counters: Partial<ChartStatus>, conditions: Conditions): Promise<ReconcileResult> {
  const { chart, ctx } = run;
  const fields: Partial<ChartStatus> = { ...counters, revision: release.version, version: release.chart?.metadata?.version, failed_inputs: undefined };
  const all: Conditions = [released(release.version), ...conditions];
  const wait = chart.spec.wait;
  const checks = wait?.resources ?? (wait?.labels ? [{ type: 'pod' }] : []);
  if (checks.length > 0) {
    const timeout = wait?.timeout ?? DEFAULT_WAIT_SECONDS;
    const problems = await waitForResources(ctx.client, inputs.namespace, checks, wait?.labels ?? {}, timeout, ctx.signal);
    if (problems.length > 0) {
      return run.report('failed', `the release's resources are not ready after ${timeout} s (wait.resources): ${problems.join('; ')}`, { ...fields, failed_inputs: inputs.labels[INPUTS_LABEL] }, all, 'NotReady');
    }
  }
  if (chart.spec.test?.enabled) {
    try {
      await run.helm.test(inputs.release, inputs.namespace, chart.spec.test.timeout ?? DEFAULT_TEST_SECONDS);
      run.event('Normal', 'TestSucceeded', `helm test of release ${inputs.release} succeeded`);
      all.push({ type: 'TestSuccess', status: 'True', reason: 'Succeeded', message: `helm test passed for revision ${release.version}` });
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      all.push({ type: 'TestSuccess', status: 'False', reason: 'Failed', message: err.helmMessage });
      return run.report('failed', `helm test of release ${inputs.release} failed; fix the chart or values: ${err.helmMessage}`, { ...fields, failed_inputs: inputs.labels[INPUTS_LABEL] }, all, 'TestFailed');
    } finally {
      if (chart.spec.test.options?.cleanup) await deleteTestPods(run, inputs);
    }
  }
  return run.report('deployed', undefined, fields, all);
}

async function deleteTestPods(run: ChartRun, inputs: ReleaseInputs): Promise<void> {
  const { ctx } = run;
  const status = await run.reader.status(inputs.release, inputs.namespace).catch(() => undefined);
  for (const hook of status?.hooks ?? []) {
    if (hook.kind === 'Pod' && hook.events?.includes('test')) await ctx.client.delete(Kinds.Pod, hook.name, inputs.namespace).catch(() => undefined);
  }
}

export function released(revision: number): Conditions[number] {
  return { type: 'Released', status: 'True', reason: 'Released', message: `revision ${revision} is deployed` };
}

export function chartLabel(release: HelmRelease): string {
  const meta = release.chart?.metadata;
  return meta ? `${meta.name}-${meta.version}` : 'unknown';
}
