/**
 * The memo of an instance's rendered children (rendered-children.ts): rendered once per key,
 * matches vouched for by resourceVersion and content, desired objects let go once every child
 * matches and rendered again when needed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '@iot-operator/runtime';
import { RenderedChildren, contentFingerprint, type PreparedChild } from '../src/rendered-children.ts';

const child = (name: string, generated = false): PreparedChild => {
  const object = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'ns' } };
  return { child: { object, generated } as unknown as PreparedChild['child'], desired: object };
};

/** A child as the API server returns it: with a resourceVersion, managed fields and a status. */
const observed = (resourceVersion: string, changes: { replicas?: number; readyReplicas?: number; label?: string } = {}): KubeObject =>
  ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'gateway', namespace: 'ns', resourceVersion, labels: { app: changes.label ?? 'gateway' }, managedFields: [{ manager: resourceVersion }] },
    spec: { replicas: changes.replicas ?? 2 },
    status: { readyReplicas: changes.readyReplicas ?? 0 },
  }) as unknown as KubeObject;

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
    assert.equal(next.child(0).desired.metadata.name, 'config-2');
    assert.deepEqual(next.ids, [{ kind: 'ConfigMap', name: 'config-2', namespace: 'ns', generated: false }]);
    memo.forget('ls/a');
    memo.get('ls/a', 'uid/2/secret-7', render);
    assert.equal(renders, 3, 'a forgotten instance is rendered afresh');
  });

  it('vouches for a child at the resourceVersion found to match and while only its status changes, within one rendering', () => {
    const memo = new RenderedChildren();
    const rendering = memo.get('ls/a', 'k1', () => [child('gateway')]);
    assert.equal(rendering.matches(0, observed('10')), false);
    rendering.recordMatch(0, observed('10'));
    assert.equal(rendering.matches(0, observed('10')), true);
    assert.equal(rendering.matches(0, observed('11', { readyReplicas: 2 })), true, 'a status update needs no comparison');
    assert.equal(rendering.matches(0, observed('12', { replicas: 3 })), false, 'a changed spec is compared again');
    assert.equal(rendering.matches(0, observed('13', { label: 'edited' })), false, 'changed metadata is compared again');
    assert.equal(rendering.matches(0, { ...observed('x'), metadata: { name: 'gateway' } } as KubeObject), false, 'no resourceVersion, no vouching');
    assert.equal(memo.get('ls/a', 'k2', () => [child('gateway')]).matches(0, observed('10')), false, 'a new rendering starts afresh');
  });

  it('lets the desired objects go once every child matches, the generated one included, and renders them again when one is needed', () => {
    let renders = 0;
    const rendering = new RenderedChildren().get('ls/a', 'k1', () => (renders++, [child('gateway'), child('credentials', true)]));
    rendering.releaseIfAllMatched();
    rendering.child(0);
    assert.equal(renders, 1, 'held while a child has not been found to match');
    rendering.recordMatch(0, observed('10'));
    rendering.releaseIfAllMatched();
    rendering.child(1);
    assert.equal(renders, 1, 'held while the generated child has not been found to lack nothing');
    rendering.recordMatch(1, observed('11'));
    rendering.releaseIfAllMatched();
    assert.deepEqual(rendering.child(1), child('credentials', true));
    assert.equal(renders, 2, 'rendered again when needed');
  });

  it('fingerprints everything but the status, resourceVersion and managed fields', () => {
    assert.equal(contentFingerprint(observed('1')), contentFingerprint(observed('2', { readyReplicas: 5 })));
    assert.notEqual(contentFingerprint(observed('1')), contentFingerprint(observed('1', { replicas: 1 })));
  });
});
