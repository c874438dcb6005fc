import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RenderedChildren, type PreparedChild } from '../src/rendered-children.ts';

const child = (name: string): PreparedChild => {
  const object = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'ns' } };
  return { child: { object, createOnly: false } as unknown as PreparedChild['child'], desired: object };
};

describe('RenderedChildren', () => {
  it('renders an instance once per rendering key and again when the key changes', () => {
    const memo = new RenderedChildren();
    let renders = 0;
    const render = () => (renders++, [child(`config-${renders}`)]);
    const first = memo.get('ls/a', 'uid/1/secret-7', render);
    assert.equal(memo.get('ls/a', 'uid/1/secret-7', render), first);
    assert.equal(renders, 1);
    const next = memo.get('ls/a', 'uid/2/secret-7', render);
    assert.notEqual(next, first);
    assert.equal(next.children[0]!.desired.metadata.name, 'config-2');
    memo.forget('ls/a');
    memo.get('ls/a', 'uid/2/secret-7', render);
    assert.equal(renders, 3, 'a forgotten instance is rendered afresh');
  });

  it('vouches for a child only at the exact resourceVersion found to match, and only within one rendering', () => {
    const memo = new RenderedChildren();
    const rendering = memo.get('ls/a', 'k1', () => [child('config')]);
    assert.equal(rendering.matches(0, '10'), false);
    rendering.recordMatch(0, '10');
    assert.equal(rendering.matches(0, '10'), true);
    assert.equal(rendering.matches(0, '11'), false, 'a changed object is compared again');
    assert.equal(rendering.matches(0, undefined), false);
    assert.equal(memo.get('ls/a', 'k2', () => [child('config')]).matches(0, '10'), false, 'a new rendering starts afresh');
  });
});
