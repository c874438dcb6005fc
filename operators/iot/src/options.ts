/**
 * The operator process's configuration: environment (OPERATOR_NAME, WATCH_NAMESPACE, KUBECONFIG)
 * and command-line flags, parsed and checked in one place.
 *
 * Guarantees: every flag is documented in `--help`; a missing OPERATOR_NAME or a malformed value
 * is reported as one clear error before anything connects to a cluster; WATCH_NAMESPACE keeps the
 * seed's meaning (unset or '' = secondary resources cluster-wide); `--namespace` sets it as on
 * every operator of the project (the seed's `operator-sdk up local --namespace=`), with
 * `--watch-namespace` kept as an alias (both given and different: an error). The tenant policy flags
 * (allowed registries and Service types, allowed toleration keys and node label keys, quota
 * defaults and maximum, container defaults) are checked as a whole: an unknown Service type, a
 * key that is neither a label key nor `*`, a malformed quantity or a default quota above the
 * maximum stops the process with an error naming the flag. `--allowed-toleration-keys` defaults
 * to none, `--allowed-node-label-keys` to the well-known node labels (placement-policy.ts says why);
 * given empty, either allows none. `--shard-ring` runs the process as one
 * shard of that ControllerRing (docs/scale.md); it excludes `--leader-elect`, and the shard's name
 * (`--shard-name`, default POD_NAME, else the host name) must be usable as a Lease name.
 * `--stuck-pod-timeout` (default 5m, between 1s and 24h) is the stuck window of the status: how
 * long a pod may fail to pull, crash-loop or wait for its volume before its IoTService is Failed.
 * `--ingestion-stalled-after` (default 60s, between 10s and 1h) is how long telemetry may wait in
 * the broker with none stored before its IoTService is Failed, IngestionStalled (ingestion.ts).
 * `--webhook-cert-dir` (tls.crt and tls.key) serves the IoTService admission webhook over HTTPS
 * on `--webhook-port` (default 9443, controller-runtime's); without it no webhook is served, and
 * `--webhook-port` alone is an error. `--conversion-service <namespace>/<name>` (env
 * IOT_CONVERSION_SERVICE) keeps the IoTService CRD's conversion webhook pointed at that Service
 * (crd-conversion.ts), trusting `<webhook cert dir>/ca.crt`; it needs `--webhook-cert-dir`.
 * `--webhook-cert-secret <name>` (env IOT_WEBHOOK_CERT_SECRET) makes the operator its own webhook
 * certificate for that Service's names, kept in that Secret of the landscape namespace and written
 * into `--webhook-cert-dir` (webhook-certificate.ts); it needs both flags. `--local-conversion`
 * serves the conversion from this process on 127.0.0.1 (`--webhook-port`, default a free port)
 * and points the CRD there while it runs (local-conversion.ts); it excludes the three flags
 * above, which are for an operator in the cluster.
 */
import os from 'node:os';
import path from 'node:path';
import { metricsSecureNeedsCertDir, parseBurst, parseQps, secureMetricsFromCertDir, validateShardIdentity, webhookServerDefaults, type RateLimit, type SecureMetricsOptions, type WebhookServerOptions } from '@iot-operator/runtime';
import { Command, InvalidArgumentError } from 'commander';
import { SERVICE_TYPES, type GatewayServiceType } from './api/iotservice.ts';
import { DEFAULT_CONFIG_MOUNT_PATH } from './resources/instance.ts';
import { canonicalQuantity, quantityNanos } from './resources/quantity.ts';
import { ANY_KEY } from './resources/placement-policy.ts';
import { QUOTA_RESOURCES, defaultTenantPolicy, type QuotaValues, type TenantPolicy } from './resources/tenant-policy.ts';
import type { ConversionServiceOptions } from './webhooks/crd-conversion.ts';
import { localWebhookCertDir } from './webhooks/local-conversion.ts';
import type { OwnWebhookCertificateOptions } from './webhooks/webhook-certificate.ts';

export interface OperatorOptions {
  operatorName: string;
  watchNamespace: string;
  defaultRegistry: string;
  maxConcurrentReconciles: number;
  leaderElect: boolean;
  /** One shard of this ControllerRing, named `name` (instead of leader election). */
  shard?: { ring: string; name: string };
  metricsBindAddress: string;
  /** HTTPS, /metrics only to callers the API server authorizes. */
  secureMetrics?: SecureMetricsOptions;
  /** Serve the IoTService admission webhook (instance-namespace-webhook.ts); undefined = none. */
  webhook?: WebhookServerOptions;
  /** Keep the IoTService CRD's conversion pointed at this Service (crd-conversion.ts); undefined = never touch it. */
  conversionService?: ConversionServiceOptions;
  /** Make the webhook certificate and keep it in this Secret (webhook-certificate.ts); undefined = the files are given. */
  webhookCertSecret?: OwnWebhookCertificateOptions;
  /** Serve the conversion on 127.0.0.1 with a certificate kept in `certDir` and point the CRD here (local-conversion.ts). */
  localConversion?: { certDir: string };
  /** The client's request rate to the API server; undefined = `iotRateLimitDefaults`. */
  rateLimit?: RateLimit;
  logLevel: string;
  kubeconfig?: string;
  syncPeriodMs: number;
  /** How long a pod may be stuck (image pull, crash loop, unbound claim) before its instance is Failed; default 5 minutes. */
  stuckPodTimeoutMs?: number;
  /** How long telemetry may wait unstored before its instance is Failed (IngestionStalled), in seconds; default 60. */
  ingestionStalledAfterSeconds?: number;
  /** What IoTService authors may ask for; default `defaultTenantPolicy(defaultRegistry)`. */
  tenancy?: TenantPolicy;
  /** Where pods find config.yml; default /etc/sap/config.yml. */
  configMountPath?: string;
}

/**
 * The IoT operator's own client budget, above controller-runtime's 20 / 30: a burst of 100
 * IoTServices costs it about 2,600 requests, front-loaded into the first part of a ~70 s burst
 * whose pace the controller-manager sets (docs/performance.md); at 20 a second those requests
 * alone would take over two minutes. 200 / 400 keeps the operator off that critical path while
 * a hot loop is still held to a bounded rate.
 */
export const iotRateLimitDefaults: RateLimit = { qps: 200, burst: 400 };

const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
};

const port = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > 65535) throw new InvalidArgumentError('must be a port number (1-65535)');
  return n;
};

const defaultWebhookPort = Number(webhookServerDefaults.address.split(':')[1]);

function parseDuration(command: Command, flag: string, value: string, examples = '30s, 10m or 10h'): number {
  const match = /^(\d+)(ms|s|m|h)$/.exec(value);
  if (!match || Number(match[1]) === 0) command.error(`error: ${flag} "${value}" must be a duration such as ${examples}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as 'ms' | 's' | 'm' | 'h'];
  return Number(match[1]) * unit;
}

/** Whole seconds from 10 s (the broker is read every 15 s) to an hour. */
function parseIngestionStalledAfter(command: Command, value: string): number {
  const ms = parseDuration(command, '--ingestion-stalled-after', value, '30s or 2m');
  if (ms % 1000 !== 0 || ms < 10_000 || ms > 3_600_000) command.error(`error: --ingestion-stalled-after "${value}" must be whole seconds between 10s and 1h`);
  return ms / 1000;
}

/** At least a second (the kubelet's pod status carries seconds), at most a day. */
function parseStuckPodTimeout(command: Command, value: string): number {
  const ms = parseDuration(command, '--stuck-pod-timeout', value, '20s or 5m');
  if (ms < 1000 || ms > 86_400_000) command.error(`error: --stuck-pod-timeout "${value}" must be between 1s and 24h`);
  return ms;
}

export function operatorCommand(): Command {
  return new Command('iot-operator')
    .description('Runs IoT service instances declared as IoTService objects in the landscape namespace (OPERATOR_NAME).')
    .option('--operator-name <name>', 'landscape: the namespace whose IoTService objects are processed (env OPERATOR_NAME)', process.env.OPERATOR_NAME)
    .option('--namespace <namespace>', 'limit watches of secondary resources to this namespace; empty = cluster-wide (env WATCH_NAMESPACE)')
    .option('--watch-namespace <namespace>', 'the same as --namespace')
    .option('--default-registry <registry>', 'image registry/prefix for components when spec.registry is empty (env IOT_DEFAULT_REGISTRY)', process.env.IOT_DEFAULT_REGISTRY ?? 'registry.example.com/iot')
    .option('--max-concurrent-reconciles <n>', 'IoTServices reconciled in parallel', positiveInt, 4)
    .option('--leader-elect', 'elect a leader through a Lease in the landscape namespace (for several replicas)', false)
    .option('--shard-ring <name>', 'run as one shard of this ControllerRing (kubernetes-controller-sharding): replicas share the IoTServices instead of electing a leader')
    .option('--shard-name <name>', "this shard's name, its Lease's name in the landscape namespace (default: env POD_NAME, else the host name)")
    .option('--metrics-bind-address <host:port>', 'address of the HTTP server for /metrics, /healthz and /readyz (in a Pod: 0.0.0.0:8080, for the probes)', '127.0.0.1:8080')
    .option('--metrics-secure', 'serve over HTTPS; /metrics only to callers allowed "get /metrics" (TokenReview + SubjectAccessReview)', false)
    .option('--metrics-cert-dir <dir>', 'directory with tls.crt and tls.key for --metrics-secure')
    .option('--webhook-cert-dir <dir>', 'serve the IoTService admission webhook over HTTPS with tls.crt and tls.key of this directory (e.g. a mounted kubernetes.io/tls Secret)')
    .option('--webhook-port <port>', `port of the webhook server: on every interface with --webhook-cert-dir (default ${defaultWebhookPort}), on 127.0.0.1 with --local-conversion (default a free port)`, port)
    .option('--conversion-service <namespace/name>', "keep the IoTService CRD's conversion webhook pointed at this Service of the operator's pods, unless another one serves it (needs --webhook-cert-dir, whose ca.crt it trusts; env IOT_CONVERSION_SERVICE)", process.env.IOT_CONVERSION_SERVICE)
    .option('--webhook-cert-secret <name>', "make the webhook certificate for the --conversion-service Service and keep it in this Secret of the landscape namespace, shared by the replicas and renewed before it expires; written into --webhook-cert-dir (env IOT_WEBHOOK_CERT_SECRET)", process.env.IOT_WEBHOOK_CERT_SECRET)
    .option('--local-conversion', "out of the cluster: serve the IoTService conversion (v1alpha1 <-> v1beta1) from this process on https://127.0.0.1 (--webhook-port, default a free port) and point the CRD's conversion here until it stops; for a cluster whose API server runs on this machine", false)
    .option('--kube-api-qps <qps>', 'requests per second to the API server (0 or less = unlimited)', parseQps, iotRateLimitDefaults.qps)
    .option('--kube-api-burst <n>', 'requests allowed at once above --kube-api-qps', parseBurst, iotRateLimitDefaults.burst)
    .option('--log-level <level>', 'fatal, error, warn, info, debug or trace', process.env.LOG_LEVEL ?? 'info')
    .option('--kubeconfig <path>', 'kubeconfig file; default KUBECONFIG, ~/.kube/config, then in-cluster credentials')
    .option('--sync-period <duration>', 'how often every IoTService is re-checked without any event', '10h')
    .option('--stuck-pod-timeout <duration>', 'how long a pod may fail to pull its image, crash-loop or wait for its volume before its IoTService is Failed (tests shorten it)', '5m')
    .option('--ingestion-stalled-after <duration>', 'how long telemetry may wait in the broker with none stored before its IoTService is Failed, IngestionStalled', '60s')
    .option('--config-mount-path <path>', 'where every pod finds config.yml (env IOT_CONFIG_MOUNT_PATH)', process.env.IOT_CONFIG_MOUNT_PATH ?? DEFAULT_CONFIG_MOUNT_PATH)
    .option('--allowed-registries <list>', 'comma-separated registries (host[:port][/path]) component images may come from; default: the default registry')
    .option('--allowed-service-types <list>', `comma-separated gateway Service types an IoTService may ask for (${SERVICE_TYPES.join(', ')})`, 'ClusterIP')
    .option('--allowed-toleration-keys <list>', `comma-separated taint keys an IoTService's tolerations may name; ${ANY_KEY}: every toleration, one without a key (tolerating every taint) included; default: none`, '')
    .option('--allowed-node-label-keys <list>', `comma-separated node label keys an IoTService's nodeSelector, node affinity (matchExpressions, matchFields: metadata.name) and pod affinity topologyKey may use; ${ANY_KEY}: any`, defaults.allowedNodeLabelKeys.join(','))
    .option('--default-quota <list>', "each instance namespace's ResourceQuota unless spec.quota says otherwise: requests of all pods together", quotaText(defaults.defaultQuota))
    .option('--max-quota <list>', 'the most spec.quota may ask for', quotaText(defaults.maxQuota))
    .option('--default-container-limits <list>', "LimitRange default limits of containers without resources", resourceText(defaults.containerDefaults.limits))
    .option('--default-container-requests <list>', "LimitRange default requests of containers without resources", resourceText(defaults.containerDefaults.requests));
}

const defaults = defaultTenantPolicy('');
const quotaText = (quota: QuotaValues) => QUOTA_RESOURCES.map((r) => `${r}=${quota[r]}`).join(',');
const resourceText = (list: Readonly<Record<string, string>>) => Object.entries(list).map(([k, v]) => `${k}=${v}`).join(',');

/** `cpu=4,memory=8Gi`: quantities by name, canonical; only `names` are accepted. */
function parseResourceList(command: Command, flag: string, value: string, names: readonly string[]): Record<string, string> {
  const list: Record<string, string> = {};
  for (const entry of value.split(',').map((e) => e.trim()).filter(Boolean)) {
    const [name = '', quantity = ''] = entry.split('=').map((p) => p.trim());
    if (!names.includes(name) || quantityNanos(quantity) === undefined) {
      command.error(`error: ${flag} "${value}": each entry must be <name>=<quantity> with name one of ${names.join(', ')}, e.g. ${names[0]}=2`);
    }
    list[name] = canonicalQuantity(quantity);
  }
  return list;
}

/** The tenant policy flags as commander parses them. */
interface TenancyFlags {
  allowedRegistries?: string;
  allowedServiceTypes: string;
  allowedTolerationKeys: string;
  allowedNodeLabelKeys: string;
  defaultQuota: string;
  maxQuota: string;
  defaultContainerLimits: string;
  defaultContainerRequests: string;
}

/** A label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters. */
const labelKey = /^(?:(?=[^/]{1,253}\/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(?=[^/]{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** `a,b`: label keys (or `*`), trimmed; empty: none. */
function parseKeys(command: Command, flag: string, value: string, what: string): string[] {
  const keys = value.split(',').map((k) => k.trim()).filter(Boolean);
  const bad = keys.find((k) => k !== ANY_KEY && !labelKey.test(k));
  if (bad !== undefined) command.error(`error: ${flag}: "${bad}" is neither ${what} (a label key such as example.com/dedicated) nor ${ANY_KEY}`);
  return keys;
}

function parseTenancy(command: Command, o: TenancyFlags, defaultRegistry: string): TenantPolicy {
  const registries = (o.allowedRegistries ?? defaultRegistry).split(',').map((r) => r.trim().replace(/\/+$/, ''));
  const serviceTypes = o.allowedServiceTypes.split(',').map((t) => t.trim());
  const unknownType = serviceTypes.find((t) => !(SERVICE_TYPES as readonly string[]).includes(t));
  if (unknownType !== undefined) command.error(`error: --allowed-service-types: "${unknownType}" is not one of ${SERVICE_TYPES.join(', ')}`);
  const quota = (flag: string, value: string, fallback: QuotaValues): QuotaValues => ({ ...fallback, ...parseResourceList(command, flag, value, QUOTA_RESOURCES) });
  const defaultQuota = quota('--default-quota', o.defaultQuota, defaults.defaultQuota);
  const maxQuota = quota('--max-quota', o.maxQuota, defaults.maxQuota);
  for (const resource of QUOTA_RESOURCES) {
    if ((quantityNanos(defaultQuota[resource]) ?? 0n) > (quantityNanos(maxQuota[resource]) ?? 0n)) {
      command.error(`error: --default-quota ${resource}=${defaultQuota[resource]} is more than --max-quota ${resource}=${maxQuota[resource]}`);
    }
  }
  const containerResources = ['cpu', 'memory', 'ephemeral-storage'];
  return {
    allowedRegistries: registries,
    allowedServiceTypes: serviceTypes as GatewayServiceType[],
    allowedTolerationKeys: parseKeys(command, '--allowed-toleration-keys', o.allowedTolerationKeys, 'a taint key'),
    allowedNodeLabelKeys: parseKeys(command, '--allowed-node-label-keys', o.allowedNodeLabelKeys, 'a node label key'),
    defaultQuota,
    maxQuota,
    containerDefaults: {
      limits: parseResourceList(command, '--default-container-limits', o.defaultContainerLimits, containerResources),
      requests: parseResourceList(command, '--default-container-requests', o.defaultContainerRequests, containerResources),
    },
  };
}

const dns1123Label = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const dns1123Subdomain = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** `<namespace>/<name>` of the webhook Service; its CA is the webhook certificate directory's ca.crt. */
function parseConversionService(command: Command, value: string, webhookCertDir: string | undefined): ConversionServiceOptions {
  const [namespace = '', name = '', ...rest] = value.split('/');
  if (rest.length > 0 || !dns1123Label.test(namespace) || !dns1123Label.test(name)) command.error(`error: --conversion-service "${value}" must be <namespace>/<name> of a Service`);
  if (!webhookCertDir) command.error('error: --conversion-service needs --webhook-cert-dir: the operator serves the conversion there, and its ca.crt is the CA the CRD must trust');
  return { service: { namespace, name }, caFile: path.join(webhookCertDir, 'ca.crt') };
}

/** The Secret of the landscape that keeps the webhook certificate for the conversion Service's names. */
function parseWebhookCertSecret(command: Command, name: string, landscape: string, webhookCertDir: string | undefined, conversion: ConversionServiceOptions | undefined): OwnWebhookCertificateOptions {
  if (!dns1123Subdomain.test(name)) command.error(`error: --webhook-cert-secret "${name}" is not a valid Secret name (DNS-1123 subdomain)`);
  if (!webhookCertDir || !conversion) command.error('error: --webhook-cert-secret needs --webhook-cert-dir (where the certificate is written for the webhook server) and --conversion-service (the Service it is made for)');
  const host = `${conversion.service.name}.${conversion.service.namespace}.svc`;
  return { namespace: landscape, name, dir: webhookCertDir, names: [`DNS:${host}`, `DNS:${host}.cluster.local`] };
}

export function parseOperatorOptions(argv: string[]): OperatorOptions {
  const command: Command = operatorCommand();
  command.parse(argv, { from: 'user' });
  // As parsed: the name may be missing and the sync period is still text.
  const o = command.opts<
    Omit<OperatorOptions, 'operatorName' | 'syncPeriodMs' | 'stuckPodTimeoutMs' | 'ingestionStalledAfterSeconds' | 'watchNamespace' | 'tenancy' | 'secureMetrics' | 'webhook' | 'rateLimit'> &
      TenancyFlags & {
        operatorName?: string;
        syncPeriod: string;
        stuckPodTimeout: string;
        ingestionStalledAfter: string;
        namespace?: string;
        watchNamespace?: string;
        metricsSecure: boolean;
        metricsCertDir?: string;
        webhookCertDir?: string;
        webhookPort?: number;
        conversionService?: string;
        webhookCertSecret?: string;
        localConversion: boolean;
        kubeApiQps: number;
        kubeApiBurst: number;
        shardRing?: string;
        shardName?: string;
      }
  >();
  if (!o.operatorName) command.error('error: OPERATOR_NAME (or --operator-name) must name the landscape namespace');
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(o.operatorName) || o.operatorName.length > 63) {
    command.error(`error: OPERATOR_NAME "${o.operatorName}" is not a valid namespace name (DNS-1123 label)`);
  }
  if (o.namespace !== undefined && o.watchNamespace !== undefined && o.namespace !== o.watchNamespace) {
    command.error(`error: --namespace "${o.namespace}" and --watch-namespace "${o.watchNamespace}" disagree; give one of them`);
  }
  const configMountPath = o.configMountPath ?? DEFAULT_CONFIG_MOUNT_PATH;
  if (!/^\/[^:]*[^/]$/.test(configMountPath)) command.error(`error: --config-mount-path "${configMountPath}" must be an absolute file path`);
  if (!/^[^:]*:\d+$/.test(o.metricsBindAddress)) command.error(`error: --metrics-bind-address "${o.metricsBindAddress}" must be host:port`);
  if (o.metricsSecure && !o.metricsCertDir) command.error(`error: ${metricsSecureNeedsCertDir}`);
  if (o.localConversion) {
    const inCluster = [o.webhookCertDir && '--webhook-cert-dir', o.conversionService && '--conversion-service', o.webhookCertSecret && '--webhook-cert-secret'].filter(Boolean);
    if (inCluster.length > 0) command.error(`error: --local-conversion serves the conversion from this process with a certificate of its own; ${inCluster.join(', ')} ${inCluster.length > 1 ? 'are' : 'is'} for an operator in the cluster`);
  } else if (o.webhookPort !== undefined && !o.webhookCertDir) {
    command.error('error: --webhook-port needs --webhook-cert-dir: a directory holding tls.crt and tls.key (e.g. a mounted kubernetes.io/tls Secret)');
  }
  const localCertDir = o.localConversion ? localWebhookCertDir(o.operatorName) : undefined;
  const conversionService = o.conversionService ? parseConversionService(command, o.conversionService, o.webhookCertDir) : undefined;
  const webhookCertSecret = o.webhookCertSecret ? parseWebhookCertSecret(command, o.webhookCertSecret, o.operatorName, o.webhookCertDir, conversionService) : undefined;
  if (o.shardName !== undefined && o.shardRing === undefined) command.error('error: --shard-name needs --shard-ring');
  if (o.shardRing !== undefined && o.leaderElect) command.error('error: --shard-ring and --leader-elect exclude each other: shards share the work instead of electing a leader');
  const shard = o.shardRing === undefined ? undefined : { ring: o.shardRing, name: o.shardName ?? process.env.POD_NAME ?? os.hostname() };
  if (shard) {
    try {
      validateShardIdentity({ ...shard, types: [] });
    } catch (err) {
      command.error(`error: ${(err as Error).message}`);
    }
  }
  return {
    operatorName: o.operatorName,
    watchNamespace: o.namespace ?? o.watchNamespace ?? process.env.WATCH_NAMESPACE ?? '',
    defaultRegistry: o.defaultRegistry,
    maxConcurrentReconciles: o.maxConcurrentReconciles,
    leaderElect: o.leaderElect,
    shard,
    metricsBindAddress: o.metricsBindAddress,
    secureMetrics: o.metricsSecure && o.metricsCertDir ? secureMetricsFromCertDir(o.metricsCertDir) : undefined,
    webhook: o.webhookCertDir
      ? { address: `0.0.0.0:${o.webhookPort ?? defaultWebhookPort}`, certFile: path.join(o.webhookCertDir, 'tls.crt'), keyFile: path.join(o.webhookCertDir, 'tls.key') }
      : localCertDir
        ? { address: `127.0.0.1:${o.webhookPort ?? 0}`, certFile: path.join(localCertDir, 'tls.crt'), keyFile: path.join(localCertDir, 'tls.key') }
        : undefined,
    conversionService,
    webhookCertSecret,
    localConversion: localCertDir ? { certDir: localCertDir } : undefined,
    rateLimit: { qps: o.kubeApiQps, burst: o.kubeApiBurst },
    logLevel: o.logLevel,
    kubeconfig: o.kubeconfig,
    syncPeriodMs: parseDuration(command, '--sync-period', o.syncPeriod),
    stuckPodTimeoutMs: parseStuckPodTimeout(command, o.stuckPodTimeout),
    ingestionStalledAfterSeconds: parseIngestionStalledAfter(command, o.ingestionStalledAfter),
    tenancy: parseTenancy(command, o, o.defaultRegistry),
    configMountPath,
  };
}
