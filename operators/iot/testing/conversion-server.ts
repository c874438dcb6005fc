/**
 * The IoTService CRD for tests and benchmarks, its conversion webhook served on 127.0.0.1 with a
 * certificate of its own. The operators under test or measured run on kwok nodes, in the test
 * process or as plain processes, so none of them can serve it. `npm start` and
 * `--local-conversion` have the operator serve it instead (local-conversion.ts).
 *
 * Who serves it: under `npm test` one server for the whole run (`npm test` starts this file as a
 * program and hands its address and CA to every test file in IOT_CONVERSION_URL and
 * IOT_CONVERSION_CA), so that IoT files running side by side point the cluster-wide CRD at the same
 * server and none of them leaves it pointing at a process that has exited; a file run by itself,
 * or a benchmark, starts a server in its own process, living as long as that process.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Kinds, Registry, isNotFound, WebhookServer, ensureWebhookCertificate, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { DEFAULT_CONVERSION_SERVICE, IOTSERVICE_CONVERSION_PATH, IOTSERVICE_CRD_NAME, conversionClientConfig, iotServiceCrd } from '../src/api/crd.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { iotServiceConversionWebhook } from '../src/webhooks/conversion-webhook.ts';

let conversionServer: Promise<{ url: string; ca: string }> | undefined;

/** The IoTService conversion webhook this test process uses: the run's (IOT_CONVERSION_URL), else its own, started once. */
function testConversionServer(): Promise<{ url: string; ca: string }> {
  const { IOT_CONVERSION_URL: url, IOT_CONVERSION_CA: ca } = process.env;
  conversionServer ??= url && ca ? Promise.resolve({ url, ca }) : startConversionServer().then(({ server, ...address }) => {
    server.unref();
    return address;
  });
  return conversionServer;
}

/** A conversion webhook server on 127.0.0.1, on a free port with a new certificate. */
async function startConversionServer(): Promise<{ url: string; ca: string; server: WebhookServer }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'iot-conversion-'));
  const certificate = ensureWebhookCertificate(dir, ['IP:127.0.0.1']);
  const server = new WebhookServer({ address: '127.0.0.1:0', certFile: path.join(dir, 'tls.crt'), keyFile: path.join(dir, 'tls.key') }, { registry: new Registry() });
  server.register(IOTSERVICE_CONVERSION_PATH, iotServiceConversionWebhook());
  await server.start();
  return { url: `https://127.0.0.1:${server.port}`, ca: certificate.ca, server };
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

// As a program (`npm test` runs it for the whole run): serves until stopped, its address and CA on
// the first line of stdout as JSON.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { url, ca } = await startConversionServer();
  process.stdout.write(`${JSON.stringify({ url, ca })}\n`);
}
