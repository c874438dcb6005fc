// Whether a CRD stores the runtime's Degraded condition: the check each operator's CRD test uses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { degradedConditionProblem } from '../src/testing/crd-conditions.ts';

const crd = (status: Record<string, unknown> | undefined) => ({
  metadata: { name: 'gadgets.example.com' },
  spec: { versions: [{ name: 'v1', served: true, schema: { openAPIV3Schema: { type: 'object', properties: status ? { status } : {} } } }] },
});
const field = { type: 'string' };
const conditions = { type: 'array', items: { type: 'object', properties: { type: field, status: field, reason: field, message: field, lastTransitionTime: field } } };

describe('degradedConditionProblem', () => {
  it('accepts a status with a full condition list, or one keeping unknown fields', () => {
    assert.equal(degradedConditionProblem(crd({ type: 'object', properties: { conditions, phase: field } })), undefined);
    assert.equal(degradedConditionProblem(crd({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true })), undefined);
  });

  it('names what would prune or refuse the condition', () => {
    assert.equal(degradedConditionProblem(crd(undefined)), 'gadgets.example.com v1: no status in the schema');
    assert.equal(degradedConditionProblem(crd({ type: 'object', properties: { nodes: { type: 'array' } } })), 'gadgets.example.com v1: status has no conditions list');
    assert.equal(degradedConditionProblem(crd({ type: 'object', required: ['nodes'], properties: { conditions, nodes: { type: 'array' } } })), 'gadgets.example.com v1: status requires nodes, which a condition write alone does not carry');
    const lean = { type: 'array', items: { type: 'object', properties: { type: field, status: field } } };
    assert.equal(degradedConditionProblem(crd({ type: 'object', properties: { conditions: lean } })), 'gadgets.example.com v1: status.conditions items lack reason, message, lastTransitionTime');
  });
});
