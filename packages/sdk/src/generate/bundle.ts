/**
 * `operator-ts generate bundle`: OLM bundles and a file-based catalog of an operator project,
 * from its deploy/ and package.json.
 *
 * Layout (registry+v1 bundle format, one directory per version, and one catalog), relative to
 * the project directory:
 *   bundle/<version>/manifests/<package>.clusterserviceversion.yaml
 *   bundle/<version>/manifests/<group>_<plural>.yaml        (each CRD)
 *   bundle/<version>/metadata/annotations.yaml
 *   bundle/<version>/bundle.Dockerfile                        (build context: that directory)
 *   catalog/<package>/catalog.yaml                            (olm.package, olm.channel, olm.bundle)
 *
 * Sources: every manifest in deploy/ and deploy/crds/, the CSV base deploy/olm/csv-base.yaml and
 * the icon deploy/olm/icon.svg (see csv.ts for what goes where). Without a CSV base (a project
 * made by `operator-ts init`), package.json gives it: the package name (its npm name without a
 * scope), description and keywords, and the install modes of an operator watching one namespace.
 * package.json's version is the bundle version when none is given.
 *
 * Guarantees: rendering is deterministic (no timestamps), so `expectedOperatorFiles` re-renders
 * every committed bundle from its own recorded inputs (version, replaces, channel, image) plus
 * today's deploy/, and the catalog from all bundles; `--check` and tests compare that with the
 * files on disk. `generateBundle` refuses a `replaces` whose bundle is not committed, and writes
 * nothing when the CSV cannot be built. The bundle image of a release is its operator image with
 * `-bundle` appended to the repository (registry.example.com/memcached-operator:v0.0.2 ->
 * registry.example.com/memcached-operator-bundle:v0.0.2).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { clusterServiceVersion, compareSemver, CSV_API_VERSION, csvName, isSemver, packageName, type Json, type JsonObject, type Manifest } from './csv.ts';
import { writeOrCheck } from './generate.ts';

export const DEFAULT_CHANNEL = 'alpha';
export const DEFAULT_REGISTRY = 'registry.example.com';
const MEDIATYPE = 'registry+v1';
const GENERATED_BY = '`operator-ts generate bundle`';

export interface BundleOptions {
  version: string;
  replaces?: string;
  channel?: string;
  /** Operator image; default <DEFAULT_REGISTRY>/<first Deployment's name>:v<version>. */
  image?: string;
}

export interface OperatorSources {
  operatorDir: string;
  base: JsonObject;
  manifests: Manifest[];
  icon?: { base64data: string; mediatype: string };
}

/** Relative path (from the operator's directory) -> file content. */
export type Files = Map<string, string>;

function yamlFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .map((f) => path.join(dir, f));
}

function readManifests(file: string, operatorDir: string): Manifest[] {
  const rel = path.relative(operatorDir, file);
  return parseAllDocuments(readFileSync(file, 'utf8')).flatMap((doc) => {
    if (doc.errors.length) throw new Error(`${rel}: ${doc.errors[0]!.message}`);
    const object = doc.toJSON() as Json;
    if (object === null) return [];
    if (typeof object !== 'object' || Array.isArray(object) || typeof object.kind !== 'string') throw new Error(`${rel}: a document is not a Kubernetes object (no kind)`);
    return [{ file: rel, object }];
  });
}

interface PackageManifest {
  name?: string;
  version?: string;
  description?: string;
  keywords?: string[];
}

function readPackageManifest(operatorDir: string): PackageManifest {
  const file = path.join(operatorDir, 'package.json');
  if (!existsSync(file)) throw new Error(`${file} is missing: run this command in an operator project`);
  return JSON.parse(readFileSync(file, 'utf8')) as PackageManifest;
}

/** The bundle version when none is given: package.json's. */
export function packageVersion(operatorDir: string): string {
  const { version } = readPackageManifest(operatorDir);
  if (!version) throw new Error('package.json has no version: give the bundle version with --version');
  return version;
}

/** The CSV base of a project without deploy/olm/csv-base.yaml, from its package.json. */
export function defaultCsvBase(manifest: PackageManifest): JsonObject {
  const name = (manifest.name ?? '').replace(/^@[^/]+\//, '');
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    throw new Error(`package.json's name "${manifest.name ?? ''}" cannot name an OLM package (a DNS label): write deploy/olm/csv-base.yaml with the package name as metadata.name`);
  }
  return {
    apiVersion: CSV_API_VERSION,
    kind: 'ClusterServiceVersion',
    metadata: { name, annotations: { capabilities: 'Basic Install', ...(manifest.description ? { description: manifest.description } : {}) } },
    spec: {
      displayName: name,
      ...(manifest.description ? { description: manifest.description } : {}),
      ...(manifest.keywords?.length ? { keywords: manifest.keywords } : {}),
      // deploy/operator.yaml watches the namespace it runs in (WATCH_NAMESPACE = olm.targetNamespaces).
      installModes: [
        { type: 'OwnNamespace', supported: true },
        { type: 'SingleNamespace', supported: true },
        { type: 'MultiNamespace', supported: false },
        { type: 'AllNamespaces', supported: false },
      ],
    },
  };
}

export function loadOperatorSources(operatorDir: string): OperatorSources {
  const deploy = path.join(operatorDir, 'deploy');
  if (!existsSync(deploy)) throw new Error(`${deploy} is missing: run this command in an operator project`);
  const baseFile = path.join(deploy, 'olm', 'csv-base.yaml');
  const base = existsSync(baseFile) ? (parse(readFileSync(baseFile, 'utf8')) as JsonObject) : defaultCsvBase(readPackageManifest(operatorDir));
  const manifests = [...yamlFiles(deploy), ...yamlFiles(path.join(deploy, 'crds'))].flatMap((f) => readManifests(f, operatorDir));
  const iconFile = path.join(deploy, 'olm', 'icon.svg');
  const icon = existsSync(iconFile) ? { base64data: readFileSync(iconFile).toString('base64'), mediatype: 'image/svg+xml' } : undefined;
  return { operatorDir, base, manifests, ...(icon ? { icon } : {}) };
}

function firstDeploymentName(sources: OperatorSources): string {
  const d = sources.manifests.find((m) => m.object.kind === 'Deployment');
  return String((d?.object.metadata as JsonObject | undefined)?.name ?? packageName(sources.base));
}

export function defaultImage(sources: OperatorSources, version: string): string {
  return `${DEFAULT_REGISTRY}/${firstDeploymentName(sources)}:v${version}`;
}

export function bundleImageOf(image: string): string {
  const at = image.lastIndexOf(':');
  const slash = image.lastIndexOf('/');
  return at > slash ? `${image.slice(0, at)}-bundle${image.slice(at)}` : `${image}-bundle`;
}

function header(what: string): string {
  return `# ${what}\n# Generated by ${GENERATED_BY} from deploy/; do not edit.\n`;
}

function crdFileName(crd: JsonObject): string {
  const spec = crd.spec as JsonObject;
  return `${String(spec.group)}_${String((spec.names as JsonObject).plural)}.yaml`;
}

/** The files of one bundle, relative to the operator's directory. */
export function renderBundle(sources: OperatorSources, options: BundleOptions): Files {
  const channel = options.channel ?? DEFAULT_CHANNEL;
  if (!/^[a-z0-9][a-z0-9.-]*$/.test(channel)) throw new Error(`channel "${channel}" is not a valid channel name (lower-case letters, digits, '.', '-')`);
  const image = options.image ?? defaultImage(sources, options.version);
  const csv = clusterServiceVersion({ base: sources.base, manifests: sources.manifests, version: options.version, ...(options.replaces ? { replaces: options.replaces } : {}), image, ...(sources.icon ? { icon: sources.icon } : {}) });
  const pkg = packageName(sources.base);
  const dir = path.join('bundle', options.version);
  const files: Files = new Map();
  files.set(path.join(dir, 'manifests', `${pkg}.clusterserviceversion.yaml`), header(`ClusterServiceVersion ${String((csv.metadata as JsonObject).name)}.`) + stringify(csv, { lineWidth: 0 }));
  for (const crd of sources.manifests.filter((m) => m.object.kind === 'CustomResourceDefinition')) {
    files.set(path.join(dir, 'manifests', crdFileName(crd.object)), header(`CustomResourceDefinition ${String((crd.object.metadata as JsonObject).name)}.`) + stringify(crd.object, { lineWidth: 0 }));
  }
  const labels: Record<string, string> = {
    'operators.operatorframework.io.bundle.mediatype.v1': MEDIATYPE,
    'operators.operatorframework.io.bundle.manifests.v1': 'manifests/',
    'operators.operatorframework.io.bundle.metadata.v1': 'metadata/',
    'operators.operatorframework.io.bundle.package.v1': pkg,
    'operators.operatorframework.io.bundle.channels.v1': channel,
    'operators.operatorframework.io.bundle.channel.default.v1': channel,
  };
  files.set(path.join(dir, 'metadata', 'annotations.yaml'), header(`Bundle ${pkg} ${options.version}.`) + stringify({ annotations: labels }));
  files.set(
    path.join(dir, 'bundle.Dockerfile'),
    [
      `# The bundle image of ${pkg} ${options.version} (${bundleImageOf(image)}); build it from this directory.`,
      `# Generated by ${GENERATED_BY}; do not edit.`,
      'FROM scratch',
      ...Object.entries(labels).map(([k, v]) => `LABEL ${k}=${v}`),
      'COPY manifests /manifests/',
      'COPY metadata /metadata/',
      '',
    ].join('\n'),
  );
  return files;
}

/** What a committed bundle records about how it was made. */
export interface CommittedBundle {
  options: Required<Pick<BundleOptions, 'version' | 'channel' | 'image'>> & Pick<BundleOptions, 'replaces'>;
  csv: JsonObject;
  crds: JsonObject[];
  /** Relative paths of all its files. */
  files: string[];
}

function listFiles(dir: string, rel = ''): string[] {
  return readdirSync(path.join(dir, rel), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? listFiles(dir, path.join(rel, e.name)) : [path.join(rel, e.name)]))
    .sort();
}

export function readCommittedBundles(operatorDir: string, pkg: string): CommittedBundle[] {
  const root = path.join(operatorDir, 'bundle');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((v) => isSemver(v))
    .sort(compareSemver)
    .map((version) => {
      const dir = path.join(root, version);
      const rel = (f: string) => path.join('bundle', version, f);
      const manifests = yamlFiles(path.join(dir, 'manifests')).map((f) => parse(readFileSync(f, 'utf8')) as JsonObject);
      const csv = manifests.find((m) => m.kind === 'ClusterServiceVersion');
      if (!csv) throw new Error(`${rel('manifests')}: no ClusterServiceVersion`);
      const spec = csv.spec as JsonObject;
      if (spec.version !== version) throw new Error(`${rel('manifests')}: the CSV says version ${String(spec.version)}, its directory ${version}`);
      const annotations = (parse(readFileSync(path.join(dir, 'metadata', 'annotations.yaml'), 'utf8')) as { annotations: Record<string, string> }).annotations;
      const replaces = typeof spec.replaces === 'string' ? spec.replaces.replace(`${pkg}.v`, '') : undefined;
      const image = String(((csv.metadata as JsonObject).annotations as JsonObject).containerImage);
      return {
        options: { version, channel: annotations['operators.operatorframework.io.bundle.channels.v1']!, image, ...(replaces ? { replaces } : {}) },
        csv,
        crds: manifests.filter((m) => m.kind === 'CustomResourceDefinition'),
        files: listFiles(dir).map(rel),
      };
    });
}

function base64Json(value: Json): string {
  return Buffer.from(JSON.stringify(value)).toString('base64');
}

/** The file-based catalog of a package: its channels, each bundle with its upgrade edge. */
export function renderCatalog(pkg: string, bundles: CommittedBundle[]): string {
  if (bundles.length === 0) throw new Error(`no bundles of ${pkg} to put in a catalog`);
  const latest = bundles.at(-1)!;
  const latestSpec = latest.csv.spec as JsonObject;
  const icon = (latestSpec.icon as JsonObject[] | undefined)?.[0];
  const channels = [...new Set(bundles.map((b) => b.options.channel))].sort();
  const docs: JsonObject[] = [
    {
      schema: 'olm.package',
      name: pkg,
      defaultChannel: latest.options.channel,
      ...(typeof latestSpec.description === 'string' ? { description: latestSpec.description } : {}),
      ...(icon ? { icon } : {}),
    },
    ...channels.map((channel) => ({
      schema: 'olm.channel',
      package: pkg,
      name: channel,
      entries: bundles
        .filter((b) => b.options.channel === channel)
        .map((b) => ({ name: csvName(pkg, b.options.version), ...(b.options.replaces ? { replaces: csvName(pkg, b.options.replaces) } : {}) })),
    })),
    ...bundles.map((b) => {
      const bundleImage = bundleImageOf(b.options.image);
      const gvks = b.crds.flatMap((crd) => {
        const spec = crd.spec as JsonObject;
        return (spec.versions as JsonObject[]).map((v) => ({ type: 'olm.gvk', value: { group: spec.group!, kind: (spec.names as JsonObject).kind!, version: v.name! } }));
      });
      const deploymentImages = ((((b.csv.spec as JsonObject).install as JsonObject).spec as JsonObject).deployments as JsonObject[]).flatMap((d) =>
        (((((d.spec as JsonObject).template as JsonObject).spec as JsonObject).containers as JsonObject[]) ?? []).map((c) => ({ name: String(c.name), image: String(c.image) })),
      );
      return {
        schema: 'olm.bundle',
        name: csvName(pkg, b.options.version),
        package: pkg,
        image: bundleImage,
        properties: [
          ...gvks,
          { type: 'olm.package', value: { packageName: pkg, version: b.options.version } },
          { type: 'olm.bundle.object', value: { data: base64Json(b.csv) } },
          ...b.crds.map((crd) => ({ type: 'olm.bundle.object', value: { data: base64Json(crd) } })),
        ],
        relatedImages: [{ name: '', image: bundleImage }, ...deploymentImages],
      } as JsonObject;
    }),
  ];
  return header(`File-based catalog of package ${pkg}: every bundle in bundle/.`) + docs.map((d) => `---\n${stringify(d, { lineWidth: 0 })}`).join('');
}

export function catalogPath(pkg: string): string {
  return path.join('catalog', pkg, 'catalog.yaml');
}

/** Every generated file as today's sources make it: each committed bundle and the catalog. */
export function expectedOperatorFiles(operatorDir: string): Files {
  const sources = loadOperatorSources(operatorDir);
  const pkg = packageName(sources.base);
  const bundles = readCommittedBundles(operatorDir, pkg);
  const files: Files = new Map();
  for (const b of bundles) for (const [f, content] of renderBundle(sources, b.options)) files.set(f, content);
  if (bundles.length) files.set(catalogPath(pkg), renderCatalog(pkg, bundles));
  return files;
}

/** The command that rewrites a stale bundle, for messages. */
const REGENERATE = 'operator-ts generate bundle --version <version> [--replaces <version>]';

/**
 * `--check`: fails naming every file under bundle/ and catalog/ that differs from what today's
 * deploy/ makes, is missing, or is made by no committed bundle; returns the versions checked.
 */
export function checkBundles(operatorDir: string): string[] {
  const expected = expectedOperatorFiles(operatorDir);
  const committed = ['bundle', 'catalog'].flatMap((dir) => (existsSync(path.join(operatorDir, dir)) ? listFiles(operatorDir, dir) : []));
  const unexpected = committed.filter((file) => !expected.has(file));
  if (unexpected.length > 0) throw new Error(`${unexpected.join(', ')}: made by no committed bundle from deploy/; remove ${unexpected.length > 1 ? 'them' : 'it'} or run \`${REGENERATE}\``);
  writeOrCheck(operatorDir, Object.fromEntries(expected), true, REGENERATE);
  return [...new Set([...expected.keys()].filter((file) => file.startsWith(`bundle${path.sep}`)).map((file) => file.split(path.sep)[1]!))];
}

/** Writes bundle/<version>/ (replacing what was there) and regenerates the catalog; returns the written paths. */
export function generateBundle(operatorDir: string, options: BundleOptions): string[] {
  const sources = loadOperatorSources(operatorDir);
  const pkg = packageName(sources.base);
  if (options.replaces !== undefined && !existsSync(path.join(operatorDir, 'bundle', options.replaces))) {
    throw new Error(`--replaces ${options.replaces}: there is no bundle ${path.join(path.relative(process.cwd(), operatorDir), 'bundle', options.replaces)} to upgrade from`);
  }
  const files = renderBundle(sources, options);
  rmSync(path.join(operatorDir, 'bundle', options.version), { recursive: true, force: true });
  const write = (rel: string, content: string) => {
    mkdirSync(path.dirname(path.join(operatorDir, rel)), { recursive: true });
    writeFileSync(path.join(operatorDir, rel), content);
  };
  for (const [rel, content] of files) write(rel, content);
  const catalog = catalogPath(pkg);
  write(catalog, renderCatalog(pkg, readCommittedBundles(operatorDir, pkg)));
  return [...files.keys(), catalog];
}
