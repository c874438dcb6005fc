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
 *
 * `kubectl apply -f` of the shipped CRD file (a Service) works while this process serves the
 * conversion: pointing here also records the URL in kubectl's last-applied annotation (written
 * from the shipped CRD where there is none), so kubectl replaces the URL by the file's Service
 * instead of setting both, which the API server refuses; the CRD found naming that Service again
 * is pointed here again within two seconds.
 */
import os from 'node:os';
import path from 'node:path';
import { Kinds, type KubeApi, type KubeObject, type Manager } from '@iot-operator/runtime';
import { namedService, type CrdConversion } from './crd-conversion.ts';
import { DEFAULT_CONVERSION_SERVICE, IOTSERVICE_CONVERSION_PATH, IOTSERVICE_CRD_NAME, conversionClientConfig, iotServiceCrd } from '../api/crd.ts';

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

/** kubectl's record of the object it last applied (client-side `kubectl apply`). */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
/** How often a running local conversion looks whether the CRD was applied again. */
const REPOINT_INTERVAL_MS = 2000;

/**
 * The JSON patch that sets the CRD's conversion to `conversion`, in kubectl's last-applied record
 * too (the shipped CRD's, where it has none), so that a client-side apply of the shipped file
 * replaces it.
 */
function setConversion(crd: Crd, conversion: CrdConversion): Array<Record<string, unknown>> {
  let applied: Crd = iotServiceCrd() as Crd;
  try {
    if (crd.metadata.annotations?.[LAST_APPLIED]) applied = JSON.parse(crd.metadata.annotations[LAST_APPLIED]) as Crd;
  } catch {
    // not JSON: written anew from the shipped CRD
  }
  const record = JSON.stringify({ ...applied, spec: { ...applied.spec, conversion } });
  return [
    { op: 'replace', path: '/spec/conversion', value: conversion },
    crd.metadata.annotations
      ? { op: 'add', path: `/metadata/annotations/${LAST_APPLIED.replace(/\//g, '~1')}`, value: record }
      : { op: 'add', path: '/metadata/annotations', value: { [LAST_APPLIED]: record } },
  ];
}

/**
 * Waits until `mgr`'s webhook server listens (`mgr.start()` runs meanwhile, called by the caller),
 * then points the CRD's conversion at it, trusting `caPem`, and again whenever the CRD is found
 * naming the Service it named before (the shipped file applied) until released. Rejects when
 * `mgr` stops or `signal` aborts (the caller's start failed) before it listens.
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
  const getCrd = () => client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME);
  const crd = await getCrd();
  const before = crd.spec.conversion;
  const restore = before?.webhook?.clientConfig?.service ? before : conversionClientConfig({ service: DEFAULT_CONVERSION_SERVICE }, '');
  const restoredService = namedService(restore);
  await client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, setConversion(crd, conversion), 'json');
  const repoint = setInterval(() => {
    void getCrd()
      .then(async (current) => {
        const named = namedService(current.spec.conversion);
        if (named?.namespace !== restoredService?.namespace || named?.name !== restoredService?.name) return;
        await client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, setConversion(current, conversion), 'json');
        mgr.logger.info({ crd: IOTSERVICE_CRD_NAME, url: conversion.webhook.clientConfig.url }, 'the CRD was applied again: its conversion points here again');
      })
      .catch(() => undefined); // looked at again on the next tick
  }, REPOINT_INTERVAL_MS);
  repoint.unref();
  let released: Promise<void> | undefined;
  return {
    url: `${base}${IOTSERVICE_CONVERSION_PATH}`,
    release: () => {
      clearInterval(repoint);
      // The test operation makes the patch fail, leaving the CRD alone, once someone else has pointed it elsewhere.
      released ??= getCrd()
        .then((current) =>
          client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, [{ op: 'test', path: '/spec/conversion/webhook/clientConfig/url', value: conversion.webhook.clientConfig.url }, ...setConversion(current, restore)], 'json'),
        )
        .then(() => undefined, () => undefined);
      return released;
    },
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
