/**
 * Chart sources resolved for real (filesystem and git CLI, no cluster): a local chart, a git
 * repository on local disk at a branch, a tag and a commit (a moved branch resolves to the new
 * commit), and every bad source gives a SourceError saying what to fix.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SourceError, SourceResolver } from '../src/chart/source.ts';

const testchart = fileURLToPath(new URL('../helm-charts/testchart', import.meta.url));
let dir: string;
let repo: string;
let resolver: SourceResolver;
const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com' } }).trim();

before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'armada-source-test-'));
  repo = path.join(dir, 'charts-repo');
  mkdirSync(path.join(repo, 'charts/demo'), { recursive: true });
  writeFileSync(path.join(repo, 'charts/demo/Chart.yaml'), 'apiVersion: v2\nname: demo\nversion: 0.1.0\n');
  git('init', '--quiet', '--initial-branch', 'main');
  git('add', '.');
  git('commit', '--quiet', '-m', 'demo 0.1.0');
  git('tag', 'v0.1.0');
  resolver = new SourceResolver({ workDir: path.join(dir, 'work') });
});

after(() => rmSync(dir, { recursive: true, force: true }));

test('a local chart directory resolves to itself', async () => {
  const resolved = await resolver.resolve({ type: 'local', location: path.dirname(testchart), subpath: 'testchart' });
  assert.equal(resolved.chart, testchart);
  assert.deepEqual(resolved.identity, { type: 'local', path: testchart });
});

test('a git branch, tag and commit resolve to a checkout of that commit; a moved branch to the new one', async () => {
  const first = git('rev-parse', 'HEAD');
  const atBranch = await resolver.resolve({ type: 'git', location: repo, subpath: 'charts/demo', reference: 'main' });
  assert.equal(atBranch.identity.commit, first);
  assert.match(execFileSync('cat', [path.join(atBranch.chart, 'Chart.yaml')], { encoding: 'utf8' }), /version: 0\.1\.0/);

  writeFileSync(path.join(repo, 'charts/demo/Chart.yaml'), 'apiVersion: v2\nname: demo\nversion: 0.2.0\n');
  git('commit', '--quiet', '-am', 'demo 0.2.0');
  const second = git('rev-parse', 'HEAD');
  const moved = await resolver.resolve({ type: 'git', location: repo, subpath: 'charts/demo', reference: 'main' });
  assert.equal(moved.identity.commit, second);
  assert.match(execFileSync('cat', [path.join(moved.chart, 'Chart.yaml')], { encoding: 'utf8' }), /version: 0\.2\.0/);

  const atTag = await resolver.resolve({ type: 'git', location: repo, subpath: 'charts/demo', reference: 'v0.1.0' });
  assert.equal(atTag.identity.commit, first);
  const atCommit = await resolver.resolve({ type: 'git', location: repo, subpath: 'charts/demo', reference: first.slice(0, 12) });
  assert.equal(atCommit.identity.commit, first);
  const atDefault = await resolver.resolve({ type: 'git', location: repo, subpath: 'charts/demo' });
  assert.equal(atDefault.identity.commit, second);
});

test('bad sources are SourceErrors that say what to fix', async () => {
  const cases: Array<[Parameters<SourceResolver['resolve']>[0], RegExp]> = [
    [{ type: 'svn', location: 'x' }, /source\.type "svn" is unknown: use one of local, tar, git/],
    [{ type: 'local', location: '/nonexistent/charts' }, /\/nonexistent\/charts does not exist on the operator's filesystem/],
    [{ type: 'local', location: dir }, /is not a Helm chart: no Chart\.yaml/],
    [{ type: 'tar', location: 'not a url' }, /is not a URL/],
    [{ type: 'tar', location: 'ftp://example.com/c.tgz' }, /must be an http\(s\) URL/],
    [{ type: 'git', location: repo, reference: 'no-such-branch', subpath: 'charts/demo' }, /git reference "no-such-branch" not found in .*charts-repo/],
    [{ type: 'git', location: repo, reference: 'main', subpath: 'charts/other' }, /source\.subpath "charts\/other" .* is not a Helm chart/],
    [{ type: 'git', location: path.join(dir, 'missing-repo') }, /cannot clone .*missing-repo/],
  ];
  for (const [source, message] of cases) {
    await assert.rejects(resolver.resolve(source), (err: unknown) => {
      assert.ok(err instanceof SourceError, `${JSON.stringify(source)}: ${String(err)}`);
      assert.match(err.message, message);
      return true;
    });
  }
});
