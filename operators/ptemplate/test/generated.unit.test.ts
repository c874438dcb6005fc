/**
 * The ptemplate operator's RBAC is what the SDK makes of its controllers today, checked as a
 * generated project checks it (`operator-ts generate rbac --check`): deploy/role.yml and
 * role_binding.yml grant what src/controllers.ts declares. Fix a failure with
 * `npx operator-ts generate rbac` in this directory, then bring config/rbac/ along
 * (test/layout.unit.test.ts).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

test('deploy/role.yml and role_binding.yml grant what src/controllers.ts declares, no more and no less', () => {
  const operatorTs = fileURLToPath(new URL('../../../packages/sdk/bin/operator-ts.js', import.meta.url));
  const result = spawnSync(process.execPath, [operatorTs, 'generate', 'rbac', '--check'], { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8' });
  assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
  assert.match(result.stdout, /RBAC is up to date/);
});
