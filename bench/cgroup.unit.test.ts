/**
 * Unit tests of the memory cgroup helper (bench/lib/cgroup.ts) on a stand-in cgroup tree in a
 * temporary directory: which hierarchy is chosen, the limit written, the shell prefix that moves
 * the operator into the cgroup, and a clear error when there is no memory hierarchy.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { createMemoryCgroup, enterCommand, memoryHierarchy } from './lib/cgroup.ts';

function tree(kind: 'v1' | 'v2' | 'v2-without-memory' | 'none'): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cgroup-'));
  if (kind === 'v2') writeFileSync(path.join(root, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
  if (kind === 'v2-without-memory') writeFileSync(path.join(root, 'cgroup.controllers'), 'cpu pids\n');
  if (kind === 'v1' || kind === 'v2-without-memory') {
    mkdirSync(path.join(root, 'memory'));
    writeFileSync(path.join(root, 'memory', 'memory.limit_in_bytes'), '9223372036854771712\n');
  }
  return root;
}

describe('memory cgroup', () => {
  it('uses cgroup v2 memory.max when the unified hierarchy offers the memory controller', () => {
    const root = tree('v2');
    assert.deepEqual(memoryHierarchy(root), { dir: root, limitFile: 'memory.max' });
    const cgroup = createMemoryCgroup('op', 256, root);
    assert.equal(readFileSync(path.join(root, 'op', 'memory.max'), 'utf8'), String(256 * 1024 * 1024));
    assert.equal(enterCommand(cgroup, 'node op.mjs --x'), `echo $$ > ${path.join(root, 'op', 'cgroup.procs')} && exec node op.mjs --x`);
  });

  it('falls back to the v1 memory hierarchy and its memory.limit_in_bytes', () => {
    for (const kind of ['v1', 'v2-without-memory'] as const) {
      const root = tree(kind);
      const cgroup = createMemoryCgroup('op', 128, root);
      assert.equal(cgroup.dir, path.join(root, 'memory', 'op'));
      assert.equal(readFileSync(path.join(root, 'memory', 'op', 'memory.limit_in_bytes'), 'utf8'), String(128 * 1024 * 1024));
    }
  });

  it('remove deletes the cgroup once it is empty and never throws while it is not', () => {
    const root = tree('v2');
    const cgroup = createMemoryCgroup('op', 64, root);
    cgroup.remove(); // the stand-in still holds its limit file, as a cgroup still holds a process
    assert.equal(existsSync(cgroup.dir), true);
    rmSync(path.join(cgroup.dir, 'memory.max'));
    cgroup.remove();
    assert.equal(existsSync(cgroup.dir), false);
  });

  it('says what is missing when there is no memory hierarchy', () => {
    assert.equal(memoryHierarchy(tree('none')), undefined);
    assert.throws(() => createMemoryCgroup('op', 64, tree('none')), /needs a memory cgroup hierarchy/);
  });
});
