/**
 * Who owns a Helm release, as the ArmadaChart controller decides before every install, upgrade,
 * rollback or uninstall: the owner (namespace, name and uid of the ArmadaChart) is recorded as
 * release labels on every revision the operator makes.
 *
 * Guarantees (pure): a release whose newest revision names this ArmadaChart's uid is `ours`; one
 * naming its namespace and name without a uid (made before uids were recorded) is `ours` too; one
 * naming another ArmadaChart (another uid, name or namespace) is `other-chart`; one with no owner
 * record (installed with `helm install` by hand, or by another tool) is `unrecorded`; no revision
 * at all is `none`. Only `ours` may be changed; `unrecorded` only when the chart says `adopt`.
 * `previousReleases` lists the other releases recording this chart's uid on a revision (left
 * behind by a renamed `release` or `namespace`), each once.
 */
import type { KubeObject } from '@iot-operator/runtime';
import { releaseRevision } from '../helm/release-state.ts';

/** Release labels naming the ArmadaChart that manages the release. */
export const CHART_NAME_LABEL = 'armada.airshipit.org/chart';
export const CHART_NAMESPACE_LABEL = 'armada.airshipit.org/chart-namespace';
export const CHART_UID_LABEL = 'armada.airshipit.org/chart-uid';

export type ReleaseOwner = { kind: 'none' } | { kind: 'ours' } | { kind: 'unrecorded' } | { kind: 'other-chart'; chart: string };

export function releaseOwner(newestRevisionLabels: Readonly<Record<string, string>> | undefined, chart: KubeObject): ReleaseOwner {
  if (newestRevisionLabels === undefined) return { kind: 'none' };
  const name = newestRevisionLabels[CHART_NAME_LABEL];
  const namespace = newestRevisionLabels[CHART_NAMESPACE_LABEL];
  const uid = newestRevisionLabels[CHART_UID_LABEL];
  if (!name) return { kind: 'unrecorded' };
  const sameName = name === chart.metadata.name && namespace === chart.metadata.namespace;
  if (sameName && (uid === undefined || uid === chart.metadata.uid)) return { kind: 'ours' };
  return { kind: 'other-chart', chart: `${namespace}/${name}${sameName ? ` (uid ${uid}, an earlier ArmadaChart of that name)` : ''}` };
}

/** The owner record written with every revision the operator makes for `chart`. */
export function ownerLabels(chart: KubeObject): Record<string, string> {
  return { [CHART_NAME_LABEL]: chart.metadata.name!, [CHART_NAMESPACE_LABEL]: chart.metadata.namespace!, [CHART_UID_LABEL]: chart.metadata.uid! };
}

/** Releases other than `current` with a revision recording `chart` (by uid) as their owner. */
export function previousReleases(secrets: readonly KubeObject[], chart: KubeObject, current: { release: string; namespace: string }): Array<{ release: string; namespace: string }> {
  const found = new Map<string, { release: string; namespace: string }>();
  for (const secret of secrets) {
    const revision = releaseRevision(secret);
    if (!revision || revision.labels[CHART_UID_LABEL] !== chart.metadata.uid) continue;
    if (revision.release === current.release && revision.namespace === current.namespace) continue;
    found.set(`${revision.namespace}/${revision.release}`, { release: revision.release, namespace: revision.namespace });
  }
  return [...found.values()];
}
