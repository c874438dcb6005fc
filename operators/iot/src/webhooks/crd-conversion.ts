/**
 * Keeps the IoTService CRD's conversion pointed at a Service that serves it: with v1beta1 stored,
 * every v1alpha1 request needs the conversion webhook, and the CRD (cluster-wide, installed once)
 * ships naming a Service of the seed's landscape with no CA. Conversion reads nothing from the
 * cluster, so any landscape's operator may answer for all of them.
 *
 * Guarantees (`--conversion-service <namespace>/<name>`; operator.ts):
 * - At start and every 30 s, `spec.conversion` of iotservices.cp.iotservices.io is set to this
 *   operator's Service with the CA of `<webhook cert dir>/ca.crt` when the CRD names no Service,
 *   names one that does not exist or has no endpoint whose pod is ready (its EndpointSlices), or names this
 *   very Service with another CA, path or port (`conversionDecision`, pure).
 * - Never replaced: a Service with a ready endpoint (another landscape's operator serving it) and a
 *   `url` (an operator run outside the cluster, or tests serving it themselves).
 * - Every replica may do it: the patch carries the resourceVersion read, so of two replicas one
 *   wins and the other's 409 is retried on its next round. Pointing the CRD is logged at info;
 *   a holder left alone is logged at warn once per holder.
 */
import { readFile } from 'node:fs/promises';
import { isConflict, isNotFound, Kinds, type KubeApi, type KubeObject, type Manager } from '@iot-operator/runtime';
import { IOTSERVICE_CRD_NAME, conversionClientConfig } from '../api/crd.ts';


/** How often the CRD is checked. */
export const CONVERSION_CHECK_INTERVAL_MS = 30_000;

export interface ServiceRef {
  namespace: string;
  name: string;
}

/** `spec.conversion` of a CRD, as far as it is read here. */
export interface CrdConversion {
  strategy?: string;
  webhook?: { conversionReviewVersions?: string[]; clientConfig?: { url?: string; service?: ServiceRef & { path?: string; port?: number }; caBundle?: string } };
}

/** What `conversionDecision` found: point the CRD at this operator's Service, or leave it. */
export type ConversionDecision =
  | { point: true; reason: 'no Service' | 'Service missing' | 'no ready endpoint' | 'outdated' }
  | { point: false; reason: 'current' | 'url' | 'served elsewhere'; holder?: string };

/** The Service the CRD's conversion names, if any. */
export function namedService(conversion: CrdConversion | undefined): ServiceRef | undefined {
  const service = conversion?.strategy === 'Webhook' ? conversion.webhook?.clientConfig?.service : undefined;
  return service ? { namespace: service.namespace, name: service.name } : undefined;
}

/**
 * Whether to point the CRD's `current` conversion at `own` (trusting `ca`). `named` is the state of
 * the Service the CRD names when that is not `own`: 'missing', or whether it has a ready endpoint.
 */
export function conversionDecision(current: CrdConversion | undefined, own: ServiceRef, ca: string, named: 'missing' | 'serving' | 'not serving'): ConversionDecision {
  const clientConfig = current?.strategy === 'Webhook' ? current.webhook?.clientConfig : undefined;
  if (clientConfig?.url) return { point: false, reason: 'url', holder: clientConfig.url };
  const service = namedService(current);
  if (!service) return { point: true, reason: 'no Service' };
  if (service.namespace === own.namespace && service.name === own.name) {
    return sameConversion(current, conversionClientConfig({ service: own }, ca)) ? { point: false, reason: 'current' } : { point: true, reason: 'outdated' };
  }
  if (named === 'missing') return { point: true, reason: 'Service missing' };
  if (named === 'not serving') return { point: true, reason: 'no ready endpoint' };
  return { point: false, reason: 'served elsewhere', holder: `${service.namespace}/${service.name}` };
}

function sameConversion(current: CrdConversion | undefined, desired: ReturnType<typeof conversionClientConfig>): boolean {
  const have = current?.webhook;
  const want = desired.webhook;
  return (
    current?.strategy === desired.strategy &&
    JSON.stringify(have?.conversionReviewVersions) === JSON.stringify(want.conversionReviewVersions) &&
    have?.clientConfig?.caBundle === want.clientConfig.caBundle &&
    JSON.stringify(have?.clientConfig?.service) === JSON.stringify(want.clientConfig.service)
  );
}

type Crd = KubeObject & { spec: { conversion?: CrdConversion } };
type EndpointSlice = KubeObject & { endpoints?: Array<{ conditions?: { ready?: boolean; serving?: boolean } }> };

/**
 * Whether `service` exists and has an endpoint whose pod is ready: `serving` (a Service publishing
 * not-ready addresses, as earlier charts' did, has every endpoint `ready`), else `ready`; a
 * missing condition counts as true, as the API documents.
 */
async function serviceState(client: Pick<KubeApi, 'get' | 'list'>, service: ServiceRef): Promise<'missing' | 'serving' | 'not serving'> {
  try {
    await client.get(Kinds.Service, service.name, service.namespace);
  } catch (err) {
    if (isNotFound(err)) return 'missing';
    throw err;
  }
  const slices = await client.list<EndpointSlice>(Kinds.EndpointSlice, { namespace: service.namespace, labelSelector: `kubernetes.io/service-name=${service.name}` });
  return slices.items.some((slice) => slice.endpoints?.some((e) => (e.conditions?.serving ?? e.conditions?.ready) !== false)) ? 'serving' : 'not serving';
}

export interface ConversionServiceOptions {
  service: ServiceRef;
  /** PEM file of the CA that signed the webhook's serving certificate. */
  caFile: string;
}

/** One round: reads the CRD (and the Service it names), points it when `conversionDecision` says so. */
export async function checkConversion(client: Pick<KubeApi, 'get' | 'list' | 'patch'>, options: ConversionServiceOptions): Promise<ConversionDecision> {
  const ca = await readFile(options.caFile, 'utf8');
  const crd = await client.get<Crd>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME);
  const current = crd.spec.conversion;
  const named = namedService(current);
  const state = named && !(named.namespace === options.service.namespace && named.name === options.service.name) ? await serviceState(client, named) : 'not serving';
  const decision = conversionDecision(current, options.service, ca, state);
  if (decision.point) {
    const desired = conversionClientConfig({ service: options.service }, ca);
    // Merge patch: `url: null` drops nothing here (a url is never replaced) but keeps the result a single target.
    const patch = { metadata: { resourceVersion: crd.metadata.resourceVersion }, spec: { conversion: { ...desired, webhook: { ...desired.webhook, clientConfig: { ...desired.webhook.clientConfig, url: null } } } } };
    await client.patch(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, patch, 'merge');
  }
  return decision;
}

/** Runs `checkConversion` now and every 30 s until `signal` aborts; outcomes are logged, a failed round waits for the next. */
export function keepConversionServed(client: Pick<KubeApi, 'get' | 'list' | 'patch'>, logger: Manager['logger'], options: ConversionServiceOptions, signal: AbortSignal): void {
  let lastWarning = '';
  const round = async () => {
    try {
      const decision = await checkConversion(client, options);
      const service = `${options.service.namespace}/${options.service.name}`;
      if (decision.point) {
        logger.info({ crd: IOTSERVICE_CRD_NAME, service, reason: decision.reason }, 'pointed the CRD’s conversion webhook at this operator’s Service');
        lastWarning = '';
      } else if (decision.holder && decision.holder !== lastWarning) {
        lastWarning = decision.holder;
        const why = decision.reason === 'url' ? 'a URL (an operator outside the cluster, or tests)' : 'another Service with a ready endpoint';
        logger.warn({ crd: IOTSERVICE_CRD_NAME, service, holder: decision.holder }, `the CRD’s conversion webhook is ${why}; left alone`);
      }
    } catch (err) {
      logger[isConflict(err) ? 'debug' : 'warn']({ crd: IOTSERVICE_CRD_NAME, err: err instanceof Error ? err.message : String(err) }, 'could not check the CRD’s conversion webhook; retrying');
    }
  };
  void round();
  const timer = setInterval(() => void round(), CONVERSION_CHECK_INTERVAL_MS);
  timer.unref();
  signal.addEventListener('abort', () => clearInterval(timer), { once: true });
}

/** Keeps the CRD's conversion served for as long as `mgr` runs. */
export function registerConversionService(mgr: Manager, options: ConversionServiceOptions): void {
  const stop = new AbortController();
  void mgr.done.then(() => stop.abort());
  keepConversionServed(mgr.client, mgr.logger, options, stop.signal);
}
