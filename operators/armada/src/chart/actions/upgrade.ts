/**
 * Upgrade: a new revision of a chart's release, and Flux's upgrade remediation.
 *
 * Guarantees: `upgrade` runs `upgrade.pre.delete` (for a chart acting as a ServiceAccount, only
 * what that account may delete: asked with a SubjectAccessReview first, else nothing is deleted
 * and the upgrade fails saying so), then `helm upgrade --reset-values` with the
 * chart's authority (the release gets exactly the spec's values); a failure rolls back to the
 * newest good revision, records the inputs in `failed_inputs` and stalls the chart until they
 * change. `recover` rolls a release left `pending-*` by an interrupted operator back to its newest
 * good revision. A success goes on to the checks and `helm test` of test.ts.
 */
import { Kinds, type KubeObject, type ReconcileResult, type ResourceType } from '@iot-operator/runtime';
import { HelmError, type HelmRelease, type ReleaseInputs } from '../../helm/helm.ts';
import type { ReleaseRevision } from '../../helm/release-state.ts';
import { WAIT_TYPES } from '../readiness.ts';
import { afterRelease, chartLabel } from './test.ts';
import type { ChartRun, Conditions } from './run.ts';

export const SubjectAccessReview: ResourceType = { group: 'authorization.k8s.io', version: 'v1', kind: 'SubjectAccessReview', plural: 'subjectaccessreviews', namespaced: false };

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

export async function upgrade(run: ChartRun, inputs: ReleaseInputs, digest: string, from: ReleaseRevision, drifted: Conditions): Promise<ReconcileResult> {
  const { chart } = run;
  await run.report('running', `helm upgrade of release ${inputs.release} is running`, {}, drifted);
  let release: HelmRelease;
  try {
    await preUpgradeDelete(run, inputs.namespace);
    release = await run.helm.upgrade(inputs, { noHooks: chart.spec.upgrade?.no_hooks, force: chart.spec.upgrade?.options?.force });
  } catch (err) {
    if (!(err instanceof HelmError)) throw err;
    const failures = (chart.status?.upgrade_failures ?? 0) + 1;
    const history = await settledHistory(run, inputs.namespace, inputs.release, from.revision);
    const failedRevision = history.at(-1);
    let outcome = 'no revision was recorded';
    if (failedRevision && failedRevision.revision > from.revision && failedRevision.status !== 'deployed') {
      const good = history.filter((r) => r.revision < failedRevision.revision && (r.status === 'deployed' || r.status === 'superseded')).at(-1);
      if (good) {
        try {
          await run.helm.rollback(inputs.release, inputs.namespace, good.revision, inputs.timeoutSeconds, inputs.wait);
          await run.cacheShows(inputs.namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) > failedRevision.revision);
          outcome = `rolled back to revision ${good.revision}`;
        } catch (rollbackErr) {
          if (!(rollbackErr instanceof HelmError)) throw rollbackErr;
          outcome = `the rollback to revision ${good.revision} failed too: ${rollbackErr.helmMessage}`;
        }
      }
    }
    const reason = `helm upgrade${run.asWho} failed (${outcome}); fix the spec to try again: ${err.helmMessage}`;
    await run.report('failed', reason, { upgrade_failures: failures, failed_inputs: digest, revision: run.history(inputs.namespace, inputs.release).at(-1)?.revision }, [
      { type: 'Released', status: 'False', reason: 'UpgradeFailed', message: err.helmMessage },
    ], 'UpgradeFailed');
    return;
  }
  await run.cacheShows(inputs.namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) >= release.version);
  run.event('Normal', drifted.length > 0 ? 'DriftRepaired' : 'Upgraded', `release ${inputs.release} upgraded: revision ${release.version}, chart ${chartLabel(release)}`);
  const driftCondition: Conditions = drifted.length > 0 ? drifted : [{ type: 'Drifted', status: 'False', reason: 'NoDrift', message: 'the release\'s resources are as Helm applied them' }];
  return afterRelease(run, inputs, release, { upgrade_failures: 0 }, driftCondition);
}

async function preUpgradeDelete(run: ChartRun, namespace: string): Promise<void> {
  const { chart, ctx } = run;
  for (const entry of chart.spec.upgrade?.pre?.delete ?? []) {
    const type = PRE_DELETE_TYPES[entry.type.toLowerCase()];
    if (!type) throw new HelmError('upgrade.pre.delete', `unknown resource type "${entry.type}": use one of ${Object.keys(PRE_DELETE_TYPES).join(', ')}`, null);
    if (run.user && !(await mayDelete(run, run.user, type, namespace))) {
      throw new HelmError('upgrade.pre.delete', `${run.actingAs} may not delete ${type.plural} in namespace ${namespace}: nothing was deleted; grant it or remove the entry`, null);
    }
    const selector = Object.entries(entry.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
    const found = await ctx.client.list(type, { namespace, labelSelector: selector || undefined });
    for (const obj of found.items) {
      await ctx.client.delete(type, obj.metadata.name!, namespace, { propagationPolicy: 'Background' }).catch(() => undefined);
    }
    if (found.items.length > 0) run.event('Normal', 'PreUpgradeDelete', `deleted ${found.items.length} ${type.kind}(s) matching "${selector}" before the upgrade`);
  }
}

/**
 * Whether `user` may delete objects of `type` in `namespace` (a SubjectAccessReview): the
 * operator deletes for `upgrade.pre.delete` with its own client, so it asks first on behalf of the
 * chart's account. A review the operator may not make counts as a refusal.
 */
async function mayDelete(run: ChartRun, user: string, type: ResourceType, namespace: string): Promise<boolean> {
  const [, saNamespace] = user.split(':');
  const review = {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    metadata: {},
    spec: {
      user,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${saNamespace}`, 'system:authenticated'],
      resourceAttributes: { namespace, verb: 'delete', group: type.group, resource: type.plural },
    },
  };
  const answer = await run.ctx.client.create<KubeObject & { status?: { allowed?: boolean } }>(SubjectAccessReview, review as KubeObject).catch(() => undefined);
  return answer?.status?.allowed === true;
}

async function settledHistory(run: ChartRun, namespace: string, release: string, from: number): Promise<ReleaseRevision[]> {
  await run.cacheShows(namespace, release, (h) => h.some((r) => r.revision > from && !r.status.startsWith('pending-')));
  return run.history(namespace, release);
}

export async function recover(run: ChartRun, inputs: ReleaseInputs, stuck: ReleaseRevision, to: number): Promise<ReconcileResult> {
  run.event('Warning', 'Recovering', `revision ${stuck.revision} was left ${stuck.status}; rolling back to revision ${to}`);
  await run.helm.rollback(inputs.release, inputs.namespace, to, inputs.timeoutSeconds, inputs.wait);
  await run.cacheShows(inputs.namespace, inputs.release, (h) => (h.at(-1)?.revision ?? 0) > stuck.revision);
  return; // the release Secret's event brings the chart back for its upgrade
}
