/**
 * The gateway's device cache: positive answers of core for minutes, negative ones for seconds,
 * and nothing of a device (or of any) once core announced a change (or one may have been missed).
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

test('a valid device is asked for once within the TTL (default 5 min) and again after it', async () => {
  let now = 1_000;
  const core = counting({ 'dev-1': 'pw' });
  const devices = new DeviceAuthenticator(core.check, { now: () => now });
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  now += 5 * 60_000 - 1;
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  assert.equal(core.calls.length, 1);
  now += 1;
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  assert.equal(core.calls.length, 2);
});

test('a wrong password is never admitted from the cache; a refusal is remembered for 5 s for that password only', async () => {
  let now = 1_000;
  const valid: Record<string, string> = { 'dev-1': 'pw' };
  const core = counting(valid);
  const devices = new DeviceAuthenticator(core.check, { now: () => now });
  assert.equal(await devices.authenticate('dev-1', 'pw'), true);
  assert.equal(await devices.authenticate('dev-1', 'other'), false);
  assert.equal(await devices.authenticate('dev-1', 'other'), false, 'the same wrong password: not asked again');
  assert.equal(devices.remembered('dev-1', 'other'), false);
  assert.equal(await devices.authenticate('dev-1', 'pw'), true, 'the right one still admitted from the cache');
  assert.equal(await devices.authenticate('dev-2', 'pw2'), false);
  valid['dev-2'] = 'pw2'; // registered after the gateway refused it once
  assert.equal(await devices.authenticate('dev-2', 'pw2'), false, 'within 5 s of the refusal');
  assert.equal(devices.remembered('dev-2', 'pw2'), false);
  now += 5_000;
  assert.equal(devices.remembered('dev-2', 'pw2'), undefined);
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

test('forget(id) and forgetAll: the next login of the device (of every device) asks core again; others stay cached', async () => {
  const valid: Record<string, string> = { a: '1', b: '2' };
  const core = counting(valid);
  const devices = new DeviceAuthenticator(core.check);
  assert.equal(await devices.authenticate('a', '1'), true);
  assert.equal(await devices.authenticate('b', '2'), true);
  assert.equal(await devices.authenticate('b', 'wrong'), false);
  valid.a = 'reset';
  devices.forget('a');
  assert.equal(devices.remembered('a', '1'), undefined);
  assert.equal(await devices.authenticate('a', '1'), false, 'the old password is asked about again, and refused');
  assert.equal(await devices.authenticate('a', 'reset'), true);
  assert.equal(devices.remembered('b', '2'), true, 'another device is still cached');
  devices.forgetAll();
  assert.equal(devices.remembered('b', '2'), undefined);
  assert.equal(devices.remembered('b', 'wrong'), undefined, 'refusals are forgotten too');
  assert.equal(devices.remembered('a', 'reset'), undefined);
  assert.deepEqual(core.calls, ['a', 'b', 'b', 'a', 'a']);
});

test('an answer to a check under way when the device is forgotten is not cached, and a login after it does not share that check', async () => {
  const answers: Array<(valid: boolean) => void> = [];
  let calls = 0;
  const devices = new DeviceAuthenticator(() => {
    calls++;
    return new Promise<boolean>((resolve) => answers.push(resolve));
  });
  const before = devices.authenticate('dev-1', 'old');
  devices.forget('dev-1'); // core announced a reset while it was checking
  const after = devices.authenticate('dev-1', 'old');
  assert.equal(calls, 2, 'the login after the change asks core itself');
  answers[0]!(true); // core read the password before the reset
  assert.equal(await before, true);
  assert.equal(devices.remembered('dev-1', 'old'), undefined, 'that answer is not remembered');
  answers[1]!(false);
  assert.equal(await after, false);
});
