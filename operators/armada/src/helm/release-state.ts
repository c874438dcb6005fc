/**
 * A Helm release's state as Helm itself stores it: one Secret per revision
 * (`sh.helm.release.v1.<release>.v<revision>`, labels `owner=helm`, `name`, `status`,
 * `version`, plus the release's own labels given with `--labels`).
 *
 * Guarantees: pure functions of the Secrets the operator's cache holds (read, never written —
 * only Helm writes them). `releaseHistory` lists the revisions of one release, oldest first;
 * `lastGoodRevision` is the newest `deployed` or `superseded` revision below a given one (what a
 * rollback goes back to). The cache drops the Secrets' payload (`data`): the labels say all the
 * operator needs, so memory holds no rendered manifests.
 */

import type { KubeObject } from '@iot-operator/runtime';

/** Label selector of Helm's release Secrets. */
export const HELM_STORAGE_SELECTOR = 'owner=helm';

export type ReleaseStatus =
  | 'unknown'
  | 'deployed'
  | 'uninstalled'
  | 'superseded'
  | 'failed'
  | 'uninstalling'
  | 'pending-install'
  | 'pending-upgrade'
  | 'pending-rollback';

export interface ReleaseRevision {
  release: string;
  namespace: string;
  revision: number;
  status: ReleaseStatus;
  /** Every label of the revision's Secret, Helm's own and the release's. */
  labels: Record<string, string>;
}

/** The revision a Helm storage Secret records, or undefined for any other Secret. */
export function releaseRevision(secret: KubeObject): ReleaseRevision | undefined {
  const labels = secret.metadata.labels ?? {};
  const revision = Number(labels['version']);
  if (labels['owner'] !== 'helm' || !labels['name'] || !Number.isInteger(revision) || revision < 1) return undefined;
  if (secret.type !== undefined && secret.type !== 'helm.sh/release.v1') return undefined;
  return { release: labels['name'], namespace: secret.metadata.namespace ?? '', revision, status: (labels['status'] ?? 'unknown') as ReleaseStatus, labels };
}

/** The revisions of `release` among `secrets` (already limited to its namespace), oldest first. */
export function releaseHistory(secrets: readonly KubeObject[], release: string): ReleaseRevision[] {
  return secrets
    .map(releaseRevision)
    .filter((r): r is ReleaseRevision => r !== undefined && r.release === release)
    .sort((a, b) => a.revision - b.revision);
}

export function isPending(status: ReleaseStatus): boolean {
  return status.startsWith('pending-');
}

/** The newest deployed or superseded revision older than `below`, or undefined. */
export function lastGoodRevision(history: readonly ReleaseRevision[], below: number): ReleaseRevision | undefined {
  return history.filter((r) => r.revision < below && (r.status === 'deployed' || r.status === 'superseded')).at(-1);
}

/** Keeps a cached Helm Secret's metadata and type only (the payload is a whole rendered release). */
export function withoutPayload(secret: KubeObject): KubeObject {
  const { data: _data, stringData: _stringData, ...rest } = secret;
  return rest;
}
