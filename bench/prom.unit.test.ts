/**
 * Unit tests of bench/lib/prom.ts: Prometheus text parsing (labels with escapes, special values,
 * comments, malformed lines, name filtering), sums and deltas by label, and histogram quantiles
 * computed as PromQL's histogram_quantile does.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bucketDelta, deltaBy, histogramBuckets, histogramQuantile, parseLabels, parseMetrics, sumBy, sumWhere, total } from './lib/prom.ts';

const operatorScrape = `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code and method.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",method="GET"} 12
rest_client_requests_total{code="201",method="POST"} 3
rest_client_requests_total{code="200",method="PATCH"} 5
rest_client_requests_total{code="409",method="PATCH"} 1

# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{le="0.001",name="iotservice"} 10
workqueue_queue_duration_seconds_bucket{le="0.01",name="iotservice"} 50
workqueue_queue_duration_seconds_bucket{le="0.1",name="iotservice"} 90
workqueue_queue_duration_seconds_bucket{le="1",name="iotservice"} 100
workqueue_queue_duration_seconds_bucket{le="+Inf",name="iotservice"} 100
workqueue_queue_duration_seconds_sum{name="iotservice"} 3.2
workqueue_queue_duration_seconds_count{name="iotservice"} 100
process_start_time_seconds 1.7e9
`;

describe('parseMetrics', () => {
  it('reads names, labels and values and skips comments and blank lines', () => {
    const samples = parseMetrics(operatorScrape);
    assert.equal(samples.length, 12);
    assert.deepEqual(samples[0], { name: 'rest_client_requests_total', labels: { code: '200', method: 'GET' }, value: 12 });
    assert.equal(samples.at(-1)!.value, 1.7e9);
  });

  it('unescapes label values and accepts a trailing timestamp', () => {
    const [s] = parseMetrics('m{path="a\\"b\\\\c\\nd",x="1,2"} 4 1700000000000');
    assert.deepEqual(s!.labels, { path: 'a"b\\c\nd', x: '1,2' });
    assert.equal(s!.value, 4);
  });

  it('parses +Inf, -Inf and NaN', () => {
    const v = parseMetrics('a +Inf\nb -Inf\nc NaN').map((s) => s.value);
    assert.equal(v[0], Number.POSITIVE_INFINITY);
    assert.equal(v[1], Number.NEGATIVE_INFINITY);
    assert.ok(Number.isNaN(v[2]));
  });

  it('skips malformed lines without losing the rest', () => {
    const samples = parseMetrics('good 1\nbad{x="unterminated} 2\n{no_name="1"} 3\nalso_good{a="b"} 4');
    assert.deepEqual(samples.map((s) => s.name), ['good', 'also_good']);
  });

  it('keeps only the named metrics, a histogram with its _bucket/_sum/_count lines', () => {
    const samples = parseMetrics(operatorScrape, ['workqueue_queue_duration_seconds']);
    assert.equal(samples.length, 7);
    assert.ok(samples.every((s) => s.name.startsWith('workqueue_queue_duration_seconds_')));
  });

  it('parses an empty label set', () => {
    assert.deepEqual(parseLabels(''), {});
    assert.deepEqual(parseMetrics('x{} 2')[0]!.labels, {});
  });
});

describe('sums and deltas', () => {
  const before = parseMetrics(operatorScrape);
  const after = parseMetrics(operatorScrape.replace('method="GET"} 12', 'method="GET"} 20').replace('code="201",method="POST"} 3', 'code="201",method="POST"} 3\nrest_client_requests_total{code="200",method="DELETE"} 2'));

  it('sums by one or more labels', () => {
    assert.deepEqual(sumBy(before, 'rest_client_requests_total', ['method']), { GET: 12, POST: 3, PATCH: 6 });
    assert.deepEqual(sumBy(before, 'rest_client_requests_total', ['method', 'code']), { 'GET 200': 12, 'POST 201': 3, 'PATCH 200': 5, 'PATCH 409': 1 });
    assert.deepEqual(sumBy(before, 'rest_client_requests_total'), { '': 21 });
  });

  it('takes differences, counting new keys from zero and dropping unchanged ones', () => {
    const d = deltaBy(sumBy(before, 'rest_client_requests_total', ['method']), sumBy(after, 'rest_client_requests_total', ['method']));
    assert.deepEqual(d, { GET: 8, DELETE: 2 });
    assert.equal(total(d), 10);
  });

  it('sums the samples matching given labels', () => {
    assert.equal(sumWhere(before, 'rest_client_requests_total', { method: 'PATCH' }), 6);
    assert.equal(sumWhere(before, 'rest_client_requests_total'), 21);
  });
});

describe('histogramQuantile', () => {
  const buckets = histogramBuckets(parseMetrics(operatorScrape), 'workqueue_queue_duration_seconds', { name: 'iotservice' });

  it('interpolates inside the bucket holding the rank', () => {
    // rank 50 of 100 is the upper edge of the (0.001, 0.01] bucket
    assert.ok(Math.abs(histogramQuantile(0.5, buckets) - 0.01) < 1e-12);
    // rank 99: 9 of the 10 observations in (0.1, 1]
    assert.ok(Math.abs(histogramQuantile(0.99, buckets) - (0.1 + 0.9 * 0.9)) < 1e-12);
    // rank 5 in the first bucket: interpolated from 0
    assert.ok(Math.abs(histogramQuantile(0.05, buckets) - 0.0005) < 1e-12);
  });

  it('returns the largest finite bound when the rank lies in +Inf, NaN without observations', () => {
    const b = new Map([[1, 1], [Number.POSITIVE_INFINITY, 10]]);
    assert.equal(histogramQuantile(0.99, b), 1);
    assert.ok(Number.isNaN(histogramQuantile(0.5, new Map([[1, 0], [Number.POSITIVE_INFINITY, 0]]))));
    assert.ok(Number.isNaN(histogramQuantile(0.5, new Map())));
  });

  it('measures only the observations between two scrapes', () => {
    const later = new Map([...buckets].map(([le, c]) => [le, le <= 0.001 ? c : c + 10]));
    const d = bucketDelta(buckets, later);
    assert.equal(d.get(0.001), 0);
    assert.equal(d.get(Number.POSITIVE_INFINITY), 10);
    assert.ok(Math.abs(histogramQuantile(0.5, d) - 0.0055) < 1e-12);
  });
});
