/**
 * Drift: a release that is as declared is kept so — its resources compared with the manifest
 * Helm applied (../drift.ts), and restored by `helm upgrade` with the same inputs.
 *
 * Guarantees: inputs that failed their test stay `failed` (stalled) until the spec changes; a
 * drifted resource is reported (`Drifted`, Event `DriftDetected`) and repaired by an upgrade; the
 * same drift seen again within a minute of its repair is reported, not repaired in a loop;
 * otherwise the chart is `deployed` at the release's revision.
 */
import type { KubeObject, ReconcileResult } from '@iot-operator/runtime';
import type { ReleaseInputs } from '../../helm/helm.ts';
import type { ReleaseRevision } from '../../helm/release-state.ts';
import { describeDrift, findDrift, manifestObjects } from '../drift.ts';
import { released } from './test.ts';
import { upgrade } from './upgrade.ts';
import type { ChartRun } from './run.ts';

/** A drift seen again within this time after its repair is reported instead of repaired again. */
const REPAIR_QUIET_MS = 60_000;

export async function keep(run: ChartRun, inputs: ReleaseInputs, digest: string, revision: ReleaseRevision): Promise<ReconcileResult> {
  const { chart, ctx } = run;
  if (chart.status?.failed_inputs === digest) {
    // These inputs are installed but failed their test: stays failed until the spec changes.
    return run.report('failed', chart.status.reason ?? 'helm test failed', { revision: revision.revision }, [], run.stalledReason() ?? 'TestFailed');
  }
  const objects = await manifestOf(run, inputs.namespace, inputs.release, revision.revision);
  const drifts = findDrift(objects, (type, name, namespace) => ctx.cache.get(type, name, namespace));
  if (drifts.length > 0) {
    const description = describeDrift(drifts);
    const last = run.memory.repairs.get(chart.metadata.uid!);
    if (last && last.description === description && Date.now() - last.at < REPAIR_QUIET_MS) {
      return run.report('deployed', undefined, { revision: revision.revision }, [
        { type: 'Drifted', status: 'True', reason: 'DriftPersists', message: `${description}, again right after a repair; not repairing it in a loop` },
      ]);
    }
    await run.requireFresh();
    run.event('Warning', 'DriftDetected', `${description}: restoring it with helm upgrade`);
    const result = await upgrade(run, inputs, digest, revision, [{ type: 'Drifted', status: 'True', reason: 'DriftRepaired', message: `${description}; restored by helm upgrade` }]);
    run.memory.repairs.set(chart.metadata.uid!, { description, at: Date.now() });
    return result;
  }
  const version = chart.status?.version ?? (await run.reader.status(inputs.release, inputs.namespace)).chart?.metadata?.version;
  return run.report('deployed', undefined, { revision: revision.revision, version, failed_inputs: undefined }, [released(revision.revision)]);
}

async function manifestOf(run: ChartRun, namespace: string, release: string, revision: number): Promise<KubeObject[]> {
  const key = `${namespace}/${release}/${revision}`;
  let objects = run.memory.manifests.get(key);
  if (!objects) {
    objects = manifestObjects(await run.reader.manifest(release, namespace, revision), namespace);
    if (run.memory.manifests.size > 1000) run.memory.manifests.clear();
    run.memory.manifests.set(key, objects);
  }
  return objects;
}
