/**
 * The gateway's limits as pieces: token buckets (pacing and bans), the login's failed-login
 * limits around the device cache, core's bound on concurrent checks, the connection cap setting
 * and the metrics text.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Bounded, BusyError } from '../src/core/bounded.ts';
import { DeviceAuthenticator, RegistryBusyError } from '../src/gateway/devices.ts';
import { maxConnections } from '../src/gateway/limits.ts';
import { DeviceLogin } from '../src/gateway/login.ts';
import { GatewayMetrics } from '../src/gateway/metrics.ts';
import { TokenBuckets } from '../src/shared/token-buckets.ts';
import { captureLog } from './harness.ts';

test('token buckets: a burst of capacity, then perSecond; keys apart; a ban lasts banMs from the first refusal', () => {
  let now = 0;
  const buckets = new TokenBuckets({ capacity: 2, perSecond: 1, now: () => now });
  assert.deepEqual([buckets.take('a'), buckets.take('a'), buckets.take('a')], [0, 0, 1000]);
  assert.equal(buckets.take('b'), 0, 'another key has its own bucket');
  now += 500;
  assert.equal(buckets.wait('a'), 500);
  assert.equal(buckets.wait('a', 2), 1500, 'until two tokens are there');
  now += 500;
  assert.equal(buckets.take('a'), 0);

  const banning = new TokenBuckets({ capacity: 1, perSecond: 1, banMs: 60_000, now: () => now });
  assert.equal(banning.take('d'), 0);
  assert.equal(banning.take('d'), 60_000);
  now += 10_000; // the bucket has refilled, the ban holds
  assert.equal(banning.take('d'), 50_000);
  now += 50_000;
  assert.equal(banning.take('d'), 0);
});

test('token buckets: reserve paces callers in order and refuses beyond maxWaitMs; maxKeys forgets the least recently used', () => {
  let now = 0;
  const buckets = new TokenBuckets({ capacity: 1, perSecond: 10, now: () => now });
  assert.deepEqual([0, 1, 2].map(() => buckets.reserve('a', 1_000)), [0, 100, 200]);
  assert.equal(buckets.reserve('a', 250), undefined, 'the next is due in 300 ms');
  assert.equal(buckets.reserve('a', 300), 300);

  const few = new TokenBuckets({ capacity: 1, perSecond: 0.001, maxKeys: 2, now: () => now });
  few.take('x');
  few.take('y');
  few.take('z'); // x forgotten
  assert.equal(few.take('x'), 0);
  assert.ok(few.take('z') > 0);
});

function core(valid: Record<string, string>) {
  const calls: string[] = [];
  let busy = false;
  return {
    calls,
    setBusy: (value: boolean) => (busy = value),
    check: async (id: string, password: string) => {
      calls.push(id);
      if (busy) throw new RegistryBusyError(2);
      return valid[id] === password;
    },
  };
}

test('login: failed logins limited per device id; the device with its cached password and other devices still admitted', async () => {
  let now = 0;
  const registry = core({ 'dev-1': 'pw', 'dev-2': 'pw2' });
  const login = new DeviceLogin(new DeviceAuthenticator(registry.check, { now: () => now }), captureLog('gateway').log, {
    perDevice: { capacity: 3, perSecond: 0.5 },
    perSource: { capacity: 100, perSecond: 100 },
    now: () => now,
  });
  assert.deepEqual(await login.login('dev-1', 'pw', 'device-address'), { admitted: true });
  for (const guess of ['a', 'b', 'c']) assert.deepEqual(await login.login('dev-1', guess, 'attacker'), { admitted: false, reason: 'bad_credentials' });
  assert.deepEqual(await login.login('dev-1', 'd', 'attacker'), { admitted: false, reason: 'rate_limited', retryAfterSeconds: 2 });
  assert.equal(registry.calls.length, 4, 'the refused guess never reached core');
  assert.deepEqual(await login.login('dev-1', 'pw', 'device-address'), { admitted: true }, 'cached: under no limit');
  assert.deepEqual(await login.login('dev-2', 'pw2', 'attacker'), { admitted: true });
  now += 2_000;
  assert.deepEqual(await login.login('dev-1', 'e', 'attacker'), { admitted: false, reason: 'bad_credentials' }, 'one token back after 2 s');
});

test('login: guesses at one device id sent at once reach core no more often than its tokens allow', async () => {
  const registry = core({ 'dev-1': 'pw' });
  const login = new DeviceLogin(new DeviceAuthenticator(registry.check), captureLog('gateway').log, {
    perDevice: { capacity: 3, perSecond: 0.001 },
    perSource: { capacity: 100, perSecond: 100 },
  });
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) => login.login('dev-1', `guess-${i}`, 'attacker')));
  assert.equal(registry.calls.length, 3, 'one check per token, not one per guess in flight');
  assert.equal(results.filter((r) => !r.admitted && r.reason === 'bad_credentials').length, 3);
  assert.equal(results.filter((r) => !r.admitted && r.reason === 'rate_limited').length, 9);

  const other = await Promise.all(['pw', 'guess'].map((password) => login.login('dev-1', password, 'device-address')));
  assert.ok(other.every((r) => !r.admitted && r.reason === 'rate_limited'), 'the id has no token left for anyone uncached');
  const tokens = new DeviceLogin(new DeviceAuthenticator(core({ 'dev-2': 'pw' }).check), captureLog('gateway').log, { perDevice: { capacity: 3, perSecond: 0.001 } });
  const together = await Promise.all(['pw', 'pw', 'guess'].map((password) => tokens.login('dev-2', password, 'device-address')));
  assert.deepEqual(together.map((r) => r.admitted), [true, true, false], 'as many checks at once as tokens, right passwords among them');
});

test('login: failed logins limited per source address; right passwords take nothing, so a crowd behind one address logs in', async () => {
  const valid: Record<string, string> = {};
  for (let i = 0; i < 50; i++) valid[`dev-${i}`] = `pw-${i}`;
  const registry = core(valid);
  const login = new DeviceLogin(new DeviceAuthenticator(registry.check), captureLog('gateway').log, {
    perDevice: { capacity: 100, perSecond: 1 },
    perSource: { capacity: 2, perSecond: 0.1 },
  });
  const crowd = await Promise.all(Object.entries(valid).map(([id, password]) => login.login(id, password, 'nat')));
  assert.ok(crowd.every((result) => result.admitted));
  assert.equal((await login.login('x-1', 'guess', 'nat')).admitted, false);
  assert.equal((await login.login('x-2', 'guess', 'nat')).admitted, false);
  assert.deepEqual(await login.login('x-3', 'guess', 'nat'), { admitted: false, reason: 'rate_limited', retryAfterSeconds: 10 });
  assert.deepEqual(await login.login('x-3', 'guess', 'elsewhere'), { admitted: false, reason: 'bad_credentials' }, 'another address is not limited');
});

test('login: core busy or failing refuses with registry_busy and its retry time, and caches nothing', async () => {
  const registry = core({ 'dev-1': 'pw' });
  const login = new DeviceLogin(new DeviceAuthenticator(registry.check), captureLog('gateway').log);
  registry.setBusy(true);
  assert.deepEqual(await login.login('dev-1', 'pw', 'a'), { admitted: false, reason: 'registry_busy', retryAfterSeconds: 2 });
  registry.setBusy(false);
  assert.deepEqual(await login.login('dev-1', 'pw', 'a'), { admitted: true });
});

test('core bound: at most `concurrency` jobs run, `maxQueued` wait, the rest BusyError at once; an aborted waiting job never runs', async () => {
  const bounded = new Bounded(1, 2);
  const started: string[] = [];
  const gates: Array<() => void> = [];
  const job = (name: string) => () => {
    started.push(name);
    return new Promise<string>((resolve) => gates.push(() => resolve(name)));
  };
  const never = new AbortController().signal;
  const abandoned = new AbortController();
  const a = bounded.run(job('a'), never);
  const b = bounded.run(job('b'), abandoned.signal);
  const c = bounded.run(job('c'), never);
  await assert.rejects(bounded.run(job('d'), never), BusyError);
  abandoned.abort(new Error('gone'));
  await assert.rejects(b, /gone/);
  assert.deepEqual(started, ['a']);
  gates.shift()!();
  assert.equal(await a, 'a');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(started, ['a', 'c'], 'b was dropped while waiting');
  gates.shift()!();
  assert.equal(await c, 'c');
  assert.equal(await bounded.run(async () => 'free again', never), 'free again');
});

test('IOT_GATEWAY_MAX_CONNECTIONS: a positive integer, or no cap when unset or empty', () => {
  assert.equal(maxConnections({}), undefined);
  assert.equal(maxConnections({ IOT_GATEWAY_MAX_CONNECTIONS: '' }), undefined);
  assert.equal(maxConnections({ IOT_GATEWAY_MAX_CONNECTIONS: '5000' }), 5000);
  assert.throws(() => maxConnections({ IOT_GATEWAY_MAX_CONNECTIONS: '0' }), /positive integer/);
  assert.throws(() => maxConnections({ IOT_GATEWAY_MAX_CONNECTIONS: '1e3' }), /positive integer/);
});

test('metrics: every refusal reason listed from 0, counted; the connection gauge', () => {
  const metrics = new GatewayMetrics();
  metrics.refused('rate_limited');
  metrics.refused('rate_limited');
  metrics.connections = 3;
  const text = metrics.render();
  assert.match(text, /^iot_gateway_refusals_total\{reason="rate_limited"\} 2$/m);
  assert.match(text, /^iot_gateway_refusals_total\{reason="client_id"\} 0$/m);
  assert.match(text, /^# TYPE iot_gateway_connections gauge$/m);
  assert.match(text, /^iot_gateway_connections 3$/m);
});
