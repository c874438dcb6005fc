// The status of the Armada kinds: a condition list of another shape is named, not a TypeError.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UnexpectedShapeError } from '@iot-operator/runtime';
import { ArmadaChartGroup } from '../src/api/armada.ts';
import { nextStatus } from '../src/status.ts';

test('nextStatus keeps other conditions and sets the kstatus conditions', () => {
  const other = { type: 'Tested', status: 'True' as const, reason: 'Passed', message: 'ok', lastTransitionTime: '2026-01-01T00:00:00Z' };
  const next = nextStatus(ArmadaChartGroup, { metadata: { name: 'g', generation: 2 }, spec: {}, status: { conditions: [other] } } as never, 'deployed', undefined);
  assert.deepEqual(next.conditions?.map((c) => `${c.type}=${c.status}`), ['Tested=True', 'Ready=True', 'Stalled=False', 'Reconciling=False']);
});

test('a status.conditions of another shape is an UnexpectedShapeError naming the field (the runtime marks the object Degraded)', () => {
  const odd = { metadata: { name: 'g', namespace: 'ns' }, spec: {}, status: { conditions: 'x' } } as never;
  assert.throws(() => nextStatus(ArmadaChartGroup, odd, 'deployed', undefined), (err: unknown) => err instanceof UnexpectedShapeError && err.field === 'status.conditions');
});
