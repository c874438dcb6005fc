/**
 * init and create api on a temporary directory: the files a project and an API get, input
 * checked before anything is written, and the --check mode of the generators' file writer.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { writeOrCheck } from '../src/generate/generate.ts';
import { readProject } from '../src/project.ts';
import { createApi, init, pluralOf } from '../src/scaffold.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'operator-ts-scaffold-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function listFiles(root: string, prefix = ''): string[] {
  return readdirSync(path.join(root, prefix), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? listFiles(root, path.join(prefix, e.name)) : [path.join(prefix, e.name)],
  );
}

test('init writes a complete project named after its directory, depending on the given packages', () => {
  const projectDir = path.join(dir, 'demo-operator');
  init(projectDir, { runtimeVersion: 'file:/packs/runtime.tgz', sdkVersion: '^0.1.0' });
  assert.deepEqual(listFiles(projectDir).sort(), [
    '.dockerignore', '.gitignore', 'Dockerfile', 'README.md', 'dashboards/operator-runtime.json',
    'deploy/crds/.gitkeep', 'deploy/operator.yaml', 'deploy/role.yaml', 'deploy/role_binding.yaml', 'deploy/service_account.yaml',
    'operator-ts.json', 'package.json', 'src/controllers.ts', 'src/main.ts', 'src/operator.ts', 'src/webhooks.ts',
    'test/crds.ts', 'test/generated.unit.test.ts', 'test/operator.e2e.test.ts', 'tsconfig.json',
  ]);
  const manifest = JSON.parse(readFileSync(path.join(projectDir, 'package.json'), 'utf8'));
  assert.equal(manifest.name, 'demo-operator');
  assert.equal(manifest.dependencies['@iot-operator/runtime'], 'file:/packs/runtime.tgz');
  assert.equal(manifest.devDependencies['@iot-operator/sdk'], '^0.1.0');
  assert.equal(manifest.scripts.start, 'operator-ts run');
  assert.deepEqual(readProject(projectDir), { name: 'demo-operator', domain: 'example.com', apis: [] });
  assert.match(readFileSync(path.join(projectDir, 'README.md'), 'utf8'), /npm start .*\nnpm test /);
  assert.equal(
    readFileSync(path.join(projectDir, 'dashboards/operator-runtime.json'), 'utf8'),
    readFileSync(new URL('../../runtime/dashboards/operator-runtime.json', import.meta.url), 'utf8'),
    "the runtime's Grafana dashboard, as the runtime defines it",
  );
});

test('init refuses a bad name and a non-empty directory, writing nothing', () => {
  assert.throws(() => init(path.join(dir, 'Demo_Operator'), {}), /the operator name "Demo_Operator" must be a DNS label/);
  assert.equal(existsSync(path.join(dir, 'Demo_Operator')), false);
  mkdirSync(path.join(dir, 'taken'));
  writeFileSync(path.join(dir, 'taken/notes.txt'), 'mine');
  assert.throws(() => init(path.join(dir, 'taken'), {}), /taken is not empty/);
  assert.deepEqual(readdirSync(path.join(dir, 'taken')), ['notes.txt']);
});

test('create api writes the API, registers its controller and records it in operator-ts.json', () => {
  init(dir, { name: 'demo-operator' });
  createApi(dir, { group: 'cache', version: 'v1alpha1', kind: 'Memcached', namespaced: true });
  for (const file of ['src/api/memcached.ts', 'src/controllers/memcached.ts', 'deploy/crds/cache_v1alpha1_memcached_cr.yaml', 'test/memcached.unit.test.ts', 'test/memcached.e2e.test.ts']) {
    assert.ok(existsSync(path.join(dir, file)), file);
  }
  const controllers = readFileSync(path.join(dir, 'src/controllers.ts'), 'utf8');
  assert.match(controllers, /import \{ registerMemcachedController \} from '\.\/controllers\/memcached\.ts';\n\/\/ operator-ts:imports/);
  assert.match(controllers, /  registerMemcachedController\(mgr\);\n  \/\/ operator-ts:controllers/);
  assert.deepEqual(readProject(dir).apis, [{ group: 'cache.example.com', version: 'v1alpha1', kind: 'Memcached', plural: 'memcacheds', namespaced: true }]);
  assert.match(readFileSync(path.join(dir, 'src/api/memcached.ts'), 'utf8'), /customResource\('cache\.example\.com', 'v1alpha1', 'Memcached', 'memcacheds', true\)/);
});

test('a cluster-scoped API owns a Namespace per object', () => {
  init(dir, { name: 'demo-operator' });
  createApi(dir, { group: 'tenancy', version: 'v1', kind: 'Tenant', namespaced: false });
  assert.match(readFileSync(path.join(dir, 'src/api/tenant.ts'), 'utf8'), /customResource\('tenancy\.example\.com', 'v1', 'Tenant', 'tenants', false\)[\s\S]*scope: 'Cluster'/);
  assert.match(readFileSync(path.join(dir, 'src/controllers/tenant.ts'), 'utf8'), /\.for\(Tenant\)\.owns\(Kinds\.Namespace\)/);
  assert.equal(readProject(dir).apis[0]?.namespaced, false);
});

test('create api rejects bad input and a second API of the same kind, changing nothing', () => {
  init(dir, { name: 'demo-operator' });
  const before = () => listFiles(dir).sort().map((f) => `${f}:${readFileSync(path.join(dir, f), 'utf8').length}`);
  const snapshot = before();
  assert.throws(() => createApi(dir, { group: 'cache', version: 'v1', kind: 'memcached', namespaced: true }), /the kind "memcached" must be UpperCamelCase/);
  assert.throws(() => createApi(dir, { group: 'cache', version: '1.0', kind: 'Memcached', namespaced: true }), /the version "1\.0" must look like v1/);
  assert.throws(() => createApi(dir, { group: 'Cache', version: 'v1', kind: 'Memcached', namespaced: true }), /must be a DNS subdomain/);
  assert.deepEqual(before(), snapshot);
  createApi(dir, { group: 'cache', version: 'v1', kind: 'Memcached', namespaced: true });
  assert.throws(() => createApi(dir, { group: 'other', version: 'v1', kind: 'Memcached', namespaced: true }), /already has an API of kind Memcached/);
});

test('create api outside a project says so', () => {
  assert.throws(() => createApi(dir, { group: 'cache', version: 'v1', kind: 'Memcached', namespaced: true }), /operator-ts\.json not found: run this command in a project made by `operator-ts init`/);
});

test("operator-ts.json's RBAC settings are kept, and a wrong one is an error naming it", () => {
  init(dir, { name: 'demo-operator' });
  const file = path.join(dir, 'operator-ts.json');
  const project = JSON.parse(readFileSync(file, 'utf8'));
  const write = (rbac: unknown) => writeFileSync(file, JSON.stringify({ ...project, rbac }));
  write({ roleFiles: ['deploy/role.yml'], clusterRole: true, metricsService: false });
  assert.deepEqual(readProject(dir).rbac, { roleFiles: ['deploy/role.yml'], clusterRole: true, metricsService: false });
  write({ roleFile: 'deploy/role.yml' });
  assert.throws(() => readProject(dir), /operator-ts\.json: "rbac" has no setting "roleFile" \(known: roleFiles, bindingFile, clusterRole, metricsService\)/);
  write({ roleFiles: [] });
  assert.throws(() => readProject(dir), /"rbac"\.roleFiles must be a non-empty array of paths/);
  write({ clusterRole: 'yes' });
  assert.throws(() => readProject(dir), /"rbac"\.clusterRole must be true or false/);
});

test('plurals follow the kind', () => {
  assert.deepEqual(['Memcached', 'Policy', 'Gateway', 'Ingress', 'Box', 'Match'].map(pluralOf), ['memcacheds', 'policies', 'gateways', 'ingresses', 'boxes', 'matches']);
});

test('the generators write only what changed, and --check names each differing file and line', () => {
  const files = { 'deploy/role.yaml': 'kind: Role\nrules: []\n', 'deploy/crds/a_crd.yaml': 'kind: CustomResourceDefinition\n' };
  assert.deepEqual(writeOrCheck(dir, files, false, 'operator-ts generate rbac'), ['wrote deploy/role.yaml', 'wrote deploy/crds/a_crd.yaml']);
  assert.deepEqual(writeOrCheck(dir, files, false, 'operator-ts generate rbac'), []);
  assert.deepEqual(writeOrCheck(dir, files, true, 'operator-ts generate rbac'), []);
  writeFileSync(path.join(dir, 'deploy/role.yaml'), 'kind: Role\nrules: [{}]\n');
  rmSync(path.join(dir, 'deploy/crds/a_crd.yaml'));
  assert.throws(
    () => writeOrCheck(dir, files, true, 'operator-ts generate rbac'),
    (err: Error) =>
      err.message.includes('deploy/role.yaml differs from what `operator-ts generate rbac` writes (line 2: expected "rules: []", found "rules: [{}]")') &&
      err.message.includes('deploy/crds/a_crd.yaml is missing'),
  );
  assert.equal(readFileSync(path.join(dir, 'deploy/role.yaml'), 'utf8'), 'kind: Role\nrules: [{}]\n', '--check writes nothing');
});
