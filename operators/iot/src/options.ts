/**
 * The operator process's configuration: environment (OPERATOR_NAME, WATCH_NAMESPACE, KUBECONFIG)
 * and command-line flags, parsed and checked in one place.
 *
 * Guarantees: every flag is documented in `--help`; a missing OPERATOR_NAME or a malformed value
 * is reported as one clear error before anything connects to a cluster; WATCH_NAMESPACE keeps the
 * seed's meaning (unset or '' = secondary resources cluster-wide).
 */
import { metricsSecureNeedsCertDir, parseBurst, parseQps, secureMetricsFromCertDir, type RateLimit, type SecureMetricsOptions } from '@iot-operator/runtime';
import { Command, InvalidArgumentError } from 'commander';

export interface OperatorOptions {
  operatorName: string;
  watchNamespace: string;
  defaultRegistry: string;
  maxConcurrentReconciles: number;
  leaderElect: boolean;
  metricsBindAddress: string;
  /** HTTPS, /metrics only to callers the API server authorizes. */
  secureMetrics?: SecureMetricsOptions;
  /** The client's request rate to the API server; undefined = `iotRateLimitDefaults`. */
  rateLimit?: RateLimit;
  logLevel: string;
  kubeconfig?: string;
  syncPeriodMs: number;
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

function parseDuration(command: Command, value: string): number {
  const match = /^(\d+)(ms|s|m|h)$/.exec(value);
  if (!match || Number(match[1]) === 0) command.error(`error: --sync-period "${value}" must be a duration such as 30s, 10m or 10h`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as 'ms' | 's' | 'm' | 'h'];
  return Number(match[1]) * unit;
}

export function operatorCommand(): Command {
  return new Command('iot-operator')
    .description('Runs IoT service instances declared as IoTService objects in the landscape namespace (OPERATOR_NAME).')
    .option('--operator-name <name>', 'landscape: the namespace whose IoTService objects are processed (env OPERATOR_NAME)', process.env.OPERATOR_NAME)
    .option('--watch-namespace <namespace>', 'limit watches of secondary resources to this namespace; empty = cluster-wide (env WATCH_NAMESPACE)', process.env.WATCH_NAMESPACE ?? '')
    .option('--default-registry <registry>', 'image registry/prefix for components when spec.registry is empty (env IOT_DEFAULT_REGISTRY)', process.env.IOT_DEFAULT_REGISTRY ?? 'registry.example.com/iot')
    .option('--max-concurrent-reconciles <n>', 'IoTServices reconciled in parallel', positiveInt, 4)
    .option('--leader-elect', 'elect a leader through a Lease in the landscape namespace (for several replicas)', false)
    .option('--metrics-bind-address <host:port>', 'address of the HTTP server for /metrics, /healthz and /readyz (in a Pod: 0.0.0.0:8080, for the probes)', '127.0.0.1:8080')
    .option('--metrics-secure', 'serve over HTTPS; /metrics only to callers allowed "get /metrics" (TokenReview + SubjectAccessReview)', false)
    .option('--metrics-cert-dir <dir>', 'directory with tls.crt and tls.key for --metrics-secure')
    .option('--kube-api-qps <qps>', 'requests per second to the API server (0 or less = unlimited)', parseQps, iotRateLimitDefaults.qps)
    .option('--kube-api-burst <n>', 'requests allowed at once above --kube-api-qps', parseBurst, iotRateLimitDefaults.burst)
    .option('--log-level <level>', 'fatal, error, warn, info, debug or trace', process.env.LOG_LEVEL ?? 'info')
    .option('--kubeconfig <path>', 'kubeconfig file; default KUBECONFIG, ~/.kube/config, then in-cluster credentials')
    .option('--sync-period <duration>', 'how often every IoTService is re-checked without any event', '10h');
}

export function parseOperatorOptions(argv: string[]): OperatorOptions {
  const command: Command = operatorCommand();
  command.parse(argv, { from: 'user' });
  // As parsed: the name may be missing and the sync period is still text.
  const o = command.opts<
    Omit<OperatorOptions, 'operatorName' | 'syncPeriodMs' | 'secureMetrics' | 'rateLimit'> & {
      operatorName?: string;
      syncPeriod: string;
      metricsSecure: boolean;
      metricsCertDir?: string;
      kubeApiQps: number;
      kubeApiBurst: number;
    }
  >();
  if (!o.operatorName) command.error('error: OPERATOR_NAME (or --operator-name) must name the landscape namespace');
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(o.operatorName) || o.operatorName.length > 63) {
    command.error(`error: OPERATOR_NAME "${o.operatorName}" is not a valid namespace name (DNS-1123 label)`);
  }
  if (!/^[^:]*:\d+$/.test(o.metricsBindAddress)) command.error(`error: --metrics-bind-address "${o.metricsBindAddress}" must be host:port`);
  if (o.metricsSecure && !o.metricsCertDir) command.error(`error: ${metricsSecureNeedsCertDir}`);
  return {
    operatorName: o.operatorName,
    watchNamespace: o.watchNamespace,
    defaultRegistry: o.defaultRegistry,
    maxConcurrentReconciles: o.maxConcurrentReconciles,
    leaderElect: o.leaderElect,
    metricsBindAddress: o.metricsBindAddress,
    secureMetrics: o.metricsSecure && o.metricsCertDir ? secureMetricsFromCertDir(o.metricsCertDir) : undefined,
    rateLimit: { qps: o.kubeApiQps, burst: o.kubeApiBurst },
    logLevel: o.logLevel,
    kubeconfig: o.kubeconfig,
    syncPeriodMs: parseDuration(command, o.syncPeriod),
  };
}
