/**
 * The Grafana dashboards: every panel has a query, every metric a query reads is one the runtime
 * or the IoT operator registers (read from their registries, not from a list kept here), and the
 * charts render them in a ConfigMap labelled for Grafana's sidecar only when
 * metrics.dashboards.enabled. (The copies in both charts and the SDK are written from the sources
 * by `npm run generate`; scripts/test/generate.unit.test.ts holds them equal.)
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { metricNames, panelQueries, Registry, RuntimeMetrics } from '@iot-operator/runtime';
import { registerInstanceMetrics } from '../src/instance-metrics.ts';
import { DASHBOARD_SOURCES, readDashboard, type Dashboard } from './dashboards.ts';

const run = promisify(execFile);
const repoRoot = path.resolve(import.meta.dirname, '../../..');

/** Every series name the runtime and the IoT operator serve on /metrics (a histogram's _bucket, _sum and _count). */
async function registeredNames(): Promise<Set<string>> {
  const registry = new Registry();
  new RuntimeMetrics(registry).collectProcessMetrics();
  registerInstanceMetrics(registry, { list: () => [], ingestion: () => [], exporting: () => false });
  const names = new Set<string>();
  for (const metric of await registry.getMetricsAsJSON()) {
    if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
    else names.add(metric.name);
  }
  return names;
}

/** The metric a `label_values(metric{...}, label)` variable reads. */
function variableMetrics(dashboard: Dashboard): string[] {
  return dashboard.templating.list
    .filter((v) => v.type === 'query')
    .map((v) => (typeof v.query === 'string' ? v.query : (v.query?.query ?? '')))
    .map((query) => /^label_values\(([A-Za-z_:][A-Za-z0-9_:]*)/.exec(query)?.[1] ?? `unreadable variable query: ${query}`);
}

const dashboards = Object.entries(DASHBOARD_SOURCES).map(([name, source]) => ({ name, dashboard: readDashboard(source) }));

describe('the dashboards', () => {
  it('read metric names the way Prometheus selects them', () => {
    assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (controller, le) (rate(a_bucket{job=~"$job", le!="x"}[$__rate_interval])))'), ['a_bucket']);
    assert.deepEqual(metricNames('(time() - max by (name) (b)) * on (namespace, name) group_left (phase) (c{phase!="Available"} == 1) offset 5m'), ['b', 'c']);
  });

  for (const { name, dashboard } of dashboards) {
    it(`${name}: every panel has a query`, () => {
      const panels = dashboard.panels.filter((p) => p.type !== 'row');
      assert.ok(panels.length > 0);
      const queried = new Set(panelQueries(dashboard).map((q) => q.title));
      assert.deepEqual(panels.filter((p) => !queried.has(p.title)).map((p) => p.title), []);
      assert.equal(new Set(panels.map((p) => p.title)).size, panels.length, 'panel titles are unique');
    });

    it(`${name}: every metric its panels and variables read is registered by the runtime or the IoT operator`, async () => {
      const registered = await registeredNames();
      const used = [...panelQueries(dashboard).flatMap((q) => metricNames(q.expr)), ...variableMetrics(dashboard)];
      assert.ok(used.length > 0);
      assert.deepEqual([...new Set(used)].filter((metric) => !registered.has(metric)), []);
    });
  }

  it('have datasource, job and namespace variables', () => {
    for (const { dashboard } of dashboards) {
      assert.deepEqual(dashboard.templating.list.slice(0, 3).map((v) => v.name), ['datasource', 'job', 'namespace']);
    }
  });
});

describe('the charts render the dashboards', () => {
  let helm: string;
  before(async () => {
    helm = (await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
  });

  const charts = [
    { chart: 'operators/iot/chart/iot-operator', configMap: 'iot-operator-dashboards', files: { 'operator-runtime.json': DASHBOARD_SOURCES.runtime, 'iot-instances.json': DASHBOARD_SOURCES.iot } },
    { chart: 'operators/armada/chart/armada-operator', configMap: 'armada-operator-dashboards', files: { 'operator-runtime.json': DASHBOARD_SOURCES.runtime } },
  ];

  async function configMaps(chart: string, ...set: string[]) {
    const { stdout } = await run(helm, ['template', 'release', path.join(repoRoot, chart), '--namespace', 'landscape', '--kube-version', '1.33.0', ...set.flatMap((s) => ['--set', s])]);
    return parseAllDocuments(stdout)
      .map((d) => d.toJS() as { kind?: string; metadata: { name: string; namespace: string; labels: Record<string, string> }; data: Record<string, string> } | null)
      .filter((o) => o?.kind === 'ConfigMap' && o.metadata.labels?.['grafana_dashboard'] !== undefined);
  }

  for (const { chart, configMap, files } of charts) {
    it(`${path.basename(chart)}: none by default; with metrics.dashboards.enabled a ConfigMap labelled grafana_dashboard: "1" and the given labels, holding each dashboard`, async () => {
      assert.deepEqual(await configMaps(chart), []);
      const [rendered, ...others] = await configMaps(chart, 'metrics.dashboards.enabled=true', 'metrics.dashboards.labels.release=kube-prometheus');
      assert.equal(others.length, 0);
      assert.equal(rendered?.metadata.name, configMap);
      assert.equal(rendered?.metadata.namespace, 'landscape');
      assert.equal(rendered?.metadata.labels['grafana_dashboard'], '1');
      assert.equal(rendered?.metadata.labels['release'], 'kube-prometheus');
      assert.deepEqual(Object.keys(rendered?.data ?? {}).sort(), Object.keys(files).sort());
      for (const [key, source] of Object.entries(files)) assert.deepEqual(JSON.parse(rendered!.data[key]!), JSON.parse(readFileSync(source, 'utf8')), key);
    });
  }
});
