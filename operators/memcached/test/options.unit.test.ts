/**
 * The memcached operator's command line: no client-side limit unless the flags set one (burst 30
 * then, the runtime's), and `--max-concurrent-reconciles` (default 1, a positive integer).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseMemcachedCommandLine } from '../src/options.ts';
import { memcachedRateLimitDefaults } from '../src/operator.ts';

test('defaults: no client-side limit, one reconcile at a time', () => {
  assert.deepEqual(memcachedRateLimitDefaults, { qps: 0, burst: 30 });
  const options = parseMemcachedCommandLine([]);
  assert.deepEqual(options.rateLimit, { qps: 0, burst: 30 });
  assert.equal(options.maxConcurrentReconciles, 1);
});

test('the flags win: any concurrency; --kube-api-qps 20 alone brings back the runtime\'s 20 / 30', () => {
  const options = parseMemcachedCommandLine(['--max-concurrent-reconciles', '16', '--kube-api-qps', '20']);
  assert.equal(options.maxConcurrentReconciles, 16);
  assert.deepEqual(options.rateLimit, { qps: 20, burst: 30 });
  assert.deepEqual(parseMemcachedCommandLine(['--kube-api-qps', '200', '--kube-api-burst', '400']).rateLimit, { qps: 200, burst: 400 });
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
