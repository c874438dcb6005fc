// waitEstablished (packages/sdk/src/cluster.ts), what `operator-ts run` waits for after applying a
// project's CRDs: kubectl 1.33 exits at once with ".status.conditions accessor error" on a CRD
// just applied whose status has no conditions yet, which failed `operator-ts run` on a busy
// cluster. A stand-in kubectl answers as the real one did.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitEstablished } from '../src/cluster.ts';

const ACCESSOR_ERROR = 'error: .status.conditions accessor error: <nil> is of the type <nil>, expected []interface{}';

/** Runs waitEstablished with a kubectl that fails its first `failures` calls, then succeeds; returns its calls, or the error. */
async function wait(failures: number, timeoutMs: number): Promise<{ calls: string[]; error?: Error }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'wait-established-'));
  try {
    const calls = path.join(dir, 'calls');
    writeFileSync(calls, '');
    const kubectl = path.join(dir, 'kubectl');
    writeFileSync(kubectl, `#!/bin/bash\necho "$*" >> "${calls}"\nif (( $(wc -l < "${calls}") <= ${failures} )); then echo '${ACCESSOR_ERROR}' >&2; exit 1; fi\necho "condition met"\n`);
    chmodSync(kubectl, 0o755);
    const error = await waitEstablished(kubectl, '/k/config', ['-f', 'a_crd.yaml'], timeoutMs).then(
      () => undefined,
      (e: Error) => e,
    );
    return { calls: readFileSync(calls, 'utf8').trim().split('\n').filter(Boolean), ...(error ? { error } : {}) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('waitEstablished', () => {
  test('asks again after kubectl gives up on conditions that are still null, and returns once they are met', async () => {
    const r = await wait(2, 30_000);
    assert.equal(r.error, undefined);
    assert.equal(r.calls.length, 3);
    assert.equal(r.calls[0], '--kubeconfig /k/config wait --for condition=Established --timeout 5s -f a_crd.yaml');
  });

  test("fails with kubectl's last answer once the deadline has passed", async () => {
    const r = await wait(1_000, 1_200);
    assert.match(String(r.error), /accessor error/);
    assert.ok(r.calls.length >= 2, `asked ${r.calls.length} times`);
  });
});
