/**
 * Drift: how a release's resources in the cluster differ from what Helm last applied.
 *
 * Guarantees (pure functions):
 * - `manifestObjects(yaml, namespace)` reads `helm get manifest` output into objects, giving
 *   namespaced objects without a namespace the release's.
 * - `findDrift(objects, lookup)` reports, for every object of a kind the operator watches
 *   (`DRIFT_KINDS`: Deployment, StatefulSet, DaemonSet, Service, ConfigMap, ServiceAccount), a
 *   missing object as `deleted` and an object whose `spec`, `data` or labels lack a value the
 *   manifest sets as `edited` (with the first differing field). Fields the manifest does not set
 *   (defaults, status, metadata the server manages) never count. Objects of other kinds are not
 *   checked.
 * - Resources Helm labels (`app.kubernetes.io/managed-by=Helm`) carry the release in the
 *   annotations `meta.helm.sh/release-name` / `-namespace`; `releaseOf` reads them.
 */

import { firstDifference, Kinds, type KubeObject, type ResourceType } from '@iot-operator/runtime';
import { parseAllDocuments } from 'yaml';

/** Label Helm puts on every resource it creates; the operator's caches select on it. */
export const HELM_MANAGED_SELECTOR = 'app.kubernetes.io/managed-by=Helm';
export const RELEASE_NAME_ANNOTATION = 'meta.helm.sh/release-name';
export const RELEASE_NAMESPACE_ANNOTATION = 'meta.helm.sh/release-namespace';

/** Kinds whose objects are watched and checked for drift, by `kind`. */
export const DRIFT_KINDS: Record<string, ResourceType> = {
  Deployment: Kinds.Deployment,
  StatefulSet: Kinds.StatefulSet,
  DaemonSet: Kinds.DaemonSet,
  Service: Kinds.Service,
  ConfigMap: Kinds.ConfigMap,
  ServiceAccount: Kinds.ServiceAccount,
};

export interface Drift {
  /** `<kind>/<name>`, lower-case kind as kubectl prints it, e.g. `deployment/blog-2-testchart`. */
  object: string;
  change: 'deleted' | 'edited';
  /** For `edited`: the first field whose value differs. */
  field?: string;
}

export type Lookup = (type: ResourceType, name: string, namespace: string) => KubeObject | undefined;

export function manifestObjects(manifest: string, namespace: string): KubeObject[] {
  return parseAllDocuments(manifest)
    .map((doc) => doc.toJSON() as KubeObject | null)
    .filter((obj): obj is KubeObject => !!obj && typeof obj === 'object' && typeof obj.kind === 'string' && !!obj.metadata?.name)
    .map((obj) => (obj.metadata.namespace ? obj : { ...obj, metadata: { ...obj.metadata, namespace } }));
}

export function findDrift(objects: readonly KubeObject[], lookup: Lookup): Drift[] {
  const drifts: Drift[] = [];
  for (const desired of objects) {
    const type = DRIFT_KINDS[desired.kind ?? ''];
    if (!type) continue;
    const name = desired.metadata.name!;
    const object = `${type.kind.toLowerCase()}/${name}`;
    const live = lookup(type, name, desired.metadata.namespace ?? '');
    if (!live || live.metadata.deletionTimestamp) {
      drifts.push({ object, change: 'deleted' });
      continue;
    }
    const field = firstDifference(comparable(desired), comparable(live));
    if (field !== undefined) drifts.push({ object, change: 'edited', field });
  }
  return drifts;
}

/** One sentence naming what drifted, e.g. "deployment/x was deleted; service/y was edited (.spec.ports[0].port)". */
export function describeDrift(drifts: readonly Drift[]): string {
  return drifts.map((d) => (d.change === 'deleted' ? `${d.object} was deleted` : `${d.object} was edited (${d.field})`)).join('; ');
}

export function releaseOf(obj: KubeObject): { release: string; namespace: string } | undefined {
  const annotations = obj.metadata.annotations ?? {};
  const release = annotations[RELEASE_NAME_ANNOTATION];
  if (!release) return undefined;
  return { release, namespace: annotations[RELEASE_NAMESPACE_ANNOTATION] ?? obj.metadata.namespace ?? '' };
}

function comparable(obj: KubeObject): Record<string, unknown> {
  return { labels: obj.metadata.labels, spec: obj['spec'], data: obj['data'] };
}
