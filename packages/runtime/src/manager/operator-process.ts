/**
 * What every operator process is configured with — kubeconfig, watched namespace, HTTP address,
 * leader election, logging — and the command line that sets it.
 *
 * Guarantees: `parseOperatorCommandLine({ name, description })` documents every flag in
 * `--help` and reads the kubeconfig from `--kubeconfig`, else `$KUBECONFIG` (undefined then
 * means ~/.kube/config or the in-cluster service account); the watched namespace from
 * `--namespace`, else `$WATCH_NAMESPACE` (empty = all namespaces); /healthz, /readyz and
 * /metrics listen on `--metrics-bind-address` (default 127.0.0.1:8080; `0` = no HTTP server);
 * with `--leader-elect` only the holder of the Lease `<name>-leader` reconciles, the Lease living
 * in `--leader-election-namespace`, else the watched namespace, else `$POD_NAMESPACE` — none of
 * them is an error before anything connects; the log level comes from `--log-level`, else
 * `$LOG_LEVEL`, else info; an operator's own flags (`extraOptions`) appear in `--help` and in
 * `flags`. `--metrics-secure` serves them over HTTPS with the certificate in
 * `--metrics-cert-dir` (tls.crt, tls.key; required with it), /metrics then only to callers the
 * API server authorizes for `get /metrics`. `--kube-api-qps` / `--kube-api-burst` set the client's
 * request rate (default 20 / 30, controller-runtime's up to v0.20, unless the operator passes its
 * own `rateLimitDefaults`; a qps of 0 or less = unlimited); a value that is not a number is a
 * usage error. `operatorManagerOptions(name, options, cache)` turns those options
 * into the manager's, the watched namespace (empty = all) becoming the cache's default, and
 * `$OPERATOR_NAME`, when set, replacing the operator's name (its Lease, logger, Events'
 * source and metrics Service are named after it, as in operator-sdk).
 */

import { Command, InvalidArgumentError } from 'commander';
import type { Logger } from 'pino';
import type { CacheOptions } from '../cache/cache.ts';
import { clientRateLimitDefaults } from '../client/client.ts';
import type { RateLimit } from '../client/token-bucket.ts';
import path from 'node:path';
import type { LeaderElectionOptions, ManagerOptions, SecureMetricsOptions } from './manager.ts';

export interface OperatorProcessOptions {
  /** Kubeconfig file; undefined = $KUBECONFIG, ~/.kube/config or the in-cluster service account. */
  kubeconfigPath?: string;
  /** The operator's name (Lease `<name>-leader`, Events' source, metrics Service); undefined = the operator's default. */
  operatorName?: string;
  /** Namespace to watch; undefined or "" = all namespaces. */
  watchNamespace?: string;
  /** host:port of /healthz, /readyz and /metrics; undefined = no HTTP server. */
  httpAddress?: string;
  leaderElection?: LeaderElectionOptions;
  /** Serve HTTPS, /metrics only to authorized callers. */
  secureMetrics?: SecureMetricsOptions;
  /** The client's request rate; undefined = the runtime's default (20 / 30). */
  rateLimit?: RateLimit;
  logger?: Logger;
  logLevel?: string;
}

/** The certificate of a mounted kubernetes.io/tls Secret: `<dir>/tls.crt` and `<dir>/tls.key`. */
export function secureMetricsFromCertDir(dir: string): SecureMetricsOptions {
  return { certFile: path.join(dir, 'tls.crt'), keyFile: path.join(dir, 'tls.key') };
}

/** Commander parsers of --kube-api-qps (any number) and --kube-api-burst (a positive integer). */
export function parseQps(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('must be a number (requests per second; 0 or less = unlimited)');
  return n;
}
export function parseBurst(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

export const metricsSecureNeedsCertDir = '--metrics-secure needs --metrics-cert-dir: a directory holding tls.crt and tls.key (e.g. a mounted kubernetes.io/tls Secret)';

/** The options of the command line, plus the address as given (for the start-up log line). */
export interface OperatorCommandLine extends OperatorProcessOptions {
  watchNamespace: string;
  metricsBindAddress: string;
  logLevel: string;
  /** Every parsed flag by commander's camel-case name, those of `extraOptions` included. */
  flags: Record<string, unknown>;
}

/** Parses the operator's arguments (default: this process's); exits with usage on an error. */
export function parseOperatorCommandLine(
  operator: { name: string; description: string; extraOptions?: (program: Command) => void; rateLimitDefaults?: RateLimit },
  args?: readonly string[],
): OperatorCommandLine {
  const rateDefaults = operator.rateLimitDefaults ?? clientRateLimitDefaults;
  const program = new Command()
    .name(operator.name)
    .description(operator.description)
    .option('--kubeconfig <path>', 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config or in-cluster)', process.env.KUBECONFIG)
    .option('--namespace <namespace>', 'namespace to watch, empty = all namespaces; $WATCH_NAMESPACE sets the default', process.env.WATCH_NAMESPACE ?? '')
    .option('--metrics-bind-address <host:port>', 'address of /healthz, /readyz and /metrics; 0 = off', '127.0.0.1:8080')
    .option('--metrics-secure', 'serve over HTTPS; /metrics only to callers allowed "get /metrics" (TokenReview + SubjectAccessReview)', false)
    .option('--metrics-cert-dir <dir>', 'directory with tls.crt and tls.key for --metrics-secure')
    .option('--kube-api-qps <qps>', 'requests per second to the API server (0 or less = unlimited)', parseQps, rateDefaults.qps)
    .option('--kube-api-burst <n>', 'requests allowed at once above --kube-api-qps', parseBurst, rateDefaults.burst)
    .option('--leader-elect', `reconcile only while holding the Lease ${operator.name}-leader`, false)
    .option('--leader-election-namespace <namespace>', 'namespace of the Lease (default: the watched namespace, else $POD_NAMESPACE)')
    .option('--log-level <level>', 'pino log level', process.env.LOG_LEVEL ?? 'info');
  operator.extraOptions?.(program);
  if (args) program.parse([...args], { from: 'user' });
  else program.parse();

  const flags = program.opts<{
    kubeconfig?: string;
    namespace: string;
    metricsBindAddress: string;
    metricsSecure: boolean;
    metricsCertDir?: string;
    kubeApiQps: number;
    kubeApiBurst: number;
    leaderElect: boolean;
    leaderElectionNamespace?: string;
    logLevel: string;
  }>();
  const leaseNamespace = flags.leaderElectionNamespace || flags.namespace || process.env.POD_NAMESPACE;
  if (flags.leaderElect && !leaseNamespace) {
    program.error('--leader-elect needs a namespace for the Lease: set --leader-election-namespace, --namespace or $POD_NAMESPACE');
  }
  if (flags.metricsSecure && !flags.metricsCertDir) program.error(metricsSecureNeedsCertDir);
  return {
    operatorName: process.env.OPERATOR_NAME || undefined,
    kubeconfigPath: flags.kubeconfig || undefined,
    watchNamespace: flags.namespace,
    httpAddress: flags.metricsBindAddress === '0' ? undefined : flags.metricsBindAddress,
    metricsBindAddress: flags.metricsBindAddress,
    leaderElection: flags.leaderElect && leaseNamespace ? { namespace: leaseNamespace } : undefined,
    secureMetrics: flags.metricsSecure && flags.metricsCertDir ? secureMetricsFromCertDir(flags.metricsCertDir) : undefined,
    rateLimit: { qps: flags.kubeApiQps, burst: flags.kubeApiBurst },
    logLevel: flags.logLevel,
    flags: { ...flags },
  };
}

/** The manager options of an operator process named `name`, caching `cache` in the watched namespace. */
export function operatorManagerOptions(name: string, options: OperatorProcessOptions, cache: Omit<CacheOptions, 'defaultNamespace'> = {}): ManagerOptions {
  return {
    name: options.operatorName || name,
    kubeconfigPath: options.kubeconfigPath,
    httpAddress: options.httpAddress,
    secureMetrics: options.secureMetrics,
    rateLimit: options.rateLimit,
    leaderElection: options.leaderElection,
    logger: options.logger,
    logLevel: options.logLevel,
    cache: { ...cache, defaultNamespace: options.watchNamespace || undefined },
  };
}
