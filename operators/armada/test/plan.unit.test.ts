/**
 * The release plan: install once, upgrade only on changed inputs, never retry inputs that
 * already failed to upgrade, recover what an interrupted operator left pending, never replace a
 * protected release; and the inputs digest ignores key order but not values.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { INPUTS_LABEL, inputsDigest, planRelease } from '../src/chart/plan.ts';
import type { ReleaseRevision, ReleaseStatus } from '../src/helm/release-state.ts';

function rev(revision: number, status: ReleaseStatus, digest = 'd1'): ReleaseRevision {
  return { release: 'blog-1', namespace: 'ns', revision, status, labels: { owner: 'helm', [INPUTS_LABEL]: digest } };
}

test('no release: install', () => {
  assert.deepEqual(planRelease([], 'd1', undefined, false), { action: 'install' });
});

test('deployed with the same inputs: nothing; with other inputs: upgrade', () => {
  assert.equal(planRelease([rev(1, 'superseded'), rev(2, 'deployed')], 'd1', undefined, false).action, 'none');
  assert.equal(planRelease([rev(1, 'deployed')], 'd2', undefined, false).action, 'upgrade');
});

test('inputs that failed to upgrade are not retried until they change', () => {
  const history = [rev(1, 'superseded'), rev(2, 'failed', 'd2'), rev(3, 'deployed', 'd1')];
  const blocked = planRelease(history, 'd2', 'd2', false);
  assert.equal(blocked.action, 'blocked');
  assert.equal(planRelease(history, 'd3', 'd2', false).action, 'upgrade');
  assert.equal(planRelease(history, 'd1', 'd2', false).action, 'none');
});

test('a failed newest revision: upgrade over an earlier good one, else replace (a failed install)', () => {
  assert.equal(planRelease([rev(1, 'deployed'), rev(2, 'failed', 'd2')], 'd3', undefined, false).action, 'upgrade');
  const failedInstall = planRelease([rev(1, 'failed')], 'd1', undefined, false);
  assert.equal(failedInstall.action, 'replace');
});

test('pending revisions left by an interrupted operator are recovered', () => {
  assert.equal(planRelease([rev(1, 'pending-install')], 'd1', undefined, false).action, 'replace');
  assert.deepEqual(planRelease([rev(1, 'deployed'), rev(2, 'pending-upgrade', 'd2')], 'd2', undefined, false), { action: 'rollback', revision: rev(2, 'pending-upgrade', 'd2'), to: 1 });
  assert.equal(planRelease([rev(1, 'superseded'), rev(2, 'deployed'), rev(3, 'pending-rollback')], 'd1', undefined, false).action, 'rollback');
});

test('a protected release is never replaced', () => {
  const plan = planRelease([rev(1, 'pending-install')], 'd1', undefined, true);
  assert.equal(plan.action, 'blocked');
  assert.match((plan as { why: string }).why, /protected/);
  assert.equal(planRelease([rev(1, 'failed')], 'd1', undefined, true).action, 'blocked');
});

test('the inputs digest ignores key order and changes with any value', () => {
  const base = { source: { type: 'local', path: '/c' }, values: { a: 1, b: { c: [1, 2] } }, release: 'r', namespace: 'n', labels: { x: 'y' } };
  const reordered = { labels: { x: 'y' }, namespace: 'n', release: 'r', values: { b: { c: [1, 2] }, a: 1 }, source: { path: '/c', type: 'local' } };
  assert.equal(inputsDigest(base), inputsDigest(reordered));
  assert.equal(inputsDigest(base).length, 40);
  assert.notEqual(inputsDigest(base), inputsDigest({ ...base, values: { a: 2, b: { c: [1, 2] } } }));
  assert.notEqual(inputsDigest(base), inputsDigest({ ...base, values: { a: 1, b: { c: [2, 1] } } }));
  assert.notEqual(inputsDigest(base), inputsDigest({ ...base, labels: { x: 'y', p: 'armada' } }));
});
