/**
 * Step 3a of the walkthrough in docs/iotservice.md: the operator run as a local process with `--local-conversion` serves the
 * IoTService conversion itself, so the seed's v1alpha1 example works against the local cluster
 * without anything in the cluster. Proves: the process points the CRD at its own
 * https://127.0.0.1 URL with its CA; a v1alpha1 IoTService is stored (as v1beta1) and read back
 * through it, and the operator takes it to Available; on SIGTERM the process exits 0 and the CRD
 * names the Service it named before again; a second run reuses the certificate (same caBundle).
 */
// run-tests: alone among the IoT files: its operator process points the CRD's conversion at itself.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type OperatorProcess, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { IOTSERVICE_CRD_NAME, conversionClientConfig } from '../src/api/crd.ts';
import { IoTServiceType, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import type { CrdConversion } from '../src/webhooks/crd-conversion.ts';
import { localWebhookCertDir } from '../src/webhooks/local-conversion.ts';
import { abandonLandscape, createLandscape, createThroughConversion, installIoTCrd, iotService, serveIoTConversion, spawnOperator, waitForPhase } from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
let landscape = '';
let operator: OperatorProcess | undefined;
type Crd = KubeObject & { spec: { conversion?: CrdConversion } };
const conversion = async () => (await env.client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME)).spec.conversion;
/** A Service the CRD names before the run, so that where it points afterwards is known. */
const BEFORE = { namespace: 'some-landscape', name: 'iot-operator-webhook' };
/** A placement field (v1alpha1: flat; v1beta1: under placement) that leaves the pods schedulable on the kwok nodes; the operator is run allowing its taint key. */
const TOLERATION = { key: 'dedicated', operator: 'Equal', value: 'iot', effect: 'NoSchedule' };

before(async () => {
  await installIoTCrd(env);
  landscape = await createLandscape(env);
});

after(async () => {
  await operator?.stop();
  await serveIoTConversion(env).catch(() => undefined);
  await abandonLandscape(env, landscape);
  rmSync(path.dirname(localWebhookCertDir(landscape)), { recursive: true, force: true });
  await env.cleanup();
});

/** Starts `iot-operator --local-conversion` and waits until the CRD names its URL; that URL. */
async function runLocally(): Promise<string> {
  await env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: conversionClientConfig({ service: BEFORE }, '') }], 'json');
  operator = spawnOperator(env, landscape, ['--local-conversion', `--allowed-toleration-keys=${TOLERATION.key}`]);
  const url = await waitFor('the operator to log the URL it serves the conversion on', async () => {
    const match = /"url":"(https:\/\/127\.0\.0\.1:\d+\/convert)"/.exec(operator!.output());
    return { done: !!match, value: match?.[1] ?? '', seen: operator!.output().slice(-800) };
  });
  assert.equal((await conversion())?.webhook?.clientConfig?.url, url, 'the CRD names the process’s URL');
  return url;
}

async function stopAndExpectRestored(): Promise<void> {
  assert.equal(await operator!.stop(), 0, `exit code (output: ${operator!.output().slice(-1500)})`);
  operator = undefined;
  assert.deepEqual((await conversion())?.webhook?.clientConfig?.service, { ...BEFORE, path: '/convert', port: 443 }, 'the CRD names the Service it named before the run');
}

describe('iot-operator --local-conversion (docs/iotservice.md walkthrough, step 3a)', () => {
  test('serves the conversion from the process: a v1alpha1 IoTService is stored, read back as both versions and made Available; SIGTERM gives the CRD back', async () => {
    await runLocally();
    const caBundle = (await conversion())?.webhook?.clientConfig?.caBundle ?? '';
    const ca = new X509Certificate(Buffer.from(caBundle, 'base64').toString());
    assert.equal(ca.ca, true, 'the CRD trusts a CA');
    assert.equal(readFileSync(path.join(localWebhookCertDir(landscape), 'ca.crt'), 'utf8'), Buffer.from(caBundle, 'base64').toString(), 'the CA kept in the cache directory');

    await createThroughConversion(env, iotService('local', landscape, { database: { tolerations: [TOLERATION] } } as never), 'the process', { timeoutMs: 30_000, intervalMs: 500 });
    const beta = await env.client.get<KubeObject & { spec: { database: { placement?: unknown } } }>(IoTServiceType, 'local', landscape);
    assert.deepEqual(beta.spec.database.placement, { tolerations: [TOLERATION] });
    await waitForPhase(env, landscape, 'local', 'Available');
    await stopAndExpectRestored();
  });

  test('a second run points the CRD at its new URL with the same CA (the certificate is kept across runs)', async () => {
    const first = readFileSync(path.join(localWebhookCertDir(landscape), 'ca.crt'), 'utf8');
    await runLocally();
    assert.equal(Buffer.from((await conversion())?.webhook?.clientConfig?.caBundle ?? '', 'base64').toString(), first);
    const alpha = await env.client.get<KubeObject & { spec: { database: { tolerations?: unknown } } }>(IoTServiceV1alpha1Type, 'local', landscape);
    assert.deepEqual(alpha.spec.database.tolerations, [TOLERATION]);
    await stopAndExpectRestored();
  });
});
