import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import type { KubeObject, ResourceType } from '../src/client/resource.ts';
import { TerminalError } from '../src/errors/terminal-error.ts';
import { UnexpectedShapeError, checkShape, readConditions } from '../src/status/shape.ts';

const Widget: ResourceType = { group: 'example.com', version: 'v1', kind: 'Widget', plural: 'widgets', namespaced: true };
const widget = (status: unknown): KubeObject & { status?: unknown } => ({ metadata: { name: 'w', namespace: 'ns' }, status });

function shapeError(fn: () => unknown): UnexpectedShapeError {
  try {
    fn();
  } catch (err) {
    if (err instanceof UnexpectedShapeError) return err;
    throw err;
  }
  assert.fail('expected an UnexpectedShapeError');
}

describe('reading objects of unexpected shape', () => {
  it('reads well-formed or absent conditions', () => {
    assert.deepEqual(readConditions(Widget, widget(undefined)), []);
    assert.deepEqual(readConditions(Widget, widget({})), []);
    const ready = { type: 'Ready', status: 'True', reason: 'R', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' };
    assert.deepEqual(readConditions(Widget, widget({ conditions: [ready] })), [ready]);
  });

  it('names the offending field of a malformed status, as a terminal error', () => {
    const err = shapeError(() => readConditions(Widget, widget({ conditions: 'x' })));
    assert.ok(err instanceof TerminalError, 'not retried');
    assert.equal(err.field, 'status.conditions');
    assert.match(err.message, /Widget ns\/w: field status\.conditions has an unexpected shape: expected a list of conditions, found string "x"/);
    assert.equal(shapeError(() => readConditions(Widget, widget('broken'))).field, 'status');
    assert.equal(shapeError(() => readConditions(Widget, widget({ conditions: [{ type: 'Ready', status: 'True' }, 7] }))).field, 'status.conditions[1]');
    assert.equal(shapeError(() => readConditions(Widget, widget({ conditions: [{ type: 3, status: 'True' }] }))).field, 'status.conditions[0].type');
  });

  it('checks any field against a schema and names the first offending path below it', () => {
    const Status = Type.Object({ phase: Type.String(), replicas: Type.Array(Type.Object({ name: Type.String() })) });
    const good = { phase: 'Ready', replicas: [{ name: 'a' }] };
    assert.deepEqual(checkShape(Widget, widget(good), 'status', good, Status), good);
    const err = shapeError(() => checkShape(Widget, widget({}), 'status', { phase: 'Ready', replicas: [{ name: 'a' }, { name: 5 }] }, Status));
    assert.equal(err.field, 'status.replicas[1].name');
    assert.match(err.message, /expected string, found number 5/);
  });
});
