/**
 * Relating objects to their primary: `controllerReference` is the ownerReference a child
 * carries; for objects that are not children by ownerReference `mapByLabel` finds the primary
 * named in a label, only for objects carrying the required labels; `phaseOrDeletionChanged`
 * lets through only updates that change the phase or the deletion mark.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { controllerReference, customResource, type KubeObject } from '../src/client/resource.ts';
import { mapByLabel } from '../src/controller/builder.ts';
import { phaseOrDeletionChanged } from '../src/controller/predicates.ts';

const pod = (labels: Record<string, string>, phase = 'Running', deletionTimestamp?: string): KubeObject & { status: { phase: string } } => ({
  metadata: { name: 'p', namespace: 'ns', labels, ...(deletionTimestamp ? { deletionTimestamp } : {}) },
  status: { phase },
});

describe('controllerReference', () => {
  it('names the owner by apiVersion, kind, name and uid, as controller blocking its deletion', () => {
    const Widget = customResource('example.com', 'v1', 'Widget', 'widgets');
    assert.deepEqual(controllerReference(Widget, { metadata: { name: 'w1', namespace: 'ns', uid: 'u1' } }), {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      name: 'w1',
      uid: 'u1',
      controller: true,
      blockOwnerDeletion: true,
    });
  });
});

describe('mapByLabel', () => {
  const map = mapByLabel('example.com/owner', { app: 'demo' });

  it('maps an object with the required labels to the primary its label names, in its namespace', () => {
    assert.deepEqual(map(pod({ app: 'demo', 'example.com/owner': 'w1' })), [{ namespace: 'ns', name: 'w1' }]);
  });

  it('maps other objects, or objects without the name label, to nothing', () => {
    assert.deepEqual(map(pod({ app: 'other', 'example.com/owner': 'w1' })), []);
    assert.deepEqual(map(pod({ app: 'demo' })), []);
    assert.deepEqual(map({ metadata: { name: 'x', namespace: 'ns' } }), []);
    assert.deepEqual(mapByLabel('example.com/owner')(pod({ 'example.com/owner': 'w2' })), [{ namespace: 'ns', name: 'w2' }], 'no required labels');
  });
});

describe('phaseOrDeletionChanged', () => {
  const { update } = phaseOrDeletionChanged();

  it('passes a phase change or a new deletion mark, and nothing else', () => {
    assert.equal(update!(pod({}, 'Pending'), pod({}, 'Running')), true);
    assert.equal(update!(pod({}), pod({}, 'Running', '2025-01-01T00:00:00Z')), true);
    assert.equal(update!(pod({}), pod({ heartbeat: '2' })), false);
  });
});
