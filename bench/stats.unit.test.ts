/**
 * Unit tests of bench/lib/stats.ts: percentiles interpolate between closest ranks (NumPy's
 * default), handle tiny and empty samples, ignore non-finite values and never mutate the input.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { median, percentile, round, summarize } from './lib/stats.ts';

describe('percentile', () => {
  it('interpolates linearly between closest ranks', () => {
    const v = [1, 2, 3, 4];
    assert.equal(percentile(v, 0), 1);
    assert.equal(percentile(v, 100), 4);
    assert.equal(percentile(v, 50), 2.5);
    assert.ok(Math.abs(percentile(v, 99) - 3.97) < 1e-9);
  });

  it('matches NumPy on an unsorted sample', () => {
    // numpy.percentile([15, 20, 35, 40, 50], [40, 95]) == [29.0, 48.0]
    assert.equal(percentile([50, 15, 40, 20, 35], 40), 29);
    assert.ok(Math.abs(percentile([50, 15, 40, 20, 35], 95) - 48) < 1e-9);
  });

  it('gives the only value of a one-element sample and NaN for an empty one', () => {
    assert.equal(percentile([7], 99), 7);
    assert.ok(Number.isNaN(percentile([], 50)));
  });

  it('ignores NaN and infinities', () => {
    assert.equal(median([1, Number.NaN, 3, Number.POSITIVE_INFINITY]), 2);
  });

  it('rejects a percentile outside [0, 100]', () => {
    assert.throws(() => percentile([1], 101), RangeError);
  });

  it('does not reorder its input', () => {
    const v = [3, 1, 2];
    percentile(v, 50);
    assert.deepEqual(v, [3, 1, 2]);
  });
});

describe('summarize and round', () => {
  it('summarises count, extremes, percentiles and mean', () => {
    const s = summarize([4, 1, 3, 2]);
    assert.deepEqual({ count: s.count, min: s.min, max: s.max, p50: s.p50, mean: s.mean }, { count: 4, min: 1, max: 4, p50: 2.5, mean: 2.5 });
  });

  it('gives NaN extremes for an empty sample instead of ±Infinity', () => {
    const s = summarize([]);
    assert.equal(s.count, 0);
    assert.ok(Number.isNaN(s.min) && Number.isNaN(s.max) && Number.isNaN(s.p99));
  });

  it('rounds to the given decimals and passes NaN through', () => {
    assert.equal(round(1.23456, 2), 1.23);
    assert.ok(Number.isNaN(round(Number.NaN)));
  });
});
