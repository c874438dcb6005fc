/**
 * The ClusterServiceVersion of an operator, built from its own deploy/ manifests.
 *
 * Guarantees: `clusterServiceVersion(input)` is a pure, deterministic function. It starts from
 * the operator's hand-written CSV base (presentation, install modes, minKubeVersion, descriptor
 * hints) and fills in what the manifests already say:
 * - the install strategy `deployment` with each Deployment of deploy/, its `REPLACE_IMAGE`
 *   containers set to the release image and `WATCH_NAMESPACE` taken from the
 *   `olm.targetNamespaces` annotation that OLM puts on the pods;
 * - `permissions` from each Role bound to a ServiceAccount by a RoleBinding, and
 *   `clusterPermissions` from each ClusterRole bound by a ClusterRoleBinding;
 * - one owned CRD per served version of each CRD, with the schema's descriptions for the CRD and
 *   for every top-level spec and status field (display names and x-descriptors from the base);
 * - `alm-examples` from the example objects, `version`, `replaces` and the icon.
 * Input that cannot make a sound CSV (no Deployment, a Deployment whose ServiceAccount is not in
 * the manifests, a binding to a role that is not there, a descriptor for a field the schema does
 * not have, an unknown kind, a bad version) throws an Error naming the file and what to fix;
 * nothing is silently dropped.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** One parsed manifest and the file it came from (for error messages). */
export interface Manifest {
  file: string;
  object: JsonObject;
}

export interface CsvInput {
  /** The hand-written base: a partial ClusterServiceVersion whose metadata.name is the package name. */
  base: JsonObject;
  /** Every manifest of deploy/ (Deployments, ServiceAccounts, RBAC) and deploy/crds/ (CRDs and examples). */
  manifests: Manifest[];
  version: string;
  /** The version this one upgrades, if any. */
  replaces?: string;
  /** The operator image written into the Deployment's REPLACE_IMAGE containers. */
  image: string;
  icon?: { base64data: string; mediatype: string };
}

export const CSV_API_VERSION = 'operators.coreos.com/v1alpha1';
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;
const IMAGE_PLACEHOLDER = 'REPLACE_IMAGE';
const TARGET_NAMESPACES_FIELD = "metadata.annotations['olm.targetNamespaces']";
/** Kinds of deploy/ that the CSV carries (examples and CRDs are recognised by their group). */
const CSV_KINDS = new Set(['Deployment', 'ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding']);

export function isSemver(version: string): boolean {
  return SEMVER.test(version);
}

/** Compares two semantic versions by major, minor, patch (pre-releases before their release). */
export function compareSemver(a: string, b: string): number {
  const parse = (v: string) => {
    const [core, pre] = v.split('+')[0]!.split(/-(.*)/s);
    return { nums: core!.split('.').map(Number), pre };
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < 3; i++) if (x.nums[i] !== y.nums[i]) return x.nums[i]! - y.nums[i]!;
  if (x.pre === y.pre) return 0;
  if (x.pre === undefined) return 1;
  if (y.pre === undefined) return -1;
  return x.pre < y.pre ? -1 : 1;
}

export function packageName(base: JsonObject): string {
  const name = (base.metadata as JsonObject | undefined)?.name;
  if (typeof name !== 'string' || !name) throw new Error('the CSV base has no metadata.name (the package name)');
  return name;
}

export function csvName(pkg: string, version: string): string {
  return `${pkg}.v${version}`;
}

function obj(value: Json | undefined): JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {};
}

function arr(value: Json | undefined): Json[] {
  return Array.isArray(value) ? value : [];
}

function str(value: Json | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function clone<T extends Json>(value: T): T {
  return structuredClone(value);
}

function nameOf(m: Manifest): string {
  const name = str(obj(m.object.metadata).name);
  if (!name) throw new Error(`${m.file}: ${String(m.object.kind)} has no metadata.name`);
  return name;
}

function titleCase(path: string): string {
  const words = path.replace(/([a-z0-9])([A-Z])/g, '$1 $2').split(/[\s_.-]+/);
  return words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(' ');
}

/** The Deployment as the install strategy carries it: image set, WATCH_NAMESPACE from OLM. */
function strategyDeployment(m: Manifest, image: string): JsonObject {
  const spec = clone(obj(m.object.spec));
  const podSpec = obj(obj(spec.template).spec);
  const containers = arr(podSpec.containers).map(obj);
  let placed = 0;
  for (const container of containers) {
    if (container.image === IMAGE_PLACEHOLDER) {
      container.image = image;
      placed++;
    }
    for (const env of arr(container.env).map(obj)) {
      if (env.name === 'WATCH_NAMESPACE') env.valueFrom = { fieldRef: { fieldPath: TARGET_NAMESPACES_FIELD } };
    }
  }
  if (placed === 0) throw new Error(`${m.file}: no container of Deployment ${nameOf(m)} has image ${IMAGE_PLACEHOLDER}, so the release image has no place`);
  const labels = obj(obj(m.object.metadata).labels);
  return { name: nameOf(m), ...(Object.keys(labels).length ? { label: labels } : {}), spec };
}

interface Rbac {
  permissions: JsonObject[];
  clusterPermissions: JsonObject[];
}

/** permissions / clusterPermissions: the rules of each bound role, per ServiceAccount. */
function rbac(byKind: Map<string, Manifest[]>, serviceAccounts: Set<string>): Rbac {
  const roles = new Map((byKind.get('Role') ?? []).map((m) => [nameOf(m), m]));
  const clusterRoles = new Map((byKind.get('ClusterRole') ?? []).map((m) => [nameOf(m), m]));
  const collect = (bindingKind: string, roleKind: string, known: Map<string, Manifest>): JsonObject[] => {
    const rulesByAccount = new Map<string, Json[]>();
    for (const binding of byKind.get(bindingKind) ?? []) {
      const ref = obj(binding.object.roleRef);
      const role = known.get(str(ref.name) ?? '');
      if (ref.kind !== roleKind || !role) throw new Error(`${binding.file}: ${bindingKind} ${nameOf(binding)} refers to ${String(ref.kind)} ${String(ref.name)}, which is not among the manifests`);
      for (const subject of arr(binding.object.subjects).map(obj)) {
        if (subject.kind !== 'ServiceAccount') continue;
        const account = str(subject.name)!;
        if (!serviceAccounts.has(account)) throw new Error(`${binding.file}: ServiceAccount ${account} is not among the manifests`);
        rulesByAccount.set(account, [...(rulesByAccount.get(account) ?? []), ...clone(arr(role.object.rules))]);
      }
    }
    return [...rulesByAccount].map(([serviceAccountName, rules]) => ({ serviceAccountName, rules }));
  };
  return { permissions: collect('RoleBinding', 'Role', roles), clusterPermissions: collect('ClusterRoleBinding', 'ClusterRole', clusterRoles) };
}

/** Descriptors of the top-level fields of a schema section, hints (display name, x-descriptors) from the base. */
function descriptors(section: JsonObject, hints: JsonObject[], where: string): JsonObject[] {
  const properties = obj(section.properties);
  for (const hint of hints) {
    const path = str(hint.path);
    if (!path || !(path in properties)) throw new Error(`${where}: the CSV base describes path "${String(hint.path)}", which the CRD's schema does not have (it has: ${Object.keys(properties).join(', ') || 'nothing'})`);
  }
  return Object.keys(properties)
    .sort()
    .map((path) => {
      const hint = hints.find((h) => h.path === path) ?? {};
      const description = str(obj(properties[path]).description);
      return {
        path,
        displayName: str(hint.displayName) ?? titleCase(path),
        ...(description ? { description } : {}),
        ...(hint['x-descriptors'] ? { 'x-descriptors': clone(hint['x-descriptors']) } : {}),
      };
    });
}

/** One owned entry per served version of each CRD. */
function ownedCrds(crds: Manifest[], baseOwned: JsonObject[]): JsonObject[] {
  const owned: JsonObject[] = [];
  for (const crd of crds) {
    const name = nameOf(crd);
    const spec = obj(crd.object.spec);
    const kind = str(obj(spec.names).kind);
    if (!kind) throw new Error(`${crd.file}: CRD ${name} has no spec.names.kind`);
    for (const version of arr(spec.versions).map(obj).filter((v) => v.served === true)) {
      const schema = obj(obj(version.schema).openAPIV3Schema);
      const hint = baseOwned.find((o) => o.name === name && o.version === version.name) ?? {};
      const where = `${crd.file} (${name} ${String(version.name)})`;
      const description = str(hint.description) ?? str(schema.description);
      owned.push({
        name,
        version: str(version.name)!,
        kind,
        displayName: str(hint.displayName) ?? kind,
        ...(description ? { description } : {}),
        ...(hint.resources ? { resources: clone(hint.resources) } : {}),
        specDescriptors: descriptors(obj(obj(schema.properties).spec), arr(hint.specDescriptors).map(obj), where),
        statusDescriptors: descriptors(obj(obj(schema.properties).status), arr(hint.statusDescriptors).map(obj), where),
      });
    }
  }
  for (const hint of baseOwned) {
    if (!owned.some((o) => o.name === hint.name && o.version === hint.version)) {
      throw new Error(`the CSV base describes owned CRD ${String(hint.name)} ${String(hint.version)}, which no CRD in deploy/crds/ serves`);
    }
  }
  return owned;
}

export function clusterServiceVersion(input: CsvInput): JsonObject {
  const { base, manifests, version, replaces, image, icon } = input;
  const pkg = packageName(base);
  if (!isSemver(version)) throw new Error(`version "${version}" is not a semantic version (e.g. 0.0.2)`);
  if (replaces !== undefined) {
    if (!isSemver(replaces)) throw new Error(`replaces "${replaces}" is not a semantic version (e.g. 0.0.1)`);
    if (compareSemver(replaces, version) >= 0) throw new Error(`version ${version} cannot replace ${replaces}: an upgrade goes to a higher version`);
  }

  const byKind = new Map<string, Manifest[]>();
  const examples: Manifest[] = [];
  const crds = manifests.filter((m) => m.object.kind === 'CustomResourceDefinition');
  const ownedGroups = new Set(crds.map((m) => str(obj(m.object.spec).group)));
  for (const m of manifests) {
    const kind = str(m.object.kind) ?? '';
    const group = (str(m.object.apiVersion) ?? '').split('/').slice(0, -1).join('/');
    if (kind === 'CustomResourceDefinition') continue;
    if (ownedGroups.has(group)) examples.push(m);
    else if (CSV_KINDS.has(kind)) byKind.set(kind, [...(byKind.get(kind) ?? []), m]);
    else throw new Error(`${m.file}: a ${kind || 'manifest without kind'} has no place in a ClusterServiceVersion; move it out of deploy/ or teach the generator about it`);
  }

  const deployments = byKind.get('Deployment') ?? [];
  if (deployments.length === 0) throw new Error('no Deployment among the manifests: the CSV needs one to install the operator');
  const serviceAccounts = new Set((byKind.get('ServiceAccount') ?? []).map(nameOf));
  for (const d of deployments) {
    const account = str(obj(obj(obj(d.object.spec).template).spec).serviceAccountName);
    if (!account || !serviceAccounts.has(account)) {
      throw new Error(`${d.file}: Deployment ${nameOf(d)} runs as ServiceAccount ${account ?? '<none>'}, which is not among the manifests (${[...serviceAccounts].join(', ') || 'none'})`);
    }
  }
  const { permissions, clusterPermissions } = rbac(byKind, serviceAccounts);

  const baseMetadata = obj(base.metadata);
  const baseSpec = obj(base.spec);
  const owned = ownedCrds(crds, arr(obj(baseSpec.customresourcedefinitions).owned).map(obj));
  const almExamples = examples.map((m) => {
    const example = clone(m.object);
    delete obj(example.metadata).namespace;
    return example;
  });

  const spec: JsonObject = {
    ...clone(baseSpec),
    version,
    ...(replaces !== undefined ? { replaces: csvName(pkg, replaces) } : {}),
    ...(icon ? { icon: [{ base64data: icon.base64data, mediatype: icon.mediatype }] } : {}),
    customresourcedefinitions: { owned },
    install: {
      strategy: 'deployment',
      spec: {
        ...(permissions.length ? { permissions } : {}),
        ...(clusterPermissions.length ? { clusterPermissions } : {}),
        deployments: deployments.map((d) => strategyDeployment(d, image)),
      },
    },
  };
  return {
    apiVersion: CSV_API_VERSION,
    kind: 'ClusterServiceVersion',
    metadata: {
      name: csvName(pkg, version),
      annotations: {
        ...clone(obj(baseMetadata.annotations)),
        'alm-examples': JSON.stringify(almExamples, null, 2),
        containerImage: image,
      },
    },
    spec,
  };
}
