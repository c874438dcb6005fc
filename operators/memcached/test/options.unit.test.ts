/**
 * The memcached operator's command line: its own client budget (200 / 400) unless the flags say
 * otherwise, and `--max-concurrent-reconciles` (default 1, a positive integer).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseMemcachedCommandLine } from '../src/options.ts';
import { memcachedRateLimitDefaults } from '../src/operator.ts';

test('defaults: client budget 200 / 400, one reconcile at a time', () => {
  assert.deepEqual(memcachedRateLimitDefaults, { qps: 200, burst: 400 });
  const options = parseMemcachedCommandLine([]);
  assert.deepEqual(options.rateLimit, { qps: 200, burst: 400 });
  assert.equal(options.maxConcurrentReconciles, 1);
});

test('the flags win: any concurrency, any budget, 0 for no client-side limit', () => {
  const options = parseMemcachedCommandLine(['--max-concurrent-reconciles', '16', '--kube-api-qps', '0', '--kube-api-burst', '30']);
  assert.equal(options.maxConcurrentReconciles, 16);
  assert.deepEqual(options.rateLimit, { qps: 0, burst: 30 });
});

test('a concurrency that is not a positive integer is a usage error', () => {
  const exit = process.exit;
  const stderr = process.stderr.write;
  let code: number | undefined;
  process.exit = ((c?: number) => {
    code = c;
    throw new Error('exit');
  }) as typeof process.exit;
  process.stderr.write = (() => true) as typeof process.stderr.write;
  try {
    for (const bad of ['0', '2.5', 'four']) {
      code = undefined;
      assert.throws(() => parseMemcachedCommandLine(['--max-concurrent-reconciles', bad]), /exit/);
      assert.equal(code, 1);
    }
  } finally {
    process.exit = exit;
    process.stderr.write = stderr;
  }
});
