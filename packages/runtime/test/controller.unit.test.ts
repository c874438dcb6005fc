import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Controller } from '../src/controller/controller.ts';
import { TerminalError } from '../src/errors/terminal-error.ts';
import type { Reconciler } from '../src/controller/reconcile.ts';
import type { EventRecorder } from '../src/events/recorder.ts';
import { RuntimeMetrics } from '../src/metrics/runtime-metrics.ts';
import { FakeClient } from '../src/testing/fake-client.ts';
import { Kinds, splitKey, type KubeObject, type ResourceType } from '../src/client/resource.ts';
import { findCondition, type Condition } from '../src/status/conditions.ts';
import { readConditions } from '../src/status/shape.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const noEvents: EventRecorder = { event: () => {}, flush: async () => {} };

function makeController(reconciler: Reconciler, maxConcurrentReconciles = 1) {
  const fake = new FakeClient();
  const metrics = new RuntimeMetrics();
  const controller = new Controller('test', reconciler, { maxConcurrentReconciles, resyncPeriodMs: 3_600_000 }, {
    client: fake,
    cache: fake.cacheReader(),
    metrics,
    logger: pino({ level: 'silent' }),
    recorder: noEvents,
    primaryKeys: () => ['ns/a', 'ns/b'],
    primaryType: Kinds.ConfigMap,
    primary: () => undefined,
  });
  const stop = new AbortController();
  controller.start(stop.signal);
  return { controller, metrics, stop: async () => { stop.abort(); await controller.stop(1000); } };
}

const total = async (metrics: RuntimeMetrics, result: string) =>
  (await metrics.reconcileTotal.get()).values.find((v) => v.labels.result === result)?.value ?? 0;

describe('controller', () => {
  it('a reconciler that throws is retried with backoff and the process carries on; success forgets the failures', async () => {
    const calls: number[] = [];
    let failuresLeft = 3;
    const { controller, metrics, stop } = makeController(async () => {
      calls.push(Date.now());
      if (failuresLeft-- > 0) throw new Error('boom');
    });
    controller.enqueue({ namespace: 'ns', name: 'a' });
    while (calls.length < 4) await sleep(5);
    await sleep(20);
    assert.equal(calls.length, 4, 'three failures, then one success, then no more calls');
    assert.equal((await metrics.queueRetries.get()).values[0]?.value, 3, 'each failure was requeued through the backoff');
    assert.equal(await total(metrics, 'error'), 3);
    assert.equal((await metrics.reconcileErrors.get()).values[0]?.value, 3);
    assert.equal(await total(metrics, 'success'), 1);
    assert.equal(controller.queue.backoff.retries('ns/a'), 0, 'success forgot the failures');
    await stop();
  });

  it('a TerminalError is not retried and is counted as terminal', async () => {
    let calls = 0;
    const { controller, metrics, stop } = makeController(async () => {
      calls++;
      throw new TerminalError('cannot be fixed by retrying');
    });
    controller.enqueue({ namespace: 'ns', name: 'a' });
    await sleep(100);
    assert.equal(calls, 1);
    assert.equal((await metrics.terminalReconcileErrors.get()).values[0]?.value, 1);
    assert.equal((await metrics.reconcileErrors.get()).values[0]?.value, 1);
    await stop();
  });

  it('requeueAfter looks again after the delay', async () => {
    const calls: number[] = [];
    const { controller, stop } = makeController(async () => {
      calls.push(Date.now());
      return calls.length === 1 ? { requeueAfterMs: 50 } : undefined;
    });
    controller.enqueue({ namespace: 'ns', name: 'a' });
    while (calls.length < 2) await sleep(5);
    assert.ok(calls[1]! - calls[0]! >= 45, `second call after ${calls[1]! - calls[0]!} ms`);
    await stop();
  });

  it('runs up to maxConcurrentReconciles keys at once, never one key twice at once', async () => {
    let active = 0;
    let peak = 0;
    const perKey = new Map<string, number>();
    let overlap = false;
    const { controller, metrics, stop } = makeController(async (req) => {
      active++;
      peak = Math.max(peak, active);
      perKey.set(req.name, (perKey.get(req.name) ?? 0) + 1);
      if (perKey.get(req.name)! > 1) overlap = true;
      await sleep(30);
      perKey.set(req.name, perKey.get(req.name)! - 1);
      active--;
    }, 3);
    for (let round = 0; round < 3; round++) for (const name of ['a', 'b', 'c', 'd', 'e']) controller.enqueue({ namespace: 'ns', name });
    await sleep(250);
    assert.equal(peak, 3);
    assert.equal(overlap, false);
    assert.equal((await metrics.maxConcurrentReconciles.get()).values[0]?.value, 3);
    await stop();
  });

  it('resyncNow enqueues every primary object', async () => {
    const seen = new Set<string>();
    const { controller, stop } = makeController(async (req) => void seen.add(req.name));
    controller.resyncNow();
    await sleep(50);
    assert.deepEqual([...seen].sort(), ['a', 'b']);
    await stop();
  });

  it('stop waits for the reconcile in flight and takes no new work', async () => {
    let finished = false;
    let calls = 0;
    const { controller, stop } = makeController(async () => {
      calls++;
      await sleep(100);
      finished = true;
    });
    controller.enqueue({ namespace: 'ns', name: 'a' });
    await sleep(10);
    const stopping = stop();
    controller.enqueue({ namespace: 'ns', name: 'b' });
    await stopping;
    assert.equal(finished, true, 'the in-flight reconcile finished before stop resolved');
    assert.equal(calls, 1, 'no work was taken after stop');
  });

  it('an object of unexpected shape: one reconcile, a Warning Event, Degraded=True naming the field; cleared after the next success', async () => {
    const Widget: ResourceType = { group: 'example.com', version: 'v1', kind: 'Widget', plural: 'widgets', namespaced: true };
    type WidgetObject = KubeObject & { status?: { conditions?: Condition[] } };
    const fake = new FakeClient();
    fake.seed(Widget, { metadata: { name: 'a', namespace: 'ns' }, status: { conditions: 'x' } } as KubeObject);
    const events: string[] = [];
    let calls = 0;
    const controller = new Controller('widgets', async (req, ctx) => {
      calls++;
      readConditions(Widget, await ctx.client.get<WidgetObject>(Widget, req.name, req.namespace));
    }, { maxConcurrentReconciles: 1, resyncPeriodMs: 3_600_000 }, {
      client: fake,
      cache: fake.cacheReader(),
      metrics: new RuntimeMetrics(),
      logger: pino({ level: 'silent' }),
      recorder: { event: (_obj, type, reason, message) => void events.push(`${type} ${reason}: ${message}`), flush: async () => {} },
      primaryKeys: () => [],
      primaryType: Widget,
      primary: (key) => fake.cacheReader().get(Widget, splitKey(key).name, splitKey(key).namespace),
    });
    const stop = new AbortController();
    controller.start(stop.signal);
    const degraded = async () => {
      const conditions = (await fake.get<WidgetObject>(Widget, 'a', 'ns')).status?.conditions;
      return Array.isArray(conditions) ? findCondition(conditions, 'Degraded') : undefined;
    };
    controller.enqueue({ namespace: 'ns', name: 'a' });
    while (!(await degraded())) await sleep(5);
    await sleep(50);
    assert.equal(calls, 1, 'a terminal error: not retried');
    assert.equal((await degraded())?.status, 'True');
    assert.equal((await degraded())?.reason, 'UnexpectedShape');
    assert.match((await degraded())?.message ?? '', /field status\.conditions has an unexpected shape/);
    assert.equal(events.length, 1);
    assert.match(events[0]!, /^Warning UnexpectedShape: Widget ns\/a: field status\.conditions/);

    controller.enqueue({ namespace: 'ns', name: 'a' });
    while ((await degraded())?.status !== 'False') await sleep(5);
    assert.equal((await degraded())?.reason, 'ShapeCorrected');
    assert.equal(calls, 2);
    stop.abort();
    await controller.stop(1000);
  });

  it('a Degraded condition another process wrote (before a restart) is cleared by the next successful reconcile here', async () => {
    const Widget: ResourceType = { group: 'example.com', version: 'v1', kind: 'Widget', plural: 'widgets', namespaced: true };
    type WidgetObject = KubeObject & { status?: { conditions?: Condition[] } };
    const fake = new FakeClient();
    const reported: Condition = { type: 'Degraded', status: 'True', reason: 'UnexpectedShape', message: 'field status.x has an unexpected shape', lastTransitionTime: '2026-01-01T00:00:00Z' };
    fake.seed(Widget, { metadata: { name: 'a', namespace: 'ns' }, status: { conditions: [reported] } } as KubeObject);
    const controller = new Controller('widgets', async () => {}, { maxConcurrentReconciles: 1, resyncPeriodMs: 3_600_000 }, {
      client: fake,
      cache: fake.cacheReader(),
      metrics: new RuntimeMetrics(),
      logger: pino({ level: 'silent' }),
      recorder: noEvents,
      primaryKeys: () => [],
      primaryType: Widget,
      primary: (key) => fake.cacheReader().get(Widget, splitKey(key).name, splitKey(key).namespace),
    });
    const stop = new AbortController();
    controller.start(stop.signal);
    controller.enqueue({ namespace: 'ns', name: 'a' });
    const degraded = async () => findCondition((await fake.get<WidgetObject>(Widget, 'a', 'ns')).status?.conditions ?? [], 'Degraded');
    for (let i = 0; i < 200 && (await degraded())?.status !== 'False'; i++) await sleep(5);
    assert.equal((await degraded())?.status, 'False');
    assert.equal((await degraded())?.reason, 'ShapeCorrected');
    stop.abort();
    await controller.stop(1000);
  });
});
