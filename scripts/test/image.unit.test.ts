/**
 * `npm run image:tag` / `image:build`: the seed's version format from a real git commit, the
 * choice of an OCI builder, and the build command a builder is given (a stand-in `podman` on
 * PATH records its arguments; no image is built by these tests).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { argsDeclaredBy, BUILDERS, chooseBuilder, containerdReference, imageVersion, loadCommands, parseBaseArgs, realNodeSocket, type Builder } from '../image.ts';

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

function runScript(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, ...env } });
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
});

describe('loading onto the real node', () => {
  it('finds the containerd socket of the cluster named by CLUSTER_NAME under KWOK_WORKDIR, only when it exists', () => {
    const workdir = mkdtempSync(path.join(scratch, 'kwok-'));
    assert.equal(realNodeSocket({ KWOK_WORKDIR: workdir }), undefined);
    const dir = path.join(workdir, 'clusters', 'iot-operator', 'real-node', 'containerd');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'containerd.sock'), '');
    assert.equal(realNodeSocket({ KWOK_WORKDIR: workdir }), path.join(dir, 'containerd.sock'));
    assert.equal(realNodeSocket({ KWOK_WORKDIR: workdir, CLUSTER_NAME: 'other' }), undefined);
  });

  it('imports an OCI archive into namespace k8s.io named exactly as the image, then lists that name', () => {
    const image = 'registry.example.com/iot/iot-operator:20260101-000000.abc1234';
    assert.deepEqual(loadCommands(image, '/s/c.sock', '/t/i.tar'), [
      ['buildah', 'push', '-q', image, `oci-archive:/t/i.tar:${image}`],
      ['ctr', '--address', '/s/c.sock', '-n', 'k8s.io', 'images', 'import', '/t/i.tar'],
      ['ctr', '--address', '/s/c.sock', '-n', 'k8s.io', 'images', 'ls', '-q', `name==${image}`],
    ]);
  });

  it('names a short reference as the kubelet asks containerd for it (Docker normalisation)', () => {
    assert.equal(containerdReference('ptemplate-operator:latest'), 'docker.io/library/ptemplate-operator:latest');
    assert.equal(containerdReference('ptemplate-operator'), 'docker.io/library/ptemplate-operator:latest');
    assert.equal(containerdReference('example/memcached-operator:v0.0.1'), 'docker.io/example/memcached-operator:v0.0.1');
    assert.equal(containerdReference('index.docker.io/example/x:1'), 'docker.io/example/x:1');
    assert.equal(containerdReference('quay.io/example/memcached-operator'), 'quay.io/example/memcached-operator:latest');
    assert.equal(containerdReference('localhost/iot-operator/pause:3.10'), 'localhost/iot-operator/pause:3.10');
    assert.equal(containerdReference('registry.local:5000/iot-operator:1'), 'registry.local:5000/iot-operator:1');
    assert.equal(containerdReference('registry.local:5000/iot-operator'), 'registry.local:5000/iot-operator:latest');
    assert.equal(containerdReference('quay.io/x/y@sha256:abc'), 'quay.io/x/y@sha256:abc');
    const [push, , list] = loadCommands('ptemplate-operator:latest', '/s', '/t/i.tar');
    assert.deepEqual(push, ['buildah', 'push', '-q', 'ptemplate-operator:latest', 'oci-archive:/t/i.tar:docker.io/library/ptemplate-operator:latest']);
    assert.equal(list!.at(-1), 'name==docker.io/library/ptemplate-operator:latest');
  });
});
