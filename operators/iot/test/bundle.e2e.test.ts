/**
 * The operator as the image ships it: `images/bundle.ts` turns it into one JavaScript file which,
 * copied alone into an empty directory (no node_modules, no TypeScript loader), takes an instance
 * to Available on the real cluster, serves its metrics and stops cleanly on SIGTERM.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { spawnOperator, type OperatorProcess, type TestEnv } from '@iot-operator/runtime/testing';
import { bundleOperator } from '../../../images/bundle.ts';
import { deleteAllInstances, iotService, iotTestLandscape, metricsPort, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

let env: TestEnv;
let landscape: string;
let dir: string;
let operator: OperatorProcess | undefined;

before(async () => {
  ({ env, landscape } = await iotTestLandscape());
  dir = mkdtempSync(path.join(os.tmpdir(), 'iot-bundle-'));
});

after(async () => {
  if (operator && operator.exitCode === null) {
    await deleteAllInstances(env, landscape).catch(() => undefined);
    await operator.stop();
  }
  rmSync(dir, { recursive: true, force: true });
  await env?.cleanup();
});

describe('the bundled operator', () => {
  it('runs from a directory holding nothing but the bundle and takes an instance to Available', async () => {
    const file = await bundleOperator('iot', dir);
    assert.deepEqual(readdirSync(dir).sort(), ['chunks', 'iot-operator.mjs']);

    operator = spawnOperator([file, '--metrics-bind-address=127.0.0.1:0', '--log-level=info'], { KUBECONFIG: env.kubeconfigPath, OPERATOR_NAME: landscape, WATCH_NAMESPACE: '' }, { output: 'all' });
    const port = await metricsPort(operator);

    await env.client.create(IoTServiceV1alpha1Type, iotService('bundled', landscape));
    const iot = await waitForPhase(env, landscape, 'bundled', 'Available');
    assert.equal(iot.status?.ready, '7/7');

    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    assert.match(metrics, /rest_client_requests_total\{[^}]*method="PATCH"[^}]*\} [1-9]/, 'the bundle counts its writes');

    await deleteAllInstances(env, landscape);
    assert.equal(await operator.stop(), 0, `exit code of SIGTERM; output:\n${operator.output().slice(-800)}`);
  });
});
