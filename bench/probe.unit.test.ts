/**
 * Unit tests of bench/lib/probe.ts's pure part: the API server's figures over a phase, from its
 * metrics scraped at the start and at the end.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiserverFigures } from './lib/probe.ts';
import { parseMetrics } from './lib/prom.ts';

const scrape = (podLists: number, podWatches: number, terminatedPods: number) => parseMetrics(`
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="LIST"} ${podLists}
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="WATCH"} ${podWatches}
apiserver_request_total{code="200",component="apiserver",resource="leases",verb="WATCH"} 3
apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 100
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="PUT"} 40
apiserver_request_total{code="409",component="apiserver",resource="pods",verb="PUT"} 2
apiserver_terminated_watchers_total{resource="pods"} ${terminatedPods}
apiserver_terminated_watchers_total{resource="deployments.apps"} 1
`);

describe('apiserverFigures', () => {
  it('counts the phase only: requests by verb, lists and watches by resource, watches closed on slow clients', () => {
    const figures = apiserverFigures(scrape(2, 10, 0), scrape(9, 31, 4));
    assert.deepEqual(figures, {
      byVerb: { LIST: 7, WATCH: 21 },
      total: 28,
      listsByResource: { pods: 7 },
      watchesByResource: { pods: 21 },
      terminatedWatchersByResource: { pods: 4 },
    });
  });

  it('has empty figures for a phase in which nothing happened', () => {
    const figures = apiserverFigures(scrape(2, 10, 1), scrape(2, 10, 1));
    assert.deepEqual(figures, { byVerb: {}, total: 0, listsByResource: {}, watchesByResource: {}, terminatedWatchersByResource: {} });
  });
});
