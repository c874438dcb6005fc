/**
 * The memcached operator's generated files are what the SDK makes of its sources today, checked
 * as a generated project checks them (`operator-ts generate … --check`): deploy/role.yaml and
 * role_binding.yaml what src/controllers.ts declares, deploy/webhook.yaml the webhooks of
 * operator-ts.json, the OLM bundles and their catalog what deploy/ makes. Fix a failure with `npx operator-ts generate rbac`, then regenerate the bundles
 * (README, "Generate the operator's bundle").
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const operatorTs = fileURLToPath(new URL('../../../packages/sdk/bin/operator-ts.js', import.meta.url));
const operatorDir = fileURLToPath(new URL('..', import.meta.url));

function check(what: 'rbac' | 'webhook' | 'bundle'): string {
  const result = spawnSync(process.execPath, [operatorTs, 'generate', what, '--check'], { cwd: operatorDir, encoding: 'utf8' });
  assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
  return result.stdout;
}

test('deploy/role.yaml and role_binding.yaml grant what src/controllers.ts declares, no more and no less', () => {
  assert.match(check('rbac'), /RBAC is up to date/);
});

test('deploy/webhook.yaml holds the defaulting and validating webhooks operator-ts.json lists', () => {
  assert.match(check('webhook'), /webhooks are up to date/);
});

test('bundles 0.0.1 and 0.0.2 and the catalog are what deploy/ makes', () => {
  assert.match(check('bundle'), /bundles 0\.0\.1, 0\.0\.2 and the catalog are up to date/);
});
