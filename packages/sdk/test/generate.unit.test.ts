/**
 * The generators read a project as it is: a fixture project (this workspace's runtime through a
 * node_modules link) whose controllers use for, owns, watches and watchesSelected and declare
 * extra permissions gets exactly the matching RBAC, per controller; a project inside a workspace
 * (its packages hoisted above it) is read as well, its RBAC laid out as its operator-ts.json
 * says; its API's crd() becomes the CRD file; a project whose modules lack the expected exports
 * gets an error naming the file and export.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { generatedCrds, generatedRbac } from '../src/generate/generate.ts';
import { writeProject } from '../src/project.ts';

const workspaceModules = fileURLToPath(new URL('../../../node_modules', import.meta.url));
let dir: string;

function write(file: string, content: string): void {
  mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
  writeFileSync(path.join(dir, file), content);
}

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'operator-ts-generate-'));
  symlinkSync(workspaceModules, path.join(dir, 'node_modules'));
  write('package.json', JSON.stringify({ name: 'fixture-operator', type: 'module' }));
  writeProject(dir, { name: 'fixture-operator', domain: 'example.com', apis: [{ group: 'fixture.example.com', version: 'v1', kind: 'Gadget', plural: 'gadgets', namespaced: true }] });
  write(
    'src/api/gadget.ts',
    `import { Type } from '@sinclair/typebox';
import { customResource, customResourceDefinition } from '@iot-operator/runtime';
export const Gadget = customResource('fixture.example.com', 'v1', 'Gadget', 'gadgets');
export function crd() {
  return customResourceDefinition({ group: 'fixture.example.com', scope: 'Namespaced', names: { kind: 'Gadget', plural: 'gadgets', singular: 'gadget' },
    versions: [{ name: 'v1', served: true, storage: true, spec: Type.Object({ size: Type.Integer() }) }] });
}
`,
  );
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('RBAC follows for, owns, watches, watchesSelected and extraPermissions of each registered controller', async () => {
  write(
    'src/controllers.ts',
    `import { controller, customResource, Kinds, mapByLabel, type ExtraPermission, type Manager } from '@iot-operator/runtime';
import { Gadget } from './api/gadget.ts';
const Gizmo = customResource('fixture.example.com', 'v1', 'Gizmo', 'gizmos');
export const extraPermissions: ExtraPermission[] = [{ type: Kinds.Secret, verbs: ['get'], reason: 'the credentials a Gadget names' }];
export function registerControllers(mgr: Manager): void {
  controller(mgr).for(Gadget).owns(Kinds.StatefulSet).watches(Kinds.Pod, mapByLabel('gadget'))
    .watchesSelected(Kinds.ConfigMap, { namespace: 'shared', labelSelector: 'kind=gadget' }, () => [])
    .reconcile(async () => undefined);
  controller(mgr).for(Gizmo).watches(Gadget, () => []).reconcile(async () => undefined);
}
`,
  );
  const files = await generatedRbac(dir);
  const text = files['deploy/role.yaml']!;
  const role = parse(text) as { kind: string; rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> };
  assert.equal(role.kind, 'Role');
  const verbs = Object.fromEntries(role.rules.map((r) => [`${r.apiGroups[0]}/${r.resources[0]}`, r.verbs.join(',')]));
  assert.equal(verbs['fixture.example.com/gadgets'], 'get,list,watch');
  assert.equal(verbs['fixture.example.com/gadgets/status'], 'get,update,patch');
  assert.equal(verbs['fixture.example.com/gadgets/finalizers'], 'update');
  assert.equal(verbs['fixture.example.com/gizmos/status'], 'get,update,patch');
  assert.equal(verbs['fixture.example.com/gizmos/finalizers'], undefined, 'the Gizmo controller owns nothing');
  assert.equal(verbs['apps/statefulsets'], 'get,list,watch,create,update,patch,delete');
  assert.equal(verbs['/pods'], 'get,list,watch');
  assert.equal(verbs['/configmaps'], 'get,list,watch');
  assert.equal(verbs['/secrets'], 'get');
  assert.match(text, /# extraPermissions\(Secret\): the credentials a Gadget names\n/);
});

test('a project of a workspace (tsx and the runtime hoisted above it) is read, its RBAC written where operator-ts.json says', async () => {
  const workspace = dir;
  dir = path.join(workspace, 'operators', 'fixture');
  mkdirSync(dir, { recursive: true });
  write('package.json', JSON.stringify({ name: 'fixture-operator', type: 'module' }));
  writeProject(dir, { name: 'fixture-operator', domain: 'example.com', apis: [], rbac: { roleFiles: ['deploy/role.yml'], bindingFile: 'deploy/role_binding.yml', clusterRole: true } });
  write(
    'src/controllers.ts',
    `import { controller, Kinds, type Manager } from '@iot-operator/runtime';
export function registerControllers(mgr: Manager, settings: { workers: number } = { workers: 1 }): void {
  controller(mgr).for(Kinds.ConfigMap).maxConcurrentReconciles(settings.workers).reconcile(async () => undefined);
}
`,
  );
  try {
    const files = await generatedRbac(dir);
    assert.deepEqual(Object.keys(files), ['deploy/role.yml', 'deploy/role_binding.yml']);
    assert.equal((parse(files['deploy/role.yml']!) as { kind: string }).kind, 'ClusterRole');
    assert.equal((parse(files['deploy/role_binding.yml']!) as { kind: string }).kind, 'RoleBinding');
  } finally {
    dir = workspace;
  }
});

test("generate crd writes each API's crd() under its derived file name", async () => {
  const files = await generatedCrds(dir);
  assert.deepEqual(Object.keys(files), ['deploy/crds/fixture_v1_gadget_crd.yaml']);
  const content = files['deploy/crds/fixture_v1_gadget_crd.yaml']!;
  assert.match(content, /^# Generated by `operator-ts generate crd` from src\/api\/gadget\.ts; do not edit\.\n/);
  assert.equal((parse(content) as { metadata: { name: string } }).metadata.name, 'gadgets.fixture.example.com');
});

test('missing exports are errors naming the file and the export', async () => {
  write('src/controllers.ts', 'export const nothing = 1;\n');
  await assert.rejects(generatedRbac(dir), /reading the project's controller declarations failed: src\/controllers\.ts must export registerControllers\(mgr\)/);
  write('src/api/gadget.ts', 'export const nothing = 1;\n');
  await assert.rejects(generatedCrds(dir), /reading the project's API schemas failed: src\/api\/gadget\.ts must export a function crd\(\)/);
});
