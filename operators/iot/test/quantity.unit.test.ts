import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalQuantity, canonicalResourceList } from '../src/resources/quantity.ts';

describe('canonicalQuantity (the form the API server returns)', () => {
  const cases: Array<[string | number, string]> = [
    ['10Gi', '10Gi'],
    ['1024Mi', '1Gi'],
    ['1.5Gi', '1536Mi'],
    ['2048Ki', '2Mi'],
    ['0.5Ki', '512'],
    ['500m', '500m'],
    ['0.5', '500m'],
    ['.25', '250m'],
    ['1.5', '1500m'],
    ['1000', '1k'],
    ['1000k', '1M'],
    ['3G', '3G'],
    ['1e3', '1e3'],
    ['1.5e3', '1500'],
    ['0', '0'],
    ['0Gi', '0'],
    ['0.0000000001', '1n'],
    [2, '2'],
    [1073741824, '1073741824'],
  ];
  for (const [input, expected] of cases) {
    it(`${JSON.stringify(input)} -> ${expected}`, () => assert.equal(canonicalQuantity(input), expected));
  }

  it('leaves a string outside the grammar unchanged for the API server to refuse', () => {
    assert.equal(canonicalQuantity('ten gigs'), 'ten gigs');
  });

  it('canonicalises a resource list and sorts its keys', () => {
    const list = canonicalResourceList({ memory: '1024Mi', cpu: 0.5 });
    assert.deepEqual(Object.entries(list), [
      ['cpu', '500m'],
      ['memory', '1Gi'],
    ]);
  });
});
