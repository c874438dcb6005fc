/**
 * The published form of the runtime: `npm pack` builds the package and the tarball holds the
 * compiled JavaScript and its declarations for every entry point (`.` and `./testing`), no
 * TypeScript sources and no tests, and a package.json whose `exports` point into dist/; the
 * workspace's package.json is back at the sources afterwards.
 */
// run-tests: alone, before every other file: npm pack points packages/runtime/package.json at dist/ while it packs, and every other file resolves @iot-operator/runtime through it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const manifestFile = path.join(packageDir, 'package.json');
let workDir: string;
let entries: string[];
let packedManifest: { exports: Record<string, { types: string; default: string }>; files: string[]; private?: boolean };
let manifestBefore: string;

before(() => {
  manifestBefore = readFileSync(manifestFile, 'utf8');
  workDir = mkdtempSync(path.join(os.tmpdir(), 'runtime-pack-'));
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', workDir], { cwd: packageDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })) as Array<{ filename: string }>;
  const tarball = path.join(workDir, path.basename(packed!.filename));
  entries = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
  packedManifest = JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }));
});

after(() => rmSync(workDir, { recursive: true, force: true }));

test('the tarball holds compiled JavaScript and declarations for . and ./testing', () => {
  for (const file of ['dist/index.js', 'dist/index.d.ts', 'dist/testing/index.js', 'dist/testing/index.d.ts', 'dist/controller/builder.js', 'dist/crd/crd.d.ts']) {
    assert.ok(entries.includes(`package/${file}`), `${file} is in the tarball`);
  }
});

test('the packed exports point into dist/ and every target is in the tarball', () => {
  assert.deepEqual(Object.keys(packedManifest.exports), ['.', './testing']);
  for (const [entry, target] of Object.entries(packedManifest.exports)) {
    assert.match(target.default, /^\.\/dist\/.*\.js$/, `${entry} runs compiled JavaScript`);
    assert.match(target.types, /^\.\/dist\/.*\.d\.ts$/, `${entry} has declarations`);
    assert.ok(entries.includes(`package/${target.default.slice(2)}`), `${target.default} is packed`);
    assert.ok(entries.includes(`package/${target.types.slice(2)}`), `${target.types} is packed`);
  }
  assert.deepEqual(packedManifest.files, ['dist']);
  assert.equal(packedManifest.private, undefined, 'the package can be published');
});

test('no TypeScript sources, tests or build files are packed', () => {
  const unexpected = entries.filter((e) => !/^package\/(package\.json|README\.md|dist\/.+\.(js|d\.ts))$/.test(e));
  assert.deepEqual(unexpected, []);
  assert.equal(entries.filter((e) => e.includes('.test.')).length, 0);
});

test('after packing, the workspace package.json points at the TypeScript sources again', () => {
  assert.equal(readFileSync(manifestFile, 'utf8'), manifestBefore);
  const manifest = JSON.parse(manifestBefore) as { exports: Record<string, string> };
  assert.deepEqual(manifest.exports, { '.': './src/index.ts', './testing': './src/testing/index.ts' });
});
