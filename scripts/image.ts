/**
 * Operator images, tagged as the seed tags them: `npm run image:tag` prints the version of the
 * last commit, `yyyyMMdd-HHmmss.<abbreviated commit>` (`git log -1 --format=%cd.%h
 * --date=format:%Y%m%d-%H%M%S`, the commit date in UTC); `npm run image:build [-- <operator>]`
 * builds `operators/<operator>/Dockerfile` (default `iot`) from the repository root as
 * `<registry>/<operator>-operator:<version>` with the first OCI builder that works here, and prints
 * that reference alone on stdout (the builder's output goes to stderr).
 *
 * Guarantees: a builder counts only when it can build now (docker needs a reachable engine,
 * podman and buildah need their binary); when none can, the command exits 1 and says what each
 * candidate lacked, and nothing is built. `IMAGE_REGISTRY` sets the registry, `IMAGE` the whole
 * reference (`make docker-build IMG=...`); `IMAGE_BUILDER` forces one builder. The default
 * registry is the local cluster's own (`<host:port>/iot-operator`, see below) when it has one,
 * else `registry.example.com/iot` (the one deploy/operator.yml names).
 *
 * Base images: `IMAGE_BASES=public` builds FROM the Dockerfiles' defaults (the public images);
 * `IMAGE_BASES=local` FROM Debian 13 images made here by images/bases.sh (no registry needed). The
 * default is `local` for buildah (what builds on machines without an image registry) and `public`
 * for docker and podman. buildah builds with the host's network (npm, Debian and Go module
 * downloads; no CNI configuration needed), chroot isolation (RUN steps need no runc, cgroups or
 * namespaces of their own, so it also builds inside unprivileged CI containers; runc's isolation
 * works too on this privileged one) and its layer cache. Only the base arguments the Dockerfile
 * declares are passed.
 *
 * Pushing: when the local cluster (`CLUSTER_NAME`, `KWOK_WORKDIR`) has a real node, it has a
 * private registry (cluster/parts/registry: htpasswd, TLS with the cluster's own CA). A reference
 * in that registry is pushed as `docker push` would after `docker login`: buildah or podman with
 * the credentials the cluster keeps (`<workdir>/registry/auth/auth.json`) and TLS verified with
 * its CA (`--cert-dir <workdir>/registry/certs`); the pushed digest goes to stderr. The kubelet
 * then pulls it with a pod's imagePullSecrets. Nothing is loaded into a containerd by hand. A
 * reference elsewhere, or no local registry, is built only, and the build says it pushed nothing;
 * a docker build for the local registry fails (docker's engine trusts registries through
 * /etc/docker/certs.d, which nothing here changes).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { registryAccess, type RegistryAccess } from '../cluster/src/registry.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_REGISTRY = 'registry.example.com/iot';

/** The seed's version of the last commit of `repoDir`: `yyyyMMdd-HHmmss.<abbreviated hash>`. */
export function imageVersion(repoDir = root): string {
  const result = spawnSync('git', ['log', '-1', '--format=%cd.%h', '--date=format-local:%Y%m%d-%H%M%S'], {
    cwd: repoDir,
    encoding: 'utf8',
    env: { ...process.env, TZ: 'UTC' },
  });
  if (result.status !== 0) throw new Error(`cannot read the last commit of ${repoDir}: ${(result.stderr || result.error?.message || '').trim()}`);
  return result.stdout.trim();
}

export interface Builder {
  name: string;
  /** Why it cannot build here, or undefined when it can. */
  unavailable(): string | undefined;
  buildArgs(dockerfile: string, image: string, context: string, extra?: string[]): string[];
  /** Which base images it builds from unless IMAGE_BASES says otherwise. */
  defaultBases: 'public' | 'local';
}

function probe(command: string, args: string[]): string | undefined {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error) return (result.error as NodeJS.ErrnoException).code === 'ENOENT' ? 'not installed' : result.error.message;
  if (result.status !== 0) return (result.stderr || result.stdout).trim().split('\n').slice(-1)[0] || `exit ${result.status}`;
  return undefined;
}

const buildWithFile = (command: string) => (dockerfile: string, image: string, context: string, extra: string[] = []) => [command, 'build', '-f', dockerfile, '-t', image, ...extra, context];

export const BUILDERS: Builder[] = [
  { name: 'docker', unavailable: () => probe('docker', ['info', '--format', '{{.ServerVersion}}']), buildArgs: buildWithFile('docker'), defaultBases: 'public' },
  { name: 'podman', unavailable: () => probe('podman', ['--version']), buildArgs: buildWithFile('podman'), defaultBases: 'public' },
  {
    name: 'buildah',
    unavailable: () => probe('buildah', ['--version']),
    buildArgs: (dockerfile, image, context, extra = []) => ['buildah', 'bud', '--network', 'host', '--isolation', 'chroot', '--layers', '-f', dockerfile, '-t', image, ...extra, context],
    defaultBases: 'local',
  },
];

/** The `--build-arg` pairs of images/bases.sh's output (its last stdout line). */
export function parseBaseArgs(stdout: string): string[] {
  const args = (stdout.trim().split('\n').at(-1) ?? '').split(' ').filter(Boolean);
  const wellFormed = args.length > 0 && args.length % 2 === 0 && args.every((a, i) => (i % 2 === 0 ? a === '--build-arg' : /^[A-Z_]+=\S+$/.test(a)));
  if (!wellFormed) throw new Error(`images/bases.sh printed no build arguments (last line: ${JSON.stringify(stdout.trim().split('\n').at(-1) ?? '')})`);
  return args;
}

/** The build arguments a Dockerfile declares (`ARG NAME`). */
function declaredArgs(dockerfileText: string): Set<string> {
  return new Set([...dockerfileText.matchAll(/^ARG ([A-Za-z_][A-Za-z0-9_]*)/gm)].map((m) => m[1]!));
}

/** The `--build-arg` pairs whose argument the Dockerfile declares (`ARG NAME`), so that none goes unused. */
export function argsDeclaredBy(dockerfileText: string, buildArgs: string[]): string[] {
  const declared = declaredArgs(dockerfileText);
  const kept: string[] = [];
  for (let i = 0; i + 1 < buildArgs.length; i += 2) {
    if (declared.has(buildArgs[i + 1]!.split('=')[0]!)) kept.push(buildArgs[i]!, buildArgs[i + 1]!);
  }
  return kept;
}

/** The sets of base images images/bases.sh makes, by the build arguments that select them. */
export const BASE_SETS: Readonly<Record<string, readonly string[]>> = { node: ['NODE_IMAGE', 'NODE_BUILD_IMAGE'], go: ['GO_IMAGE'] };

/** The sets of BASE_SETS a Dockerfile builds from. */
export function baseSetsOf(dockerfileText: string): string[] {
  const declared = declaredArgs(dockerfileText);
  return Object.keys(BASE_SETS).filter((set) => BASE_SETS[set]!.some((arg) => declared.has(arg)));
}

/**
 * `--build-arg` pairs that select the Debian 13 bases a Dockerfile declares, made first by
 * images/bases.sh if needed — only the sets it builds from.
 */
export function localBaseArgs(dockerfileText: string): string[] {
  const sets = baseSetsOf(dockerfileText);
  if (sets.length === 0) return [];
  const result = spawnSync('bash', [path.join(root, 'images/bases.sh'), ...sets], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (result.status !== 0) throw new Error('images/bases.sh could not make the base images');
  return argsDeclaredBy(dockerfileText, parseBaseArgs(result.stdout));
}

/** The registry of the local cluster named by CLUSTER_NAME under KWOK_WORKDIR, when it has one. */
export function localRegistry(env: NodeJS.ProcessEnv = process.env): RegistryAccess | undefined {
  const workdir = env.KWOK_WORKDIR || path.join(os.homedir(), '.kwok');
  let registry: RegistryAccess;
  try {
    registry = registryAccess(path.join(workdir, 'clusters', env.CLUSTER_NAME || 'iot-operator'));
  } catch {
    return undefined;
  }
  return registry.address && existsSync(registry.authFile) && existsSync(path.join(registry.certDir, 'ca.crt')) ? registry : undefined;
}

/**
 * The registry host of an image reference, as Docker reads it: the first component when it has a
 * dot or a port or is `localhost`, else `docker.io`.
 */
export function registryHost(image: string): string {
  const slash = image.indexOf('/');
  const first = slash < 0 ? '' : image.slice(0, slash);
  return first !== '' && (first.includes('.') || first.includes(':') || first === 'localhost') ? first : 'docker.io';
}

/** The push of `image` to the local registry as `destination` (default: its own name) with the registry's credentials and CA, writing the pushed digest to `digestFile`. */
export function pushCommand(builder: 'buildah' | 'podman', image: string, registry: RegistryAccess, digestFile: string, destination = image): string[] {
  return [builder, 'push', '--authfile', registry.authFile, '--cert-dir', registry.certDir, '--digestfile', digestFile, image, `docker://${destination}`];
}

/** Pushes `image` to the local registry; its digest, or why it could not. */
function pushToRegistry(builder: string, image: string, registry: RegistryAccess): { digest: string } | { failure: string } {
  if (builder !== 'buildah' && builder !== 'podman') {
    return { failure: `${builder} cannot push to ${registry.address}: its engine trusts a registry's CA only through /etc/docker/certs.d; build with IMAGE_BUILDER=buildah` };
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'image-push-'));
  try {
    const [bin, ...args] = pushCommand(builder, image, registry, path.join(dir, 'digest'));
    const result = spawnSync(bin!, args, { encoding: 'utf8', stdio: ['ignore', 2, 'pipe'] });
    if (result.error) return { failure: result.error.message };
    if (result.status !== 0) return { failure: result.stderr.trim() || `exit ${result.status}` };
    return { digest: readFileSync(path.join(dir, 'digest'), 'utf8').trim() };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The first builder that can build here, or an error listing what each candidate lacked. */
export function chooseBuilder(candidates: Builder[], forced?: string): Builder {
  const pool = forced ? candidates.filter((b) => b.name === forced) : candidates;
  if (forced && pool.length === 0) throw new Error(`IMAGE_BUILDER=${forced} is not one of: ${candidates.map((b) => b.name).join(', ')}`);
  const reasons: string[] = [];
  for (const builder of pool) {
    const reason = builder.unavailable();
    if (reason === undefined) return builder;
    reasons.push(`${builder.name}: ${reason}`);
  }
  throw new Error(`no OCI image builder can build here (${reasons.join('; ')}); install one of them, or build on a machine with a Docker engine`);
}

function main(args: string[]): number {
  const [command, operator = 'iot'] = args;
  if (command === 'tag') {
    console.log(imageVersion());
    return 0;
  }
  if (command !== 'build') {
    console.error('usage: node --import tsx scripts/image.ts tag | build [operator]');
    return 2;
  }
  const dockerfile = path.join('operators', operator, 'Dockerfile');
  if (!existsSync(path.join(root, dockerfile))) {
    console.error(`no image for operator "${operator}": ${dockerfile} does not exist`);
    return 1;
  }
  const registry = localRegistry();
  const defaultRegistry = registry ? `${registry.address}/iot-operator` : DEFAULT_REGISTRY;
  const image = process.env.IMAGE || `${process.env.IMAGE_REGISTRY || defaultRegistry}/${operator}-operator:${imageVersion()}`;
  let builder: Builder;
  try {
    builder = chooseBuilder(BUILDERS, process.env.IMAGE_BUILDER || undefined);
  } catch (err) {
    console.error((err as Error).message);
    return 1;
  }
  const bases = process.env.IMAGE_BASES || builder.defaultBases;
  if (bases !== 'local' && bases !== 'public') {
    console.error(`IMAGE_BASES must be local or public, not ${JSON.stringify(bases)}`);
    return 1;
  }
  let extra: string[] = [];
  try {
    if (bases === 'local') extra = localBaseArgs(readFileSync(path.join(root, dockerfile), 'utf8'));
  } catch (err) {
    console.error((err as Error).message);
    return 1;
  }
  const [bin, ...rest] = builder.buildArgs(dockerfile, image, '.', extra);
  console.error(`building ${image} with ${builder.name} from the ${bases} base images`);
  const started = Date.now();
  // The builder's output goes to stderr: stdout carries the image reference alone.
  const result = spawnSync(bin!, rest, { cwd: root, stdio: ['ignore', 2, 'inherit'] });
  if (result.status !== 0) {
    console.error(`${builder.name} build of ${image} failed`);
    return 1;
  }
  console.error(`built ${image} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  if (registry && registryHost(image) === registry.address) {
    const pushed = pushToRegistry(builder.name, image, registry);
    if ('failure' in pushed) {
      console.error(`could not push ${image} to the local cluster's registry: ${pushed.failure}`);
      return 1;
    }
    console.error(`pushed ${image} (${pushed.digest}) to the local cluster's registry`);
  } else {
    console.error(registry ? `not pushed: ${registryHost(image)} is not the local cluster's registry (${registry.address})` : 'not pushed: the local cluster has no registry (npm run cluster:up -- --real-node)');
  }
  console.log(image);
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
