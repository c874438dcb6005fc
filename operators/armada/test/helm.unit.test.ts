/**
 * The Helm driver without a cluster: a helm that does not run is reported at start with its path
 * and how to name another; a running helm call is cancelled when its signal aborts (the operator
 * stopping), and a call after the abort does not start; `as(user)` adds `--kube-as-user`.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Helm, HelmCancelledError, HelmNotFoundError } from '../src/helm/helm.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'armada-helm-unit-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in helm (one process, as helm is) that records its arguments, then sleeps for `seconds` or prints `{}`. */
function fakeHelm(seconds: number): string {
  const file = path.join(dir, `helm-${seconds}`);
  writeFileSync(file, `#!/bin/sh\necho "$@" > "${file}.args"\n${seconds > 0 ? `exec sleep ${seconds}` : "echo '{}'"}\n`);
  chmodSync(file, 0o755);
  return file;
}

test('a helm binary that does not run is reported with its path and what to do', async () => {
  await assert.rejects(new Helm({ binary: path.join(dir, 'no-such-helm') }).check(), (err: unknown) => {
    assert.ok(err instanceof HelmNotFoundError);
    assert.match(err.message, /no-such-helm does not run .*--helm-binary/);
    return true;
  });
});

test('a running helm call is cancelled when the signal aborts; none starts afterwards', async () => {
  const controller = new AbortController();
  const helm = new Helm({ binary: fakeHelm(30) }).cancelledBy(controller.signal);
  const started = Date.now();
  const call = helm.status('r', 'ns');
  setTimeout(() => controller.abort(), 200);
  await assert.rejects(call, HelmCancelledError);
  assert.ok(Date.now() - started < 5_000, `cancelled within seconds (${Date.now() - started} ms)`);
  await assert.rejects(helm.status('r', 'ns'), /cancelled before it started/);
});

test('as(user) makes every call act as that user', async () => {
  const binary = fakeHelm(0);
  await new Helm({ binary }).as('system:serviceaccount:team-a:deployer').status('r', 'ns');
  assert.match(readFileSync(`${binary}.args`, 'utf8'), /--kube-as-user system:serviceaccount:team-a:deployer/);
});
