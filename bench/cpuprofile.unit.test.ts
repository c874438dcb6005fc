/**
 * Unit tests of bench/lib/cpuprofile.ts: self time comes from the sampling intervals, idle time is
 * kept apart, and time is attributed to functions and to areas (npm packages, our files, Node.js
 * internals, V8 pseudo-frames).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { areaOf, summarizeProfile, type CpuProfile } from './lib/cpuprofile.ts';

const frame = (id: number, functionName: string, url: string, lineNumber = 0) => ({ id, callFrame: { functionName, url, lineNumber } });

const profile: CpuProfile = {
  startTime: 0,
  endTime: 10_000,
  nodes: [
    frame(1, '(root)', ''),
    frame(2, '(idle)', ''),
    frame(3, 'firstDifference', 'file:///repo/packages/runtime/src/apply/subset.ts', 16),
    frame(4, 'parse', 'file:///repo/node_modules/yaml/dist/index.js', 3),
    frame(5, '(garbage collector)', ''),
    frame(6, 'readableAddChunk', 'node:internal/streams/readable', 200),
    frame(7, 'load', 'file:///repo/node_modules/@kubernetes/client-node/dist/config.js', 9),
  ],
  samples: [2, 3, 3, 4, 5, 6, 7, 2],
  timeDeltas: [1000, 2000, 2000, 1000, 500, 250, 250, 3000],
};

describe('summarizeProfile', () => {
  const s = summarizeProfile(profile, '/repo');

  it('sums sampling intervals as self time and keeps idle apart', () => {
    assert.equal(s.idleMs, 4);
    assert.equal(s.totalMs, 6);
  });

  it('ranks functions by self time with their file and 1-based line', () => {
    assert.deepEqual(s.functions[0], { name: 'firstDifference packages/runtime/src/apply/subset.ts:17', selfMs: 4, percent: 66.7 });
    assert.deepEqual(s.functions.map((f) => f.name).slice(1), ['parse yaml:4', '(garbage collector)', 'load @kubernetes/client-node:10', 'readableAddChunk node internals:201']);
  });

  it('attributes time to areas', () => {
    assert.deepEqual(
      s.areas.map((a) => [a.name, a.selfMs]),
      [['packages/runtime/src/apply/subset.ts', 4], ['yaml', 1], ['(garbage collector)', 0.5], ['@kubernetes/client-node', 0.3], ['node internals', 0.3]],
    );
  });

  it('copes with a profile without samples', () => {
    assert.deepEqual(summarizeProfile({ nodes: [], startTime: 0, endTime: 0 }), { totalMs: 0, idleMs: 0, functions: [], areas: [] });
  });
});

describe('areaOf', () => {
  it('names scoped and plain packages, nested node_modules by the innermost package', () => {
    assert.equal(areaOf('file:///a/node_modules/@scope/pkg/x.js', 'f'), '@scope/pkg');
    assert.equal(areaOf('file:///a/node_modules/x/node_modules/y/z.js', 'f'), 'y');
  });
});
