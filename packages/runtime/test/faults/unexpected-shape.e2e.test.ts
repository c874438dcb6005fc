import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { localTestEnv } from '@iot-operator/local-cluster';
import { Kinds, Manager, controller, findCondition, generationChanged, readConditions, setCondition, type Condition, type KubeObject, type ResourceType } from '../../src/index.ts';
import { waitFor, type TestEnv } from '../../src/testing/index.ts';
import { reportFault } from './fault-report.ts';

const group = 'faults.iot-operator.test';
const Gadget: ResourceType = { group, version: 'v1', kind: 'Gadget', plural: 'gadgets', namespaced: true };
type GadgetObject = KubeObject & { spec?: { size?: number }; status?: { conditions?: Condition[] } };

/** The Gadget CRD: `statusSchema` is what the status may hold. */
const gadgetCrd = (statusSchema: Record<string, unknown>): KubeObject => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `gadgets.${group}` },
  spec: {
    group,
    scope: 'Namespaced',
    names: { kind: 'Gadget', plural: 'gadgets', singular: 'gadget', listKind: 'GadgetList' },
    versions: [{
      name: 'v1',
      served: true,
      storage: true,
      subresources: { status: {} },
      schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } }, status: statusSchema } } },
    }],
  },
} as KubeObject);

/** An older release's status: anything went. */
const olderStatus = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
/** Today's status: metav1.Condition list. */
const currentStatus = {
  type: 'object',
  properties: {
    conditions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['type', 'status'],
        properties: { type: { type: 'string' }, status: { type: 'string' }, reason: { type: 'string' }, message: { type: 'string' }, lastTransitionTime: { type: 'string' }, observedGeneration: { type: 'integer' } },
      },
    },
  },
};

let env: TestEnv;
let mgr: Manager | undefined;

before(async () => {
  env = await localTestEnv();
});
after(async () => {
  await mgr?.stop();
  await env?.cleanup();
  await env?.uninstallCrd(`gadgets.${group}`);
});

/** The gadget operator: sets Ready on every Gadget it reconciles, counting reconciles per name. */
async function startGadgetOperator(ns: string, reconciles: Map<string, number>): Promise<Manager> {
  const manager = await Manager.create({ name: 'gadget-operator', kubeconfigPath: env.kubeconfigPath, logger: pino({ level: 'silent' }), cache: { defaultNamespace: ns } });
  controller(manager)
    .for(Gadget, generationChanged())
    .reconcile(async (req, ctx) => {
      reconciles.set(req.name, (reconciles.get(req.name) ?? 0) + 1);
      const gadget = ctx.cache.get<GadgetObject>(Gadget, req.name, req.namespace);
      if (!gadget) return;
      const conditions = readConditions(Gadget, gadget);
      if (findCondition(conditions, 'Ready')?.status === 'True') return;
      const next = setCondition(conditions, { type: 'Ready', status: 'True', reason: 'Reconciled', message: `size ${gadget.spec?.size}` });
      await ctx.client.patchStatus(Gadget, req.name, req.namespace, { status: { conditions: next } });
    });
  await manager.start();
  return manager;
}

describe('objects of unexpected shape', () => {
  it('a status written under an older CRD degrades only that object: terminal error, Warning Event, Degraded condition naming the field, cleared once it reconciles again', async () => {
    const ns = await env.namespace('fault-shape');
    await env.installCrd(gadgetCrd(olderStatus));
    for (const name of ['bad', 'good']) await env.client.create(Gadget, { metadata: { name, namespace: ns }, spec: { size: 1 } } as GadgetObject);
    await env.client.patchStatus(Gadget, 'bad', ns, { status: { conditions: 'x' } });
    await env.installCrd(gadgetCrd(currentStatus));
    const startedAt = Date.now();

    const reconciles = new Map<string, number>();
    mgr = await startGadgetOperator(ns, reconciles);

    const status = async (name: string) => (await env.client.get<GadgetObject>(Gadget, name, ns)).status;
    await waitFor('the good Gadget to be Ready', async () => {
      const s = await status('good');
      return { done: findCondition(s?.conditions, 'Ready')?.status === 'True', value: undefined, seen: s };
    });
    const degraded = await waitFor('the bad Gadget to be Degraded', async () => {
      const s = await status('bad');
      const condition = findCondition(s?.conditions, 'Degraded');
      return { done: condition?.status === 'True', value: condition!, seen: s };
    });
    const recoveryMs = Date.now() - startedAt;
    assert.equal(degraded.reason, 'UnexpectedShape');
    assert.match(degraded.message, /field status\.conditions has an unexpected shape: expected a list of conditions, found string "x"/);
    const events = await waitFor('a Warning Event on the bad Gadget', async () => {
      const list = await env.client.list<KubeObject & { reason?: string; type?: string; message?: string; involvedObject?: { name?: string } }>(Kinds.Event, { namespace: ns });
      const found = list.items.filter((e) => e.involvedObject?.name === 'bad' && e.reason === 'UnexpectedShape');
      return { done: found.length > 0, value: found, seen: list.items.map((e) => e.reason) };
    });
    assert.equal(events[0]!.type, 'Warning');
    assert.match(events[0]!.message ?? '', /status\.conditions/);

    // Not retried: a terminal error waits for the object to change.
    await new Promise((r) => setTimeout(r, 3_000));
    assert.equal(reconciles.get('bad'), 1, 'the malformed object is reconciled once, not retried in a loop');

    // The rest keeps being served: a new Gadget is reconciled while the bad one stays Degraded.
    await env.client.create(Gadget, { metadata: { name: 'later', namespace: ns }, spec: { size: 2 } } as GadgetObject);
    await waitFor('a Gadget created afterwards to be Ready', async () => {
      const s = await status('later');
      return { done: findCondition(s?.conditions, 'Ready')?.status === 'True', value: undefined, seen: s };
    });
    // The condition is on the object, not in the operator's memory: an operator started anew
    // sets Degraded back to False once the object changes and reconciles cleanly.
    await mgr.stop();
    mgr = await startGadgetOperator(ns, reconciles);
    await env.client.patch(Gadget, 'bad', ns, { spec: { size: 3 } });
    await waitFor('the corrected Gadget to be Ready and no longer Degraded', async () => {
      const s = await status('bad');
      const done = findCondition(s?.conditions, 'Ready')?.status === 'True' && findCondition(s?.conditions, 'Degraded')?.status === 'False';
      return { done, value: undefined, seen: s };
    });
    await reportFault({
      fault: 'Object of unexpected shape (status written under an older CRD: `conditions: "x"`)',
      injection: 'status written under a permissive CRD, then the CRD tightened (no proxy needed)',
      behaviour: 'UnexpectedShapeError (terminal, reconciled once), Warning Event `UnexpectedShape`, condition `Degraded=True` naming `status.conditions`; other Gadgets reconciled; after the next change and a clean reconcile — by an operator started anew — `Degraded=False` (without the check, reading `conditions` as a list throws a TypeError on every retry, with nothing on the object)',
      recoveryMs,
      objectsLost: 0,
      test: 'packages/runtime/test/faults/unexpected-shape.e2e.test.ts',
    });
  });
});
