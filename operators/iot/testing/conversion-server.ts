/**
 * The IoTService CRD for tests and benchmarks, its conversion webhook served by the process that
 * installs it (a test file, a benchmark run): a webhook server on 127.0.0.1 with a certificate of
 * its own, started once and living as long as the process (the IoT operator's test files run one at a time, each
 * pointing the CRD at its own server). The operators under test or measured run on kwok nodes, in
 * this process or as plain processes, so none of them can serve it. `npm start` and
 * `--local-conversion` have the operator serve it instead (local-conversion.ts).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kinds, Registry, isNotFound, WebhookServer, ensureWebhookCertificate, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { DEFAULT_CONVERSION_SERVICE, IOTSERVICE_CONVERSION_PATH, IOTSERVICE_CRD_NAME, conversionClientConfig, iotServiceCrd } from '../src/api/crd.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { iotServiceConversionWebhook } from '../src/webhooks/conversion-webhook.ts';

let conversionServer: Promise<{ url: string; ca: string }> | undefined;

/** The IoTService conversion webhook of this test process, started once. */
function testConversionServer(): Promise<{ url: string; ca: string }> {
  conversionServer ??= (async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'iot-conversion-'));
    const certificate = ensureWebhookCertificate(dir, ['IP:127.0.0.1']);
    const server = new WebhookServer({ address: '127.0.0.1:0', certFile: path.join(dir, 'tls.crt'), keyFile: path.join(dir, 'tls.key') }, { registry: new Registry() });
    server.register(IOTSERVICE_CONVERSION_PATH, iotServiceConversionWebhook());
    await server.start();
    server.unref();
    return { url: `https://127.0.0.1:${server.port}`, ca: certificate.ca };
  })();
  return conversionServer;
}

/** The CRD's `spec.conversion` pointing at this test process's conversion webhook. */
export async function testConversion(): Promise<ReturnType<typeof conversionClientConfig>> {
  const { url, ca } = await testConversionServer();
  return conversionClientConfig({ url }, ca);
}

/**
 * The IoTService CRD (as deploy/ ships it: api/crd.ts), converted by this test process (idempotent). A CRD already there
 * is pointed at this process first: applying a URL beside the Service another party set would
 * leave both, which the API server refuses.
 */
export async function installIoTCrd(env: TestEnv): Promise<void> {
  await serveIoTConversion(env).catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });
  const crd = iotServiceCrd() as KubeObject & { spec: Record<string, unknown> };
  await env.installCrd({ ...crd, spec: { ...crd.spec, conversion: await testConversion() } });
}

/** Puts back the installed CRD's conversion as deploy/ ships it (a Service), so that applying that file changes nothing of it. */
export async function restoreShippedConversion(env: TestEnv): Promise<void> {
  const shipped = conversionClientConfig({ service: DEFAULT_CONVERSION_SERVICE }, '');
  await env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: shipped }], 'json').catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });
}

/** Points the installed CRD's conversion at this test process (after something applied the CRD as shipped). */
export async function serveIoTConversion(env: TestEnv): Promise<void> {
  await env.client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: await testConversion() }], 'json');
}

/**
 * Creates `iot` as v1alpha1 once the conversion webhook the CRD names answers: the API server takes
 * up a newly pointed target a moment after the change, and a Ready pod is not yet a routed Service.
 */
export async function createThroughConversion(env: TestEnv, iot: KubeObject, through: string, options: { timeoutMs: number; intervalMs: number }): Promise<void> {
  await waitFor(`a v1alpha1 create of ${iot.metadata.name} converted by ${through}`, async () => {
    const err = await env.client.create(IoTServiceV1alpha1Type, iot).then(() => undefined, (e: unknown) => (e instanceof Error ? e.message : String(e)));
    return { done: err === undefined, value: undefined, seen: err };
  }, options);
}
