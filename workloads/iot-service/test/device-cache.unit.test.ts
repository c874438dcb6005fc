/**
 * The gateway's device cache: positive answers of core for a short while, never negative ones.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DeviceAuthenticator } from '../src/gateway/devices.ts';

function counting(valid: Record<string, string>) {
  const calls: string[] = [];
  const check = async (id: string, password: string) => {
    calls.push(id);
    return valid[id] === password;
  };
  return { calls, check };
}

test('a valid device is asked for once within the TTL and again after it', async () => {
  let now = 1_000;
  const core = counting({ 'dev-1': 'pw' });
  const devices = new DeviceAuthenticator(core.check, { ttlMs: 30_000, now: () => now });
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  now += 29_999;
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  assert.equal(core.calls.length, 1);
  now += 1;
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  assert.equal(core.calls.length, 2);
});

test('a wrong password is never admitted from the cache, and refusals are not cached', async () => {
  const valid: Record<string, string> = { 'dev-1': 'pw' };
  const core = counting(valid);
  const devices = new DeviceAuthenticator(core.check);
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  assert.equal(await devices.authenticate('dev-1', 'other'), false);
  assert.equal(await devices.authenticate('dev-2', 'pw2'), false);
  valid['dev-2'] = 'pw2'; // registered after the gateway refused it once
  assert.equal(await devices.authenticate('dev-2', 'pw2'), true);
  assert.deepEqual(core.calls, ['dev-1', 'dev-1', 'dev-2', 'dev-2']);
});

test('malformed ids and empty passwords are refused without asking core', async () => {
  const core = counting({});
  const devices = new DeviceAuthenticator(core.check);
  assert.equal(await devices.authenticate('a/b', 'pw'), false);
  assert.equal(await devices.authenticate('dev-1', ''), false);
  assert.equal(core.calls.length, 0);
});

test('concurrent checks of one pair share a call; a failing check rejects and caches nothing', async () => {
  const core = counting({ 'dev-1': 'pw' });
  const devices = new DeviceAuthenticator(core.check);
  assert.deepEqual(await Promise.all([devices.authenticate('dev-1', 'pw'), devices.authenticate('dev-1', 'pw')]), [true, true]);
  assert.equal(core.calls.length, 1);

  let up = false;
  const flaky = new DeviceAuthenticator(async () => {
    if (!up) throw new Error('core unreachable');
    return true;
  });
  await assert.rejects(flaky.authenticate('dev-1', 'pw'), /core unreachable/);
  up = true;
  assert.equal(await flaky.authenticate('dev-1', 'pw'), true);
});

test('at most maxEntries devices are kept, the oldest dropped first', async () => {
  const core = counting({ a: '1', b: '2', c: '3' });
  const devices = new DeviceAuthenticator(core.check, { maxEntries: 2 });
  for (const [id, pw] of [['a', '1'], ['b', '2'], ['c', '3'], ['b', '2'], ['c', '3'], ['a', '1']] as const) await devices.authenticate(id, pw);
  assert.deepEqual(core.calls, ['a', 'b', 'c', 'a']);
});
