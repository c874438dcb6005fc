/**
 * The memcached operator's command line: the runtime's common flags (`parseOperatorCommandLine`)
 * with the operator's own client budget as their default, plus `--max-concurrent-reconciles`.
 *
 * Guarantees: `--kube-api-qps` / `--kube-api-burst` default to `memcachedRateLimitDefaults`
 * (qps 0: no client-side limit; burst 30 for when a qps is given) and the flags win; `--max-concurrent-reconciles` is a positive integer (default 1,
 * controller-runtime's), anything else a usage error before anything connects.
 */

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
      },
    },
    args,
  );
  return { ...options, maxConcurrentReconciles: options.flags['maxConcurrentReconciles'] as number };
}
