/**
 * `npm run image:tag` / `image:build`: the seed's version format from a real git commit, the
 * choice of an OCI builder, the build command a builder is given and the push to the local
 * cluster's registry (a stand-in `podman` or `docker` on PATH records its arguments; no image is
 * built or pushed by these tests).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { argsDeclaredBy, baseSetsOf, BUILDERS, chooseBuilder, imageVersion, localRegistry, parseBaseArgs, pushCommand, registryHost, type Builder } from '../image.ts';

const script = fileURLToPath(new URL('../image.ts', import.meta.url));
const repoRoot = path.resolve(path.dirname(script), '..');
const scratch = mkdtempSync(path.join(tmpdir(), 'image-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

function builder(name: string, reason?: string): Builder {
  return { name, unavailable: () => reason, buildArgs: (f, i, c) => [name, 'build', f, i, c], defaultBases: 'public' };
}

/** A PATH holding only git (and whatever `extra` writes there). */
function pathWithGit(extra: (dir: string) => void = () => {}): string {
  const dir = mkdtempSync(path.join(scratch, 'bin-'));
  symlinkSync(execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim(), path.join(dir, 'git'));
  extra(dir);
  return dir;
}

/** A KWOK_WORKDIR whose cluster has no registry, unless `env` names another. */
const noCluster = mkdtempSync(path.join(scratch, 'no-cluster-'));

function runScript(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, KWOK_WORKDIR: noCluster, ...env } });
}

/** A KWOK_WORKDIR whose cluster `iot-operator` has a registry at `address` (its files as cluster/parts/registry lays them). */
function workdirWithRegistry(address: string): string {
  const workdir = mkdtempSync(path.join(scratch, 'kwok-'));
  const dir = path.join(workdir, 'clusters', 'iot-operator', 'registry');
  mkdirSync(path.join(dir, 'auth'), { recursive: true });
  mkdirSync(path.join(dir, 'certs'));
  writeFileSync(path.join(dir, 'address'), `${address}\n`);
  writeFileSync(path.join(dir, 'auth/auth.json'), '{"auths":{}}');
  writeFileSync(path.join(dir, 'certs/ca.crt'), '');
  return workdir;
}

/** A stand-in builder that records each call's arguments in `log` and writes a digest where --digestfile says. */
function stubBuilder(dir: string, name: string, log: string): void {
  const version = name === 'docker' ? '[ "$1" = info ] && { echo 27.0.0; exit 0; }' : `[ "$1" = --version ] && { echo '${name} version 5'; exit 0; }`;
  writeFileSync(path.join(dir, name), `#!/bin/sh\n${version}\necho "$@" >> ${log}\nwhile [ $# -gt 0 ]; do [ "$1" = --digestfile ] && echo sha256:0123abcd > "$2"; shift; done\nexit 0\n`);
  chmodSync(path.join(dir, name), 0o755);
}

describe('image version', () => {
  it('is yyyyMMdd-HHmmss.<abbreviated commit> of the last commit, in UTC', () => {
    const repo = mkdtempSync(path.join(scratch, 'repo-'));
    const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com', GIT_COMMITTER_DATE: '2016-07-02T17:20:19+02:00', GIT_AUTHOR_DATE: '2016-07-02T17:20:19+02:00' } });
    git('init', '-q');
    writeFileSync(path.join(repo, 'f'), 'x');
    git('add', 'f');
    git('commit', '-q', '-m', 'one');
    const hash = git('rev-parse', '--short', 'HEAD').trim();
    assert.equal(imageVersion(repo), `20160702-152019.${hash}`);
  });

  it('fails with the reason when the directory is not a repository', () => {
    assert.throws(() => imageVersion(mkdtempSync(path.join(scratch, 'plain-'))), /cannot read the last commit/);
  });

  it('`image.ts tag` prints this repository\'s version', () => {
    const result = runScript(['tag'], {});
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout.trim(), /^\d{8}-\d{6}\.[0-9a-f]{7,}$/);
  });
});

describe('builder choice', () => {
  it('takes the first builder that can build', () => {
    assert.equal(chooseBuilder([builder('docker', 'engine not reachable'), builder('podman'), builder('buildah')]).name, 'podman');
  });

  it('names what every candidate lacked when none can build', () => {
    assert.throws(
      () => chooseBuilder([builder('docker', 'engine not reachable'), builder('podman', 'not installed')]),
      /no OCI image builder can build here \(docker: engine not reachable; podman: not installed\)/,
    );
  });

  it('IMAGE_BUILDER forces one builder and rejects unknown names', () => {
    assert.throws(() => chooseBuilder([builder('docker'), builder('podman', 'not installed')], 'podman'), /podman: not installed/);
    assert.throws(() => chooseBuilder([builder('docker')], 'kaniko'), /IMAGE_BUILDER=kaniko is not one of: docker/);
  });
});

describe('image build', () => {
  it('builds operators/<name>/Dockerfile from the repository root, tagged with the version', () => {
    const log = path.join(scratch, 'podman-args');
    const bin = pathWithGit((dir) => {
      writeFileSync(path.join(dir, 'podman'), `#!/bin/sh\n[ "$1" = --version ] && { echo 'podman version 5'; exit 0; }\necho "$@" > ${log}\necho 'STEP 1/1: FROM node'\n`);
      chmodSync(path.join(dir, 'podman'), 0o755);
    });
    const result = runScript(['build', 'iot'], { PATH: bin, IMAGE_BUILDER: 'podman', IMAGE_REGISTRY: 'registry.test/team' });
    assert.equal(result.status, 0, result.stderr);
    const image = result.stdout.trim().split('\n').at(-1)!;
    assert.match(image, /^registry\.test\/team\/iot-operator:\d{8}-\d{6}\.[0-9a-f]{7,}$/);
    assert.equal(readFileSync(log, 'utf8').trim(), `build -f operators/iot/Dockerfile -t ${image} .`);
    assert.equal(result.stdout, `${image}\n`, 'stdout carries the reference alone');
  });

  it('exits 1 and says so when no builder is present, building nothing', () => {
    const result = runScript(['build', 'iot'], { PATH: pathWithGit(), IMAGE_BUILDER: 'buildah' });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /no OCI image builder can build here \(buildah: not installed\)/);
  });

  it('refuses an operator without a Dockerfile', () => {
    const result = runScript(['build', 'nosuch'], { PATH: pathWithGit() });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /no image for operator "nosuch": operators\/nosuch\/Dockerfile does not exist/);
  });
});

describe('buildah from the local bases', () => {
  it('builds with the host network, chroot isolation and the layer cache, the base arguments before the context', () => {
    const buildah = BUILDERS.find((b) => b.name === 'buildah')!;
    assert.equal(buildah.defaultBases, 'local');
    assert.deepEqual(buildah.buildArgs('operators/iot/Dockerfile', 'r/iot-operator:1', '.', ['--build-arg', 'NODE_IMAGE=localhost/n:1']), [
      'buildah', 'bud', '--network', 'host', '--isolation', 'chroot', '--layers',
      '-f', 'operators/iot/Dockerfile', '-t', 'r/iot-operator:1', '--build-arg', 'NODE_IMAGE=localhost/n:1', '.',
    ]);
    assert.equal(BUILDERS.find((b) => b.name === 'docker')!.defaultBases, 'public');
  });

  it('takes the build arguments from the last line images/bases.sh prints', () => {
    assert.deepEqual(parseBaseArgs('noise\n--build-arg NODE_IMAGE=localhost/a:1 --build-arg GO_IMAGE=localhost/g:2\n'), [
      '--build-arg', 'NODE_IMAGE=localhost/a:1', '--build-arg', 'GO_IMAGE=localhost/g:2',
    ]);
    assert.throws(() => parseBaseArgs(''), /printed no build arguments/);
    assert.throws(() => parseBaseArgs('--build-arg NODE_IMAGE=a --build-arg'), /printed no build arguments/);
    assert.throws(() => parseBaseArgs('made localhost/a:1'), /printed no build arguments \(last line: "made localhost\/a:1"\)/);
  });
});

describe('base arguments', () => {
  const all = ['--build-arg', 'NODE_IMAGE=localhost/n:1', '--build-arg', 'NODE_BUILD_IMAGE=localhost/b:1', '--build-arg', 'GO_IMAGE=localhost/g:1'];
  it('passes only the arguments a Dockerfile declares', () => {
    const iot = readFileSync(path.join(repoRoot, 'operators/iot/Dockerfile'), 'utf8');
    assert.deepEqual(argsDeclaredBy(iot, all), all.slice(0, 4));
    const armada = readFileSync(path.join(repoRoot, 'operators/armada/Dockerfile'), 'utf8');
    assert.deepEqual(argsDeclaredBy(armada, all), all);
    assert.deepEqual(argsDeclaredBy('FROM scratch\n# ARG GO_IMAGE=x\n', all), []);
  });

  it("asks images/bases.sh only for the sets a Dockerfile builds from: the IoT service's images need no Go base", () => {
    const read = (file: string) => readFileSync(path.join(repoRoot, file), 'utf8');
    assert.deepEqual(baseSetsOf(read('workloads/iot-service/image/Dockerfile')), ['node']);
    assert.deepEqual(baseSetsOf(read('operators/iot/Dockerfile')), ['node']);
    assert.deepEqual(baseSetsOf(read('operators/armada/Dockerfile')), ['node', 'go']);
    assert.deepEqual(baseSetsOf('FROM scratch\n'), []);
  });
});

describe('pushing to the local cluster\'s registry', () => {
  it('finds the registry of the cluster named by CLUSTER_NAME under KWOK_WORKDIR, only when its files exist', () => {
    assert.equal(localRegistry({ KWOK_WORKDIR: noCluster }), undefined);
    const workdir = workdirWithRegistry('127.0.0.1:5443');
    const dir = path.join(workdir, 'clusters', 'iot-operator', 'registry');
    assert.deepEqual(localRegistry({ KWOK_WORKDIR: workdir }), { address: '127.0.0.1:5443', authFile: path.join(dir, 'auth/auth.json'), certDir: path.join(dir, 'certs') });
    assert.equal(localRegistry({ KWOK_WORKDIR: workdir, CLUSTER_NAME: 'other' }), undefined);
    rmSync(path.join(dir, 'auth/auth.json'));
    assert.equal(localRegistry({ KWOK_WORKDIR: workdir }), undefined, 'no credentials, no registry to push to');
  });

  it('reads the registry host of a reference as Docker does', () => {
    assert.equal(registryHost('127.0.0.1:5443/iot-operator/iot-operator:1'), '127.0.0.1:5443');
    assert.equal(registryHost('localhost/iot-operator/pause:3.10'), 'localhost');
    assert.equal(registryHost('quay.io/example/memcached-operator'), 'quay.io');
    assert.equal(registryHost('example/memcached-operator:v0.0.1'), 'docker.io');
    assert.equal(registryHost('ptemplate-operator:latest'), 'docker.io');
  });

  it('pushes with the cluster\'s credentials and CA, as docker push after docker login', () => {
    const registry = { address: '127.0.0.1:5443', authFile: '/w/auth.json', certDir: '/w/certs' };
    assert.deepEqual(pushCommand('buildah', '127.0.0.1:5443/iot-operator/x:1', registry, '/t/d'), [
      'buildah', 'push', '--authfile', '/w/auth.json', '--cert-dir', '/w/certs', '--digestfile', '/t/d', '127.0.0.1:5443/iot-operator/x:1', 'docker://127.0.0.1:5443/iot-operator/x:1',
    ]);
    assert.deepEqual(pushCommand('buildah', 'localhost/iot/iot-core:1', registry, '/t/d', '127.0.0.1:5443/iot/iot-core:1').slice(-2), [
      'localhost/iot/iot-core:1', 'docker://127.0.0.1:5443/iot/iot-core:1',
    ]);
  });

  it('builds into the local registry by default and pushes there, the reference alone on stdout', () => {
    const log = path.join(scratch, 'podman-push-args');
    const workdir = workdirWithRegistry('127.0.0.1:5443');
    const result = runScript(['build', 'memcached'], { PATH: pathWithGit((dir) => stubBuilder(dir, 'podman', log)), IMAGE_BUILDER: 'podman', KWOK_WORKDIR: workdir });
    assert.equal(result.status, 0, result.stderr);
    const image = result.stdout.trim();
    assert.match(image, /^127\.0\.0\.1:5443\/iot-operator\/memcached-operator:\d{8}-\d{6}\.[0-9a-f]{7,}$/);
    const registry = path.join(workdir, 'clusters/iot-operator/registry');
    const [build, push] = readFileSync(log, 'utf8').trim().split('\n');
    assert.equal(build, `build -f operators/memcached/Dockerfile -t ${image} .`);
    assert.match(push!, new RegExp(`^push --authfile ${registry}/auth/auth.json --cert-dir ${registry}/certs --digestfile \\S+ ${image.replace(/\./g, '\\.')} docker://`));
    assert.match(result.stderr, /pushed .* \(sha256:0123abcd\) to the local cluster's registry/);
  });

  it('pushes nothing for a reference in another registry, and says so', () => {
    const log = path.join(scratch, 'podman-elsewhere-args');
    const result = runScript(['build', 'iot'], { PATH: pathWithGit((dir) => stubBuilder(dir, 'podman', log)), IMAGE_BUILDER: 'podman', IMAGE: 'quay.io/team/iot-operator:1', KWOK_WORKDIR: workdirWithRegistry('127.0.0.1:5443') });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, 'quay.io/team/iot-operator:1\n');
    assert.equal(readFileSync(log, 'utf8').trim().split('\n').length, 1, 'built, not pushed');
    assert.match(result.stderr, /not pushed: quay\.io is not the local cluster's registry \(127\.0\.0\.1:5443\)/);
  });

  it('fails when docker built an image for the local registry, whose CA its engine does not trust', () => {
    const log = path.join(scratch, 'docker-args');
    const result = runScript(['build', 'iot'], { PATH: pathWithGit((dir) => stubBuilder(dir, 'docker', log)), IMAGE_BUILDER: 'docker', KWOK_WORKDIR: workdirWithRegistry('127.0.0.1:5443') });
    assert.equal(result.status, 1);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /docker cannot push to 127\.0\.0\.1:5443: .*IMAGE_BUILDER=buildah/);
  });
});
