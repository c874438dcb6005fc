/**
 * The IoTService conversion served by an operator running outside the cluster (`npm start`, and
 * `iot-operator --local-conversion`), for a cluster whose API server runs on this machine, as the
 * local cluster's does: the webhook server listens on 127.0.0.1 with a certificate for
 * IP:127.0.0.1, and the CRD's conversion points at `https://127.0.0.1:<port>/convert` while the
 * operator runs.
 *
 * Guarantees: the certificate's CA is kept in
 * `~/.cache/iot-operator/local/<landscape>/webhook-certs` ($IOT_OPERATOR_CACHE_DIR) across runs,
 * so restarts keep the CRD's caBundle. The CRD is pointed here as soon as the webhook server
 * listens, before the caches sync (listing v1beta1 converts what is still stored as v1alpha1).
 * `release` points it back at the Service it named before (the shipped
 * devawsk8s/iot-operator-webhook when it named a URL or nothing), where an in-cluster operator
 * takes it over — only while it still names this process's URL: a CRD someone pointed elsewhere
 * meanwhile is left alone. Releasing twice does nothing more.
 */
import os from 'node:os';
import path from 'node:path';
import { Kinds, type KubeApi, type KubeObject, type Manager } from '@iot-operator/runtime';
import { DEFAULT_CONVERSION_SERVICE, IOTSERVICE_CONVERSION_PATH, IOTSERVICE_CRD_NAME, conversionClientConfig } from '../api/crd.ts';
import type { CrdConversion } from './crd-conversion.ts';

/** Where a landscape's local webhook certificate is kept across runs. */
export function localWebhookCertDir(landscape: string): string {
  const cacheRoot = process.env.IOT_OPERATOR_CACHE_DIR || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'iot-operator');
  return path.join(cacheRoot, 'local', landscape, 'webhook-certs');
}

export interface LocalConversion {
  /** The conversion's URL, `https://127.0.0.1:<port>/convert`. */
  url: string;
  /** Points the CRD back at the Service it named before, if it still names `url`. */
  release(): Promise<void>;
}

type Crd = KubeObject & { spec: { conversion?: CrdConversion } };

/**
 * Waits until `mgr`'s webhook server listens (`mgr.start()` runs meanwhile, called by the caller),
 * then points the CRD's conversion at it, trusting `caPem`. Rejects when `mgr` stops or `signal`
 * aborts (the caller's start failed) before it listens.
 */
export async function pointConversionHere(client: Pick<KubeApi, 'get' | 'patch'>, mgr: Manager, caPem: string, signal?: AbortSignal): Promise<LocalConversion> {
  let stopped = false;
  void mgr.done.then(() => (stopped = true));
  while (!mgr.webhookServer?.listening) {
    if (stopped || signal?.aborted) throw new Error('the operator stopped before its webhook server listened');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const base = `https://127.0.0.1:${mgr.webhookServer.port}`;
  const conversion = conversionClientConfig({ url: base }, caPem);
  const before = (await client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME)).spec.conversion;
  const restore = before?.webhook?.clientConfig?.service ? before : conversionClientConfig({ service: DEFAULT_CONVERSION_SERVICE }, '');
  await client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'replace', path: '/spec/conversion', value: conversion }], 'json');
  // The test operation makes the patch fail, leaving the CRD alone, once someone else has pointed it elsewhere.
  const release = [
    { op: 'test', path: '/spec/conversion/webhook/clientConfig/url', value: conversion.webhook.clientConfig.url },
    { op: 'replace', path: '/spec/conversion', value: restore },
  ];
  let released: Promise<void> | undefined;
  return {
    url: `${base}${IOTSERVICE_CONVERSION_PATH}`,
    release: () => (released ??= client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, release, 'json').then(() => undefined, () => undefined)),
  };
}

/**
 * `iot-operator --local-conversion`: points the CRD here once `mgr` listens (logged with the URL)
 * and returns what points it back, to run before the process exits: it waits for a pointing under
 * way, and gives up one whose webhook server never listened (a failed start). A failure to point
 * it is logged; the operator keeps running.
 */
export function serveConversionLocally(mgr: Manager, caPem: string): () => Promise<void> {
  const exiting = new AbortController();
  const pointed = pointConversionHere(mgr.client, mgr, caPem, exiting.signal).then(
    (conversion) => {
      mgr.logger.info({ crd: IOTSERVICE_CRD_NAME, url: conversion.url }, 'serving the IoTService conversion here; the CRD points at it until this process stops');
      return conversion;
    },
    (err: unknown) => {
      mgr.logger.error({ crd: IOTSERVICE_CRD_NAME, err: err instanceof Error ? err.message : String(err) }, 'could not point the CRD’s conversion here');
      return undefined;
    },
  );
  return async () => {
    exiting.abort();
    await (await pointed)?.release();
  };
}
