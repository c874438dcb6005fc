/**
 * Drift: a release that is as declared is kept so — its resources compared with the manifest
 * Helm applied (../drift.ts), and restored by `helm upgrade` with the same inputs.
 *
 * Guarantees: inputs that failed their test stay `failed` (stalled) until the spec changes.
 * `drift.mode` (default `repair`): `off` checks nothing; otherwise a drifted resource (../drift.ts:
 * no false drift for defaults, quantities or `drift.ignore` paths; a field another controller owns
 * — an autoscaler's replicas — read from the live object's managedFields, is not drift either) is
 * reported (`Drifted`, Event `DriftDetected`), and with `repair` restored by an upgrade; the same
 * drift seen again within a minute of its repair is reported, not repaired in a loop. Otherwise
 * the chart is `deployed` at the release's revision.
 */
import { isNotFound, type KubeObject, type ReconcileResult } from '@iot-operator/runtime';
import type { ReleaseInputs } from '../../helm/helm.ts';
import type { ReleaseRevision } from '../../helm/release-state.ts';
import { describeDrift, DRIFT_KINDS, findDrift, manifestObjects, ownedByOtherController, parseFormattedPath, type Drift } from '../drift.ts';
import { released } from './test.ts';
import { upgrade } from './upgrade.ts';
import type { ChartRun, Conditions } from './run.ts';

/** A drift seen again within this time after its repair is reported instead of repaired again. */
const REPAIR_QUIET_MS = 60_000;

export async function keep(run: ChartRun, inputs: ReleaseInputs, digest: string, revision: ReleaseRevision): Promise<ReconcileResult> {
  const { chart, ctx } = run;
  if (chart.status?.failed_inputs === digest) {
    // These inputs are installed but failed their test: stays failed until the spec changes.
    return run.report('failed', chart.status.reason ?? 'helm test failed', { revision: revision.revision }, [], run.stalledReason() ?? 'TestFailed');
  }
  const mode = chart.spec.drift?.mode ?? 'repair';
  const objects = mode === 'off' ? [] : await manifestOf(run, inputs.namespace, inputs.release, revision.revision);
  const drifts = await withoutOtherControllers(run, findDrift(objects, (type, name, namespace) => ctx.cache.get(type, name, namespace), chart.spec.drift?.ignore ?? []), inputs.namespace);
  if (drifts.length > 0 && mode === 'warn') {
    const description = describeDrift(drifts);
    if (chart.status?.conditions?.find((c) => c.type === 'Drifted')?.message !== description) run.event('Warning', 'DriftDetected', `${description} (drift.mode: warn, not repaired)`);
    return run.report('deployed', undefined, { revision: revision.revision }, [released(revision.revision), { type: 'Drifted', status: 'True', reason: 'DriftDetected', message: description }]);
  }
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
  // A repaired drift stays on record (DriftRepaired) until the next one; a reported one is cleared.
  const reported = ['DriftDetected', 'DriftPersists'].includes(chart.status?.conditions?.find((c) => c.type === 'Drifted' && c.status === 'True')?.reason ?? '');
  const drifted: Conditions =
    mode === 'off' ? [{ type: 'Drifted', status: 'False', reason: 'DriftDetectionOff', message: 'drift.mode is off' }]
    : reported ? [{ type: 'Drifted', status: 'False', reason: 'NoDrift', message: 'the release\'s resources are as Helm applied them' }]
    : [];
  return run.report('deployed', undefined, { revision: revision.revision, version, failed_inputs: undefined }, [released(revision.revision), ...drifted]);
}

/**
 * The drifts left once fields another controller owns are set aside: each edited object is read
 * from the API server (the cache keeps no managedFields) only when it seems drifted.
 */
async function withoutOtherControllers(run: ChartRun, drifts: Drift[], namespace: string): Promise<Drift[]> {
  const kept: Drift[] = [];
  for (const drift of drifts) {
    if (drift.change !== 'edited') {
      kept.push(drift);
      continue;
    }
    const [kind, name] = drift.object.split('/') as [string, string];
    const type = Object.values(DRIFT_KINDS).find((t) => t.kind.toLowerCase() === kind)!;
    const live = await run.ctx.client.get(type, name, namespace).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    if (!live) {
      kept.push({ object: drift.object, change: 'deleted' });
      continue;
    }
    const owned = ownedByOtherController(live);
    const fields = drift.fields!.filter((field) => !owned(parseFormattedPath(field)));
    if (fields.length > 0) kept.push({ ...drift, fields });
  }
  return kept;
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
