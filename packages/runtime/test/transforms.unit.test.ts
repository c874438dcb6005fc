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

  it('keeps the named fields of every entry of a list, in order, and a whole field over deeper paths into it', () => {
    const withStatuses = {
      ...pod,
      status: {
        phase: 'Running',
        containerStatuses: [
          { name: 'a', image: 'i:1', ready: true, state: { waiting: { reason: 'ImagePullBackOff', message: 'long' } } },
          { name: 'b', image: 'i:2', ready: false, state: { running: { startedAt: 't' } } },
        ],
      },
    } as unknown as KubeObject;
    const lean = keepFields('status.containerStatuses[].name', 'status.containerStatuses[].state.waiting.reason', 'spec.containers', 'spec.containers[].name', 'spec.nodeName.deeper')(withStatuses) as unknown as Record<string, any>;
    assert.deepEqual(lean.status, { containerStatuses: [{ name: 'a', state: { waiting: { reason: 'ImagePullBackOff' } } }, { name: 'b' }] });
    assert.deepEqual(lean.spec, { containers: [{ name: 'c', image: 'i' }] }, 'spec.containers is kept whole; a path through a string keeps nothing');
    assert.equal(keepFields('spec.volumes[].name')({ ...pod, spec: { volumes: 'not a list' } } as unknown as KubeObject).spec, undefined);
  });

  it('refuses paths into metadata and empty segments', () => {
    assert.throws(() => keepFields('metadata.labels'), /not a dotted path outside metadata/);
    assert.throws(() => keepFields('status..phase'), /not a dotted path outside metadata/);
    assert.throws(() => keepFields('status.[]'), /not a dotted path outside metadata/);
    assert.throws(() => keepFields('metadata[].name'), /not a dotted path outside metadata/);
  });
});
