// kwokctl (cluster/lib.sh) tells kwokctl's JSON log lines as the scripts' own
// `[cluster HH:MM:SS] kwokctl: …` lines, passes its other stderr lines and its stdout unchanged,
// and keeps its exit status. A stand-in kwokctl prints what kwokctl v0.7.0 printed to a pipe.
//
//   node --import tsx --test cluster/test/kwokctl-log.unit.test.ts
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const common = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'lib.sh');
const CREATED = '{"time":"2026-11-27T12:04:39Z","level":"INFO","source":{"function":"sigs.k8s.io/kwok/pkg/kwokctl/cmd/create/cluster.runE"},"msg":"Cluster is created","cluster":"iot-operator","elapsed":{"nanosecond":551818255,"human":"551.818255ms"}}';
const FAILED = '{"time":"2026-11-27T12:04:40Z","level":"ERROR","msg":"Failed to start \\"kube-apiserver\\"","cluster":"iot-operator","err":"exit status 1"}';

function kwokctl(exitCode: number) {
  const dir = mkdtempSync(path.join(tmpdir(), 'kwokctl-log-'));
  try {
    writeFileSync(path.join(dir, 'kwokctl'), `#!/bin/bash\necho '${CREATED}' >&2\necho 'a plain line' >&2\necho '${FAILED}' >&2\necho "stdout: $*"\nexit ${exitCode}\n`);
    chmodSync(path.join(dir, 'kwokctl'), 0o755);
    return spawnSync('bash', ['-c', `source "${common}"; BIN_DIR="${dir}"; kwokctl get clusters`], { encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('kwokctl log lines', () => {
  test('JSON lines become [cluster …] lines with the message, elapsed time and error; others pass unchanged', () => {
    const run = kwokctl(0);
    assert.equal(run.status, 0);
    const lines = run.stderr.trim().split('\n');
    assert.match(lines[0]!, /^\[cluster \d\d:\d\d:\d\d\] kwokctl: Cluster is created \(551\.818255ms\)$/);
    assert.equal(lines[1], 'a plain line');
    assert.match(lines[2]!, /^\[cluster \d\d:\d\d:\d\d\] kwokctl: ERROR: Failed to start \\"kube-apiserver\\" \(exit status 1\)$/);
    assert.equal(lines.length, 3);
    assert.equal(run.stdout, 'stdout: --name iot-operator get clusters\n', 'stdout untouched');
  });

  test('kwokctl’s exit status is kept', () => {
    assert.equal(kwokctl(3).status, 3);
  });
});
