/**
 * What to do with a chart's Helm release: a pure decision from the release's history (as Helm
 * stores it), the digest of the desired inputs and the chart's status.
 *
 * Guarantees:
 * - No release → `install`.
 * - The newest revision is `deployed` with the desired inputs' digest → `none` (an unchanged
 *   chart causes no `helm upgrade`); with another digest → `upgrade`, unless those exact inputs
 *   already failed an upgrade (`status.failed_inputs`) → `blocked` until the spec changes.
 * - The newest revision is `failed`: with an older good revision → `upgrade` (or `blocked` for
 *   inputs that already failed); without one (a failed install) → `replace` (uninstall, then
 *   install).
 * - The newest revision is `pending-*`: no Helm operation of this chart is running (one worker
 *   per chart; a killed process left it) → `pending-install`: `replace`; `pending-upgrade` /
 *   `pending-rollback`: `rollback` to the newest good revision (or `replace` without one).
 * - A protected release is never replaced: `replace` becomes `blocked`.
 * - `inputsDigest` is a stable digest of everything that defines the release: source identity,
 *   values (key order irrelevant), release name and namespace, release labels.
 */

import { createHash } from 'node:crypto';
import { isPending, lastGoodRevision, type ReleaseRevision } from '../helm/release-state.ts';

/** Release label holding the digest of the inputs the revision was made from. */
export const INPUTS_LABEL = 'armada.airshipit.org/inputs';

export type ReleasePlan =
  | { action: 'install' }
  | { action: 'none'; revision: ReleaseRevision }
  | { action: 'upgrade'; revision: ReleaseRevision }
  | { action: 'rollback'; revision: ReleaseRevision; to: number }
  | { action: 'replace'; revision: ReleaseRevision; why: string }
  | { action: 'blocked'; revision: ReleaseRevision; why: string };

export function planRelease(history: readonly ReleaseRevision[], digest: string, failedInputs: string | undefined, isProtected: boolean): ReleasePlan {
  const latest = history.at(-1);
  if (!latest) return { action: 'install' };
  const replace = (why: string): ReleasePlan =>
    isProtected ? { action: 'blocked', revision: latest, why: `${why}; the release is protected, so the operator does not replace it` } : { action: 'replace', revision: latest, why };
  const upgradeUnlessFailed = (): ReleasePlan =>
    digest === failedInputs
      ? { action: 'blocked', revision: latest, why: 'these inputs already failed to upgrade; change the spec to try again' }
      : { action: 'upgrade', revision: latest };

  if (isPending(latest.status)) {
    if (latest.status === 'pending-install') return replace(`revision ${latest.revision} was left pending-install by an interrupted install`);
    const good = lastGoodRevision(history, latest.revision);
    return good
      ? { action: 'rollback', revision: latest, to: good.revision }
      : replace(`revision ${latest.revision} was left ${latest.status} and no earlier revision is good`);
  }
  if (latest.status === 'deployed') {
    return latest.labels[INPUTS_LABEL] === digest ? { action: 'none', revision: latest } : upgradeUnlessFailed();
  }
  if (latest.status === 'failed') {
    if (lastGoodRevision(history, latest.revision)) return upgradeUnlessFailed();
    if (digest === failedInputs && isProtected) return { action: 'blocked', revision: latest, why: 'the install failed and the release is protected' };
    return replace(`revision ${latest.revision} failed to install`);
  }
  return replace(`revision ${latest.revision} is ${latest.status}`);
}

export function inputsDigest(inputs: { source: Record<string, string>; values: unknown; release: string; namespace: string; labels: Record<string, string> }): string {
  return createHash('sha256').update(canonicalJson(inputs)).digest('hex').slice(0, 40);
}

/** JSON with object keys sorted at every level. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}
