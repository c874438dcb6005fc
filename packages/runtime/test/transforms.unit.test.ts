// keepFields: what a lean cache keeps of an object.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keepFields } from '../src/cache/transforms.ts';
import type { KubeObject } from '../src/client/resource.ts';

const pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', namespace: 'ns', labels: { app: 'x' }, managedFields: [{ manager: 'kubectl' }] },
  spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'i' }], volumes: [{ name: 'v' }] },
  status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
} as unknown as KubeObject;

describe('keepFields', () => {
  it('keeps identity, metadata without managedFields and only the named paths', () => {
    const lean = keepFields('status.phase', 'spec.containers', 'spec.missing.deeper')(pod) as unknown as Record<string, any>;
    assert.deepEqual(lean, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p', namespace: 'ns', labels: { app: 'x' } },
      spec: { containers: [{ name: 'c', image: 'i' }] },
      status: { phase: 'Running' },
    });
    assert.equal((pod.metadata.managedFields as unknown[]).length, 1, 'the received object is untouched');
  });

  it('refuses paths into metadata and empty segments', () => {
    assert.throws(() => keepFields('metadata.labels'), /not a dotted path outside metadata/);
    assert.throws(() => keepFields('status..phase'), /not a dotted path outside metadata/);
  });
});
