/**
 * The memcached operator's command line: the runtime's common flags (`parseOperatorCommandLine`)
 * with the operator's own client budget as their default, plus `--max-concurrent-reconciles`.
 *
 * Guarantees: `--kube-api-qps` / `--kube-api-burst` default to `memcachedRateLimitDefaults`
 * (qps 0: no client-side limit; burst 30 for when a qps is given) and the flags win; `--max-concurrent-reconciles` is a positive integer (default 1,
 * controller-runtime's), anything else a usage error before anything connects. With
 * `--webhook-cert-dir` the operator serves its defaulting and validating webhooks
 * (src/webhooks/memcached.ts) over HTTPS on `--webhook-bind-address` (default 0.0.0.0:9443) with
 * that directory's tls.crt and tls.key; without it, no webhook server.
 */

import path from 'node:path';
import { InvalidArgumentError } from 'commander';
import { parseOperatorCommandLine, type OperatorCommandLine } from '@iot-operator/runtime';
import { memcachedRateLimitDefaults, type MemcachedOperatorOptions } from './operator.ts';

const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
};

/** Parses the operator's arguments (default: this process's); exits with usage on an error. */
export function parseMemcachedCommandLine(args?: readonly string[]): OperatorCommandLine & MemcachedOperatorOptions {
  const options = parseOperatorCommandLine(
    {
      name: 'memcached-operator',
      description: 'Runs one memcached Deployment of spec.size pods per Memcached (cache.example.com/v1alpha1).',
      rateLimitDefaults: memcachedRateLimitDefaults,
      extraOptions: (program) => {
        program.option('--max-concurrent-reconciles <n>', 'Memcacheds reconciled in parallel', positiveInt, 1);
        program.option('--webhook-cert-dir <dir>', 'serve the defaulting and validating webhooks with tls.crt and tls.key of this directory (default: no webhook server)');
        program.option('--webhook-bind-address <host:port>', 'address of the webhook server (HTTPS)', '0.0.0.0:9443');
      },
    },
    args,
  );
  const certDir = options.flags['webhookCertDir'] as string | undefined;
  const webhook = certDir ? { address: options.flags['webhookBindAddress'] as string, certFile: path.join(certDir, 'tls.crt'), keyFile: path.join(certDir, 'tls.key') } : undefined;
  return { ...options, maxConcurrentReconciles: options.flags['maxConcurrentReconciles'] as number, webhook };
}
