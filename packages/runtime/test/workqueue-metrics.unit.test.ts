/**
 * A work queue's metrics exist from its creation, as client-go's queue metrics do: a scrape before
 * any add or retry shows depth, adds and retries at 0 for the queue, so dashboard panels and rates
 * over them have series at once instead of "no data" until the first retry.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { RuntimeMetrics } from '../src/metrics/runtime-metrics.ts';
import { WorkQueue } from '../src/queue/workqueue.ts';

it('a new queue exports workqueue_depth, workqueue_adds_total and workqueue_retries_total at 0 for its name', async () => {
  const metrics = new RuntimeMetrics();
  new WorkQueue('iotservice', metrics);
  const text = await metrics.registry.metrics();
  for (const name of ['workqueue_depth', 'workqueue_adds_total', 'workqueue_retries_total']) {
    assert.match(text, new RegExp(`^${name}\\{name="iotservice"\\} 0$`, 'm'), name);
  }
});
