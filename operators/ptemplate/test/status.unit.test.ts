/**
 * The Ptemplate status from what was observed: consumers, KMMAvailable and ConsumersReady, and
 * the comparison that decides whether a status write is needed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DaemonSetObject } from '../src/resources/daemonset.ts';
import { UnexpectedShapeError } from '@iot-operator/runtime';
import { ptemplateStatus, sameStatus, type PodObject } from '../src/status.ts';
import { example } from './fixtures/example.ts';

const t0 = new Date('2025-01-01T00:00:00Z');
const t1 = new Date('2025-01-01T00:05:00Z');

function pod(name: string, phase: string, deleting = false): PodObject {
  return { metadata: { name, namespace: 'demo', ...(deleting ? { deletionTimestamp: '2025-01-01T00:00:00Z' } : {}) }, status: { phase } };
}

function daemonSet(desired: number, ready: number, updated = ready, generation = 1, observed = generation): DaemonSetObject {
  return {
    metadata: { name: 'consumer-pod-consumer', namespace: 'demo', generation },
    status: { desiredNumberScheduled: desired, numberReady: ready, updatedNumberScheduled: updated, observedGeneration: observed, currentNumberScheduled: desired, numberMisscheduled: 0 },
  };
}

test('consumers lists the live consumer pods, sorted', () => {
  const status = ptemplateStatus(example, { pods: [pod('c-b', 'Running'), pod('c-a', 'Pending'), pod('c-c', 'Running', true), pod('c-d', 'Failed')], daemonSet: daemonSet(2, 1), kmm: { crd: 'installed', module: 'consumer-pod' } }, t0);
  assert.deepEqual(status.consumers, ['c-a', 'c-b']);
});

test('KMMAvailable says whether the Module API exists', () => {
  const installed = ptemplateStatus(example, { pods: [], daemonSet: daemonSet(1, 1), kmm: { crd: 'installed', module: 'consumer-pod' } }, t0);
  assert.deepEqual(installed.conditions?.[0], {
    type: 'KMMAvailable',
    status: 'True',
    reason: 'ModuleInPlace',
    message: 'Module consumer-pod loads the pt kernel module on the selected nodes',
    observedGeneration: 3,
    lastTransitionTime: '2025-01-01T00:00:00Z',
  });
  const missing = ptemplateStatus(example, { pods: [], daemonSet: daemonSet(1, 1), kmm: { crd: 'missing' } }, t0);
  assert.equal(missing.conditions?.[0]?.status, 'False');
  assert.equal(missing.conditions?.[0]?.reason, 'ModuleCRDMissing');
  assert.match(missing.conditions?.[0]?.message ?? '', /modules\.kmm\.sigs\.x-k8s\.io/);
});

test('ConsumersReady follows the DaemonSet rollout', () => {
  const kmm = { crd: 'installed', module: 'consumer-pod' } as const;
  const ready = (ds: DaemonSetObject | undefined) => ptemplateStatus(example, { pods: [], daemonSet: ds, kmm }, t0).conditions?.[1];
  assert.deepEqual([ready(daemonSet(2, 2))?.status, ready(daemonSet(2, 2))?.reason, ready(daemonSet(2, 2))?.message], ['True', 'AllConsumersReady', '2/2 consumer pods ready']);
  assert.deepEqual([ready(daemonSet(2, 1))?.status, ready(daemonSet(2, 1))?.reason], ['False', 'ConsumersNotReady']);
  assert.deepEqual([ready(daemonSet(2, 2, 1))?.status, ready(daemonSet(2, 2, 1))?.reason], ['False', 'ConsumersNotReady'], 'old pods still running');
  assert.deepEqual([ready(daemonSet(0, 0))?.status, ready(daemonSet(0, 0))?.reason], ['False', 'NoMatchingNodes']);
  assert.deepEqual([ready(daemonSet(1, 1, 1, 2, 1))?.status, ready(daemonSet(1, 1, 1, 2, 1))?.reason], ['Unknown', 'Progressing'], 'controller has not seen the new generation');
  assert.equal(ready(undefined)?.status, 'Unknown');
});

test('a condition keeps its transition time until its status changes; equal statuses need no write', () => {
  const observed = { pods: [pod('c-a', 'Running')], daemonSet: daemonSet(1, 1), kmm: { crd: 'missing' } as const };
  const first = ptemplateStatus(example, observed, t0);
  const withStatus = { ...example, status: first };
  const again = ptemplateStatus(withStatus, observed, t1);
  assert.equal(sameStatus(first, again), true, 'nothing changed: no write');
  const installed = ptemplateStatus(withStatus, { ...observed, kmm: { crd: 'installed', module: 'consumer-pod' } }, t1);
  assert.equal(installed.conditions?.[0]?.lastTransitionTime, '2025-01-01T00:05:00Z');
  assert.equal(installed.conditions?.[1]?.lastTransitionTime, '2025-01-01T00:00:00Z', 'ConsumersReady did not change');
  assert.equal(sameStatus(first, installed), false);

  // The API server returns objects with keys in its own order: that is not a change.
  const reordered = JSON.parse(JSON.stringify(first, (_k, v) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v)));
  assert.equal(sameStatus(reordered, again), true);
  assert.equal(sameStatus(undefined, first), false);
});

test('a status.conditions of another shape is an UnexpectedShapeError naming the field (the runtime marks the Ptemplate Degraded)', () => {
  const odd = { ...example, status: { conditions: 'x' } } as unknown as typeof example;
  assert.throws(() => ptemplateStatus(odd, { pods: [], daemonSet: daemonSet(1, 1), kmm: { crd: 'missing' } }, t0), (err: unknown) => err instanceof UnexpectedShapeError && err.field === 'status.conditions');
});
