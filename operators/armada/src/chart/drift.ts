/**
 * Drift: how a release's resources in the cluster differ from what Helm last applied.
 *
 * Guarantees (pure functions):
 * - `manifestObjects(yaml, namespace)` reads `helm get manifest` output into objects, giving
 *   namespaced objects without a namespace the release's.
 * - `findDrift(objects, lookup, ignore)` reports, for every object of a kind the operator watches
 *   (`DRIFT_KINDS`: Deployment, StatefulSet, DaemonSet, Service, ConfigMap, ServiceAccount), a
 *   missing object as `deleted` and an object whose `spec`, `data` or labels lack a value the
 *   manifest sets as `edited` (with every differing field, as the server would see them after a
 *   dry-run apply of the manifest): fields the manifest does not set (defaults, status, metadata
 *   the server manages) never count, nor a quantity written another way (`0.5` and `500m`, `1Gi`
 *   and `1073741824`), nor a field under an `ignore` rule's JSON pointer for that object. Objects
 *   of other kinds are not checked.
 * - `ownedByOtherController(live)` tells the fields of a live object that another controller owns
 *   (its managedFields: written through a subresource such as `scale` — an autoscaler — or by a
 *   known controller), which are not drift either.
 * - Resources Helm labels (`app.kubernetes.io/managed-by=Helm`) carry the release in the
 *   annotations `meta.helm.sh/release-name` / `-namespace`; `releaseOf` reads them.
 */

import { Kinds, type KubeObject, type ResourceType } from '@iot-operator/runtime';
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
  /** For `edited`: every field whose value differs, e.g. `.spec.ports[0].port`. */
  fields?: string[];
}

/** A path into an object: keys and list indexes. */
export type FieldPath = Array<string | number>;

/** Fields of some objects of a release that are never drift (Flux's drift `ignore` rules). */
export interface IgnoreRule {
  /** JSON pointers, e.g. `/spec/replicas`: the field and everything under it. */
  paths: string[];
  /** Which objects (default: every object of the release). */
  target?: { kind?: string; name?: string };
}

export type Lookup = (type: ResourceType, name: string, namespace: string) => KubeObject | undefined;

export function manifestObjects(manifest: string, namespace: string): KubeObject[] {
  return parseAllDocuments(manifest)
    .map((doc) => doc.toJSON() as KubeObject | null)
    .filter((obj): obj is KubeObject => !!obj && typeof obj === 'object' && typeof obj.kind === 'string' && !!obj.metadata?.name)
    .map((obj) => (obj.metadata.namespace ? obj : { ...obj, metadata: { ...obj.metadata, namespace } }));
}

export function findDrift(objects: readonly KubeObject[], lookup: Lookup, ignore: readonly IgnoreRule[] = []): Drift[] {
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
    const ignored = ignore.filter((rule) => (!rule.target?.kind || rule.target.kind === desired.kind) && (!rule.target?.name || rule.target.name === name)).flatMap((rule) => rule.paths.map(pointerPath));
    const paths = differences(comparable(desired), comparable(live)).filter((path) => !ignored.some((prefix) => startsWith(path, prefix)));
    if (paths.length > 0) drifts.push({ object, change: 'edited', fields: paths.map(formatPath) });
  }
  return drifts;
}

/** One sentence naming what drifted, e.g. "deployment/x was deleted; service/y was edited (.spec.ports[0].port)". */
export function describeDrift(drifts: readonly Drift[]): string {
  return drifts.map((d) => (d.change === 'deleted' ? `${d.object} was deleted` : `${d.object} was edited (${d.fields!.join(', ')})`)).join('; ');
}

/** Every path where `observed` lacks a value `desired` sets (quantities compared by value). */
export function differences(desired: unknown, observed: unknown, path: FieldPath = [], found: FieldPath[] = []): FieldPath[] {
  if (desired === undefined) return found;
  if (Array.isArray(desired)) {
    if (observed === undefined && desired.length === 0) return found;
    if (!Array.isArray(observed) || observed.length !== desired.length) found.push(path);
    else desired.forEach((item, i) => differences(item, observed[i], [...path, i], found));
    return found;
  }
  if (typeof desired === 'object' && desired !== null) {
    if (observed === undefined && Object.keys(desired).length === 0) return found;
    if (typeof observed !== 'object' || observed === null || Array.isArray(observed)) found.push(path);
    else for (const [key, value] of Object.entries(desired)) differences(value, (observed as Record<string, unknown>)[key], [...path, key], found);
    return found;
  }
  if (desired !== observed && !sameQuantity(desired, observed)) found.push(path);
  return found;
}

const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)|[eE]([+-]?\d+))?$/;
const SUFFIX: Record<string, number> = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

/** A Kubernetes quantity's value (`500m` → 0.5), or undefined for anything else. */
export function quantityValue(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return undefined;
  const match = QUANTITY.exec(value.trim());
  if (!match) return undefined;
  const number = Number(match[1]);
  return match[2] ? number * SUFFIX[match[2]]! : match[3] ? number * 10 ** Number(match[3]) : number;
}

function sameQuantity(a: unknown, b: unknown): boolean {
  if (typeof a !== 'string' && typeof b !== 'string') return false; // two numbers: compared as they are
  const x = quantityValue(a);
  const y = quantityValue(b);
  return x !== undefined && y !== undefined && Math.abs(x - y) <= Math.abs(x) * 1e-9;
}

/** Managers that are controllers of their own (not people editing by hand). */
const OTHER_CONTROLLERS = new Set(['kube-controller-manager', 'vpa-updater', 'vpa-recommender', 'cluster-autoscaler', 'keda-operator']);

/**
 * Whether a field of `live` is owned by another controller, read from its managedFields: an
 * entry written through a subresource (`scale`: an autoscaler) or by a known controller.
 */
export function ownedByOtherController(live: KubeObject): (path: FieldPath) => boolean {
  const entries = (live.metadata.managedFields ?? []) as Array<{ manager?: string; subresource?: string; fieldsV1?: unknown }>;
  const sets = entries
    .filter((entry) => entry.manager !== 'helm' && (entry.subresource || OTHER_CONTROLLERS.has(entry.manager ?? '')))
    .map((entry) => entry.fieldsV1 as Record<string, unknown> | undefined)
    .filter((set): set is Record<string, unknown> => !!set);
  return (path) =>
    sets.some((set) => {
      let node: unknown = set;
      for (const segment of path) {
        if (typeof segment !== 'string' || typeof node !== 'object' || node === null) return false;
        node = (node as Record<string, unknown>)[`f:${segment}`];
        if (node === undefined) return false;
      }
      return true;
    });
}

/** `.spec.ports[0].port` from ['spec', 'ports', 0, 'port']. */
export function formatPath(path: FieldPath): string {
  return path.map((segment) => (typeof segment === 'number' ? `[${segment}]` : `.${segment}`)).join('') || '/';
}

/** ['spec', 'replicas'] from `/spec/replicas` (RFC 6901; numeric segments are list indexes). */
export function pointerPath(pointer: string): FieldPath {
  return pointer
    .split('/')
    .slice(1)
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'))
    .map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
}

/** Back from a formatted path to its segments. */
export function parseFormattedPath(formatted: string): FieldPath {
  return [...formatted.matchAll(/\.([^.[]+)|\[(\d+)\]/g)].map((m) => (m[2] !== undefined ? Number(m[2]) : m[1]!));
}

function startsWith(path: FieldPath, prefix: FieldPath): boolean {
  return prefix.length <= path.length && prefix.every((segment, i) => segment === path[i]);
}

export function releaseOf(obj: KubeObject): { release: string; namespace: string } | undefined {
  const annotations = obj.metadata.annotations ?? {};
  const release = annotations[RELEASE_NAME_ANNOTATION];
  if (!release) return undefined;
  return { release, namespace: annotations[RELEASE_NAMESPACE_ANNOTATION] ?? obj.metadata.namespace ?? '' };
}

function comparable(obj: KubeObject): Record<string, unknown> {
  return { metadata: { labels: obj.metadata.labels }, spec: obj['spec'], data: obj['data'] };
}
