/**
 * The reference IoT service's images: `npm run image:iot-service [-- --version X]` builds the five
 * targets of workloads/iot-service/image/Dockerfile with buildah from the Debian 13 bases of
 * images/bases.sh, as `<registry>/iot-<component>:<version>` — the names the IoT operator gives
 * its pods — and pushes each to the local cluster's registry with its credentials and CA, as
 * `npm run image:build` pushes the operators' images. It prints the registry (what
 * `spec.registry` or `--default-registry` names) alone on stdout.
 *
 * Guarantees: the version defaults to workloads/iot-service/package.json's and is what every
 * component of these images reports; the registry defaults to `<local registry>/iot`
 * (`IMAGE_REGISTRY` overrides it). Without a local registry, or on any failed build or push, it
 * exits 1 naming the step and pushes nothing further.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { argsDeclaredBy, localBaseArgs, localRegistry, pushCommand } from './image.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOCKERFILE = 'workloads/iot-service/image/Dockerfile';
export const IOT_SERVICE_COMPONENTS = ['core', 'gateway', 'processing', 'broker', 'database'] as const;

function run(command: string, args: string[]): boolean {
  return spawnSync(command, args, { cwd: root, stdio: ['ignore', 2, 'inherit'] }).status === 0;
}

/**
 * Sets IOT_SERVICE_VERSION on the built image itself: buildah's layer cache (1.28) does not key an
 * `ENV IOT_SERVICE_VERSION=${VERSION}` step on VERSION's value, so a second version would be the
 * first one's cached image, reporting the first version.
 */
function stampVersion(image: string, version: string): boolean {
  const from = spawnSync('buildah', ['from', '--pull-never', image], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const container = from.stdout?.trim();
  if (from.status !== 0 || !container) return false;
  return run('buildah', ['config', '--env', `IOT_SERVICE_VERSION=${version}`, container]) && run('buildah', ['commit', '--rm', '--quiet', container, image]);
}

function main(args: string[]): number {
  const versionAt = args.indexOf('--version');
  const packageVersion = (JSON.parse(readFileSync(path.join(root, 'workloads/iot-service/package.json'), 'utf8')) as { version: string }).version;
  const version = versionAt >= 0 ? args[versionAt + 1] : packageVersion;
  if (!version || !/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(version)) {
    console.error('usage: npm run image:iot-service [-- --version <tag>]');
    return 2;
  }
  const registry = localRegistry();
  if (!registry) {
    console.error('the local cluster has no registry to push to (npm run cluster:up -- --real-node)');
    return 1;
  }
  const prefix = process.env.IMAGE_REGISTRY || `${registry.address}/iot`;
  const bases = argsDeclaredBy(readFileSync(path.join(root, DOCKERFILE), 'utf8'), localBaseArgs());
  const digests = mkdtempSync(path.join(os.tmpdir(), 'iot-service-images-'));
  try {
    for (const component of IOT_SERVICE_COMPONENTS) {
      const image = `${prefix}/iot-${component}:${version}`;
      const started = Date.now();
      const build = ['bud', '--network', 'host', '--isolation', 'chroot', '--layers', '-f', DOCKERFILE, '--target', component];
      if (!run('nice', ['buildah', ...build, '--build-arg', `VERSION=${version}`, ...bases, '-t', image, '.']) || !stampVersion(image, version)) {
        console.error(`buildah build of ${image} failed`);
        return 1;
      }
      const [bin, ...push] = pushCommand('buildah', image, registry, path.join(digests, component));
      if (!run(bin!, push)) {
        console.error(`could not push ${image} to the local cluster's registry`);
        return 1;
      }
      const digest = readFileSync(path.join(digests, component), 'utf8').trim();
      console.error(`pushed ${image} (${digest}) in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  } finally {
    rmSync(digests, { recursive: true, force: true });
  }
  console.log(prefix);
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
