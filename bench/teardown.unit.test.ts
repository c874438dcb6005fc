/**
 * Unit tests of bench/lib/teardown.ts: the tear-down always runs once; a failed phase's own error
 * is what the caller sees even when the tear-down fails too; a tear-down failing after a good
 * phase is not hidden.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withTeardown } from './lib/teardown.ts';

describe('withTeardown', () => {
  it('returns the phase result after tearing down once', async () => {
    const order: string[] = [];
    const reports: string[] = [];
    const result = await withTeardown(
      async () => { order.push('phase'); return 42; },
      async () => { order.push('teardown'); },
      (line) => reports.push(line),
    );
    assert.equal(result, 42);
    assert.deepEqual(order, ['phase', 'teardown']);
    assert.deepEqual(reports, []);
  });

  it("throws the phase's error, not the tear-down's, and reports the tear-down's", async () => {
    const phaseError = new Error('creating the children: 504 Gateway Timeout');
    const reports: string[] = [];
    let teardowns = 0;
    await assert.rejects(
      withTeardown(
        async () => { throw phaseError; },
        async () => { teardowns++; throw new Error('timed out waiting for namespaces to be gone'); },
        (line) => reports.push(line),
      ),
      (err) => err === phaseError,
    );
    assert.equal(teardowns, 1);
    assert.equal(reports.length, 1);
    assert.match(reports[0]!, /timed out waiting for namespaces to be gone/);
  });

  it('tears down after a failed phase and throws its error', async () => {
    let toreDown = false;
    await assert.rejects(
      withTeardown(async () => { throw new Error('phase failed'); }, async () => { toreDown = true; }, () => assert.fail('nothing to report')),
      /phase failed/,
    );
    assert.ok(toreDown);
  });

  it('fails when the tear-down fails after a good phase', async () => {
    await assert.rejects(
      withTeardown(async () => 'ok', async () => { throw new Error('cluster not recreated'); }, () => assert.fail('thrown, not reported')),
      /cluster not recreated/,
    );
  });
});
