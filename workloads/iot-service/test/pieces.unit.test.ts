/**
 * The pure pieces: Authorization headers, secret comparison, password hashing, ids, the telemetry
 * envelope, JSON log lines and retrying.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBytes, scryptSync } from 'node:crypto';
import { generatePassword, hashPassword, verifyPassword } from '../src/core/passwords.ts';
import { parseBasic, parseBearer, sameSecret } from '../src/shared/http.ts';
import { createLogger } from '../src/shared/log.ts';
import { backoff, retry } from '../src/shared/retry.ts';
import { decodeEnvelope, deviceTelemetryTopic, encodeEnvelope, isDeviceId, isMessageId, parseDeviceTopic, telemetryTopic } from '../src/shared/telemetry.ts';

test('parseBearer takes the token of a Bearer header only', () => {
  assert.equal(parseBearer('Bearer abc-DEF_1'), 'abc-DEF_1');
  assert.equal(parseBearer('bearer  abc '), 'abc');
  for (const header of [undefined, '', 'Bearer', 'Bearer a b', 'Basic abc', 'abc']) assert.equal(parseBearer(header), undefined, String(header));
});

test('parseBasic splits user and password at the first colon', () => {
  const basic = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`;
  assert.deepEqual(parseBasic(basic('dev-1:pa:ss')), { user: 'dev-1', password: 'pa:ss' });
  assert.deepEqual(parseBasic(basic('dev-1:')), { user: 'dev-1', password: '' });
  for (const header of [undefined, 'Basic', basic('no-colon'), basic(':pw'), 'Bearer x', 'Basic !!!']) {
    assert.equal(parseBasic(header), undefined, String(header));
  }
});

test('sameSecret is equality, for any lengths', () => {
  assert.equal(sameSecret('token', 'token'), true);
  assert.equal(sameSecret('token', 'token2'), false);
  assert.equal(sameSecret('', 'x'), false);
});

test('passwords: generated unique, stored as salted SHA-256, verified only with the right password; scrypt hashes of before still verify', async () => {
  const password = generatePassword();
  assert.match(password, /^[A-Za-z0-9_-]{32}$/);
  assert.notEqual(generatePassword(), password);
  const hash = await hashPassword(password);
  assert.match(hash, /^sha256\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  assert.ok(!hash.includes(password));
  assert.notEqual(await hashPassword(password), hash, 'salted');
  assert.equal(await verifyPassword(password, hash), true);
  assert.equal(await verifyPassword(`${password}x`, hash), false);

  // A hash written before (scrypt, its parameters in it) verifies as it did.
  const salt = randomBytes(16);
  const legacy = ['scrypt', 16384, 8, 1, salt.toString('base64url'), scryptSync(password, salt, 32, { N: 16384, r: 8, p: 1 }).toString('base64url')].join('$');
  assert.equal(await verifyPassword(password, legacy), true);
  assert.equal(await verifyPassword(`${password}x`, legacy), false);
  for (const broken of ['', 'plain', 'scrypt$1$8$1$c2FsdA$aGFzaA', legacy.replace('$16384$', '$3$'), hash.replace('sha256$', 'md5$'), hash.slice(0, -2)]) {
    assert.equal(await verifyPassword(password, broken), false, broken);
  }
});

test('device ids are one topic level; message ids printable ASCII', () => {
  for (const id of ['dev-1', 'a.b_c:d', 'x'.repeat(128)]) assert.ok(isDeviceId(id), id);
  for (const id of ['', 'a/b', 'a+b', 'a#', 'a b', 'x'.repeat(129), 42]) assert.ok(!isDeviceId(id), String(id));
  assert.equal(telemetryTopic('dev-1'), 'telemetry/dev-1');
  for (const id of ['m-1', '550e8400-e29b-41d4-a716-446655440000', '{x}']) assert.ok(isMessageId(id), id);
  for (const id of ['', 'a b', 'é', 'x'.repeat(129), undefined]) assert.ok(!isMessageId(id), String(id));
});

test('a device publishes to its topic, naming its message in a property bag or not', () => {
  assert.deepEqual(parseDeviceTopic('telemetry/dev-1'), { deviceId: 'dev-1' });
  assert.deepEqual(parseDeviceTopic('telemetry/dev-1/?message-id=m-1'), { deviceId: 'dev-1', messageId: 'm-1' });
  for (const id of ['m-1', 'a/b?c=d&e', '{x}#+%', 'x'.repeat(128)]) {
    assert.deepEqual(parseDeviceTopic(deviceTelemetryTopic('dev-1', id)), { deviceId: 'dev-1', messageId: id }, id);
  }
  assert.equal(deviceTelemetryTopic('dev-1'), 'telemetry/dev-1');
  for (const topic of [
    'telemetry/',
    'telemetry/dev-1/',
    'telemetry/dev-1/x',
    'telemetry/dev-1/?',
    'telemetry/dev-1/?message-id=',
    'telemetry/dev-1/?message-id=a%20b',
    'telemetry/dev-1/?message-id=%E0%A4%A',
    'telemetry/dev-1/?message-id=a&message-id=b',
    'telemetry/dev-1/?message-id=a&other=b',
    'telemetry/dev-1/?messageid=a',
    'telemetry/dev-1/?message-id=a=b',
    'other/dev-1',
    'telemetry/a b',
  ]) {
    assert.equal(parseDeviceTopic(topic), undefined, topic);
  }
});

test('the envelope round-trips and anything malformed is refused by name', () => {
  const envelope = { messageId: 'm-1', deviceId: 'dev-1', receivedAt: '2025-01-01T00:00:00.000Z', payload: { t: 21.5 } };
  assert.deepEqual(decodeEnvelope(encodeEnvelope(envelope)), envelope);
  assert.throws(() => decodeEnvelope('nope'), /not JSON/);
  assert.throws(() => decodeEnvelope('[1]'), /not a JSON object/);
  const without = (patch: Record<string, unknown>) => JSON.stringify({ ...envelope, ...patch });
  assert.throws(() => decodeEnvelope(without({ messageId: '' })), /messageId/);
  assert.throws(() => decodeEnvelope(without({ deviceId: 'a/b' })), /deviceId/);
  assert.throws(() => decodeEnvelope(without({ receivedAt: 'yesterday' })), /receivedAt/);
  assert.throws(() => decodeEnvelope(without({ payload: 3 })), /payload/);
});

test('log lines are single JSON objects with time, level, component, msg and fields', () => {
  const lines: string[] = [];
  const log = createLogger('core', (line) => lines.push(line));
  log.info('started', { version: '2.4.1' });
  log.error('failed', { error: new Error('boom'), text: 'a\nb' });
  assert.equal(lines.length, 2);
  assert.ok(lines.every((line) => line.endsWith('\n') && !line.slice(0, -1).includes('\n')));
  const [first, second] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.deepEqual(Object.keys(first ?? {}), ['time', 'level', 'component', 'msg', 'version']);
  assert.equal(first?.version, '2.4.1');
  assert.equal(second?.level, 'error');
  assert.equal(second?.error, 'boom');
});

test('retry returns the first success, reports failures, and stops on abort', async () => {
  assert.deepEqual([1, 2, 3, 6, 7, 10].map(backoff), [200, 400, 800, 5000, 5000, 5000]);
  let calls = 0;
  const failures: number[] = [];
  const value = await retry(
    async () => {
      if (++calls < 3) throw new Error('not yet');
      return 'done';
    },
    { signal: new AbortController().signal, delayMs: () => 1, onFailure: (_e, n) => failures.push(n) },
  );
  assert.equal(value, 'done');
  assert.deepEqual(failures, [1, 2]);

  const stop = new AbortController();
  const attempts: number[] = [];
  const stopped = retry(
    async () => {
      attempts.push(1);
      throw new Error('never');
    },
    { signal: stop.signal, delayMs: () => 5, onFailure: () => undefined },
  );
  setTimeout(() => stop.abort(new Error('stopping')), 20);
  await assert.rejects(stopped, /stopping/);
  const made = attempts.length;
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(attempts.length, made, 'no attempt after the abort');
});
