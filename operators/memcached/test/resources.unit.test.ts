/**
 * The pure parts of the Memcached reconcile: the desired Deployment, the comparison that decides
 * whether to write it, the status from pods and the pod → Memcached mapping.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { childDifference, type KubeObject } from '@iot-operator/runtime';
import type { MemcachedObject } from '../src/api/memcached.ts';
import { podMembershipChanged, podToMemcached } from '../src/controller.ts';
import { desiredDeployment } from '../src/resources/deployment.ts';
import { memcachedStatus, sameStatus, type PodObject } from '../src/status.ts';

/** Whether the controller leaves the observed Deployment alone. */
const childMatches = (desired: KubeObject, observed: KubeObject) => childDifference(desired, observed) === undefined;

const memcached: MemcachedObject = {
  apiVersion: 'cache.example.com/v1alpha1',
  kind: 'Memcached',
  metadata: { name: 'example-memcached', namespace: 'demo', uid: 'uid-1', generation: 1 },
  spec: { size: 3 },
};

test('the Deployment runs spec.size memcached pods with the walkthrough image, command and port', () => {
  const d = desiredDeployment(memcached);
  assert.equal(d.metadata.name, 'example-memcached');
  assert.equal(d.metadata.namespace, 'demo');
  assert.equal(d.spec?.replicas, 3);
  const container = d.spec?.template.spec?.containers[0];
  assert.equal(container?.image, 'memcached:1.6-alpine');
  assert.deepEqual(container?.command, ['memcached', '-m=64', '-o', 'modern', '-v']);
  assert.deepEqual(container?.ports, [{ name: 'memcached', containerPort: 11211, protocol: 'TCP' }]);
  assert.deepEqual(d.spec?.selector.matchLabels, { app: 'memcached', memcached_cr: 'example-memcached' });
  assert.deepEqual(d.spec?.template.metadata?.labels, { app: 'memcached', memcached_cr: 'example-memcached' });
  assert.deepEqual(d.metadata.ownerReferences, [
    { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', name: 'example-memcached', uid: 'uid-1', controller: true, blockOwnerDeletion: true },
  ]);
  assert.equal(desiredDeployment({ ...memcached, spec: { size: 0 } }).spec?.replicas, 0);
});

test('a Deployment as the API server returns it (defaults and status added) matches; a changed one does not', () => {
  const desired = desiredDeployment(memcached);
  const observed = structuredClone(desired) as any;
  observed.metadata.resourceVersion = '42';
  observed.metadata.generation = 1;
  observed.spec.strategy = { type: 'RollingUpdate' };
  observed.spec.template.spec.restartPolicy = 'Always';
  observed.spec.template.spec.containers[0].imagePullPolicy = 'IfNotPresent';
  observed.spec.template.spec.containers[0].terminationMessagePath = '/dev/termination-log';
  observed.status = { replicas: 3 };
  assert.equal(childMatches(desired, observed), true);

  assert.equal(childMatches(desiredDeployment({ ...memcached, spec: { size: 4 } }), observed), false, 'replicas differ');
  const edited = structuredClone(observed);
  edited.spec.template.spec.containers[0].image = 'memcached:latest';
  assert.equal(childMatches(desired, edited), false, 'image edited');
  const extraPort = structuredClone(observed);
  extraPort.spec.template.spec.containers[0].ports.push({ containerPort: 1, protocol: 'TCP' });
  assert.equal(childMatches(desired, extraPort), false, 'arrays must match in length');
  const unowned = structuredClone(observed);
  delete unowned.metadata.ownerReferences;
  assert.equal(childMatches(desired, unowned), false, 'ownerReference removed');
  const coOwned = structuredClone(observed);
  coOwned.metadata.ownerReferences.unshift({ apiVersion: 'v1', kind: 'ConfigMap', name: 'other', uid: 'uid-2' });
  assert.equal(childMatches(desired, coOwned), true, 'another, non-controller owner added by someone else is not drift');
});

function pod(name: string, phase: string, deleting = false): PodObject {
  return {
    metadata: { name, namespace: 'demo', labels: { app: 'memcached', memcached_cr: 'example-memcached' }, ...(deleting ? { deletionTimestamp: '2025-01-01T00:00:00Z' } : {}) },
    status: { phase },
  };
}

test('status.nodes lists the serving pods sorted, without pods being deleted or finished', () => {
  const status = memcachedStatus([pod('m-c', 'Running'), pod('m-a', 'Pending'), pod('m-b', 'Running', true), pod('m-d', 'Failed'), pod('m-e', 'Succeeded')]);
  assert.deepEqual(status, { nodes: ['m-a', 'm-c'] });
  assert.deepEqual(memcachedStatus([]), { nodes: [] });
});

test('a status write is needed only when the names differ', () => {
  assert.equal(sameStatus({ nodes: ['a', 'b'] }, { nodes: ['a', 'b'] }), true);
  assert.equal(sameStatus({ nodes: ['a'] }, { nodes: ['a', 'b'] }), false);
  assert.equal(sameStatus({ nodes: ['b', 'a'] }, { nodes: ['a', 'b'] }), false);
  assert.equal(sameStatus(undefined, { nodes: [] }), false, 'a missing status is written once, even when empty');
  assert.equal(sameStatus({ nodes: [] }, { nodes: [] }), true);
});

test('pods map to their Memcached through the memcached_cr label; other pods map to nothing', () => {
  assert.deepEqual(podToMemcached(pod('m-a', 'Running')), [{ namespace: 'demo', name: 'example-memcached' }]);
  assert.deepEqual(podToMemcached({ metadata: { name: 'x', namespace: 'demo', labels: { app: 'other', memcached_cr: 'example-memcached' } } }), []);
  assert.deepEqual(podToMemcached({ metadata: { name: 'x', namespace: 'demo' } }), []);
});

test('pod updates pass only when the phase or the deletion mark changes', () => {
  const update = podMembershipChanged.update!;
  assert.equal(update(pod('a', 'Running'), pod('a', 'Running')), false);
  assert.equal(update(pod('a', 'Pending'), pod('a', 'Running')), true);
  assert.equal(update(pod('a', 'Running'), pod('a', 'Running', true)), true);
});
