/**
 * The IoT operator's monitoring as a real Prometheus sees it: the operator installed with its Helm
 * chart in its pod on the real node (metrics secure), and Prometheus (built from Go modules) in a
 * pod beside it, scraping the chart's metrics Service over HTTPS with the token of a
 * ServiceAccount bound to the chart's metrics-reader ClusterRole — the chart's ServiceMonitor
 * translated into Prometheus's own scrape configuration — and evaluating the chart's own alert
 * rules (its PrometheusRule's spec, windows shortened through chart values).
 *
 * Proves: the operator is scraped (`up` 1); its IoTService made Failed (the landscape's
 * image-pull-secret missing) fires IoTServiceFailed, and resolves once fixed; every panel query
 * of both dashboards returns data; the operator's pod gone (its Deployment scaled to 0) fires
 * OperatorDown, which resolves once a pod is back.
 *
 * The picture of docs/observability.md: with DASHBOARD_PICTURE=<file.svg> the dashboards' panels
 * over this run are rendered from Prometheus's query_range API into that file:
 *   DASHBOARD_PICTURE=docs/observability-dashboard.svg node --import tsx --test operators/iot/test/observability.e2e.test.ts
 * Reported as not run, with the reason, where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { Kinds, concreteQuery, customResource, panelQueries, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { deployPrometheus, localTestEnv, realNode, registryPullSecret, scrapeConfigForServiceMonitor, type Prometheus, type ServiceMonitor } from '@iot-operator/local-cluster';
import { dashboardSvg, type Panel } from '../../../bench/lib/dashboard-svg.ts';
import { chart, prepareChartRelease, type ChartRelease } from './chart-release.ts';
import { DASHBOARD_SOURCES, readDashboard, type Dashboard } from './dashboards.ts';
import { abandonLandscape, iotService, waitForPhase } from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const IoTServices = customResource('cp.iotservices.io', 'v1alpha1', 'IoTService', 'iotservices');
const JOB = 'iot-operator-metrics';
/** The alert windows, shortened for the test through the chart's values. */
const INSTANCE_FAILED_FOR_S = 10;
const OPERATOR_DOWN_FOR_S = 10;
/** Beyond an alert's window: the operator's report, a scrape and a rule evaluation (2 s each), and a busy node's delays. */
const ALERT_SLACK_MS = 60_000;

/** Grafana's $__rate_interval for a 2 s scrape interval (at least four scrapes). */
const RATE_INTERVAL = '20s';
const STEP_S = 2;

let rel: ChartRelease;
let landscape = '';
let release = '';
let prometheus: Prometheus | undefined;
let ruleSpec: { groups: Array<{ name: string; rules: Array<{ alert?: string; record?: string }> }> };
/** When Prometheus started: the dashboards' time range. */
let started = 0;

/** The PrometheusRule rendered (this cluster has no Prometheus Operator to install it), its windows shortened. */
const RULE_VALUES = [
  '--set', 'metrics.prometheusRule.enabled=true',
  '--set', `metrics.prometheusRule.instanceFailedFor=${INSTANCE_FAILED_FOR_S}s`,
  '--set', `metrics.prometheusRule.operatorDownFor=${OPERATOR_DOWN_FOR_S}s`,
];

/** One object the chart renders with these values (`helm template --show-only`). */
async function rendered<T extends KubeObject>(template: string, kind: string, extra: string[] = []): Promise<T> {
  const out = await rel.helm('template', release, chart, '-n', landscape, '--show-only', template, ...rel.values(extra));
  const object = parseAllDocuments(out).map((d) => d.toJSON() as T).find((o) => o?.kind === kind);
  assert.ok(object, `helm template --show-only ${template} renders a ${kind}`);
  return object;
}

/** `up` of the operator's targets in Prometheus, by pod. */
async function operatorUp(): Promise<Record<string, string>> {
  const samples = await prometheus!.query(`up{job="${JOB}", namespace="${landscape}"}`);
  return Object.fromEntries(samples.map((s) => [s.metric.pod ?? '', s.value[1]]));
}

before(async () => {
  if (skip) return;
  rel = await prepareChartRelease(env, 'ls-obs');
  ({ landscape, release } = rel);
  const monitor = await rendered<ServiceMonitor>('templates/metrics-service.yaml', 'ServiceMonitor', ['--set', 'metrics.serviceMonitor=true']);
  ruleSpec = (await rendered<KubeObject & { spec: typeof ruleSpec }>('templates/prometheusrule.yaml', 'PrometheusRule', RULE_VALUES)).spec;
  await rel.helm('install', release, chart, '-n', landscape, ...rel.values());
  prometheus = await deployPrometheus(env, {
    namespace: await env.namespace('prom-obs'),
    scrapeConfigs: scrapeConfigForServiceMonitor(monitor),
    ruleFiles: { 'iot-operator.rules.yaml': ruleSpec },
    metricsReaderClusterRole: `${landscape}-iot-operator-metrics-reader`,
  });
  started = Math.floor(Date.now() / 1000);
});

after(async () => {
  await prometheus?.remove().catch(() => undefined);
  if (landscape) await rel.helm('uninstall', release, '-n', landscape, '--wait').catch(() => undefined);
  if (landscape) await abandonLandscape(env, landscape);
  await env.cleanup();
});

describe('the IoT operator watched by a real Prometheus', { skip }, () => {
  test('Prometheus scrapes the operator’s pod through the chart’s metrics Service over HTTPS, as the chart’s ServiceMonitor says; an IoTService made Available shows in its instance metrics', async () => {
    const [pod] = await rel.waitForReadyPods(1);
    const up = await waitFor('Prometheus to scrape the operator’s pod', async () => {
      const byPod = await operatorUp();
      return { done: byPod[pod!.metadata.name!] === '1', value: byPod, seen: { up: byPod, targets: await prometheus!.targets() } };
    }, { timeoutMs: 60_000 });
    assert.deepEqual(up, { [pod!.metadata.name!]: '1' });
    const [target] = (await prometheus!.targets()).filter((t) => t.labels.job === JOB);
    assert.match(target!.scrapeUrl, /^https:\/\/[0-9.]+:8080\/metrics$/, 'scraped over HTTPS at the pod behind the Service');
    assert.equal(target!.labels.namespace, landscape);
    await env.client.create(IoTServices, iotService('tenant-a', landscape));
    await waitForPhase(env, landscape, 'tenant-a', 'Available', 120_000);
    const available = await waitFor('tenant-a Available in Prometheus', async () => {
      const samples = await prometheus!.query(`iotservice_status_phase{job="${JOB}", namespace="${landscape}", name="tenant-a"} == 1`);
      return { done: samples.length === 1 && samples[0]!.metric.phase === 'Available', value: samples, seen: samples };
    }, { timeoutMs: 30_000 });
    assert.equal(available[0]!.metric.phase, 'Available');
  });

  test('the alert rules Prometheus evaluates are the chart’s PrometheusRule, every one evaluated without error', async () => {
    const expected = ruleSpec.groups.flatMap((g) => g.rules.map((r) => r.alert ?? r.record)).sort();
    const groups = await waitFor('every rule evaluated', async () => {
      const loaded = await prometheus!.rules();
      const rules = loaded.flatMap((g) => g.rules);
      return { done: rules.length > 0 && rules.every((r) => r.health !== 'unknown'), value: loaded, seen: rules.map((r) => [r.name, r.health]) };
    }, { timeoutMs: 30_000 });
    assert.deepEqual(groups.flatMap((g) => g.rules.map((r) => r.name)).sort(), expected);
    assert.deepEqual(groups.flatMap((g) => g.rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`)), []);
    assert.ok(expected.includes('IoTServiceFailed') && expected.includes('OperatorDown'));
  });

  test('an IoTService Failed (its landscape’s image-pull-secret missing): IoTServiceFailed fires for it; fixed, the alert resolves', async () => {
    await env.client.delete(Kinds.Secret, 'image-pull-secret', landscape);
    try {
      await waitForPhase(env, landscape, 'tenant-a', 'Failed');
      const alert = await prometheus!.waitForAlert('IoTServiceFailed', 'firing', { namespace: landscape, name: 'tenant-a' }, INSTANCE_FAILED_FOR_S * 1000 + ALERT_SLACK_MS);
      assert.equal(alert?.labels.severity, 'warning');
      assert.match(alert?.annotations.runbook_url ?? '', /#iotservicefailed$/);
      assert.match(alert?.annotations.summary ?? '', new RegExp(`IoTService ${landscape}/tenant-a is Failed`));
    } finally {
      await registryPullSecret(env, landscape, 'image-pull-secret');
    }
    await waitForPhase(env, landscape, 'tenant-a', 'Available', 120_000);
    await prometheus!.waitForAlert('IoTServiceFailed', 'inactive', { namespace: landscape, name: 'tenant-a' }, ALERT_SLACK_MS);
  });

  test('the operator’s pod gone (its Deployment scaled to 0): OperatorDown fires; a pod back, it resolves', async () => {
    assert.equal((await prometheus!.alerts()).filter((a) => a.labels.alertname === 'OperatorDown').length, 0, 'OperatorDown is quiet while the operator runs');
    await env.client.patch(Kinds.Deployment, 'iot-operator', landscape, { spec: { replicas: 0 } });
    await rel.waitForReadyPods(0);
    const alert = await prometheus!.waitForAlert('OperatorDown', 'firing', { namespace: landscape, job: JOB }, OPERATOR_DOWN_FOR_S * 1000 + ALERT_SLACK_MS);
    assert.equal(alert?.labels.severity, 'critical');
    await env.client.patch(Kinds.Deployment, 'iot-operator', landscape, { spec: { replicas: 1 } });
    const [pod] = await rel.waitForReadyPods(1);
    await waitFor('Prometheus to scrape the new pod', async () => {
      const byPod = await operatorUp();
      return { done: byPod[pod!.metadata.name!] === '1', value: undefined, seen: byPod };
    }, { timeoutMs: 60_000 });
    await prometheus!.waitForAlert('OperatorDown', 'inactive', { namespace: landscape, job: JOB }, ALERT_SLACK_MS);
  });

  test('every panel query of both dashboards (the runtime’s, the IoT instances’) has data to draw from this Prometheus over the run', async () => {
    const end = Math.ceil(Date.now() / 1000);
    const empty: string[] = [];
    const panels: Panel[] = [];
    for (const dashboard of [readDashboard(DASHBOARD_SOURCES.runtime), readDashboard(DASHBOARD_SOURCES.iot)]) {
      const queries = panelQueries(dashboard);
      assert.ok(queries.length > 0, `${dashboard.title} has panel queries`);
      for (const { title, expr } of queries) {
        const query = concreteQuery(expr, { job: JOB, namespace: landscape }, RATE_INTERVAL);
        const series = await prometheus!.queryRange(query, started, end, STEP_S);
        if (!series.some((s) => s.values.some(([, v]) => Number.isFinite(Number(v))))) empty.push(`${dashboard.title} / ${title}: ${query} → ${JSON.stringify(series).slice(0, 300)}`);
        let panel = panels.find((p) => p.title === `${dashboard.title}: ${title}`);
        if (!panel) panels.push((panel = { title: `${dashboard.title}: ${title}`, series: [] }));
        (panel.series as Panel['series'][number][]).push(
          ...series.map((s) => ({ label: legend(dashboard, title, expr, s.metric), points: s.values.map(([t, v]) => [t, Number(v)] as const) })),
        );
      }
    }
    assert.deepEqual(empty, [], 'panel queries without a value to draw (no series, or only NaN)');
    const picture = process.env.DASHBOARD_PICTURE;
    if (picture) {
      writeFileSync(picture, dashboardSvg(panels, { title: 'The operator runtime’s and the IoT instances’ dashboards over observability.e2e (an IoTService Failed, the operator scaled to 0 and back)', startSeconds: started, endSeconds: end }));
      console.log(`# dashboards' picture written to ${picture}`);
    }
  });
});

/** A series' name in a panel, as Grafana's legendFormat of the query's target makes it (the values of its own labels when the target has none). */
function legend(dashboard: Dashboard, title: string, expr: string, metric: Record<string, string>): string {
  const targets = (dashboard.panels as Array<{ title?: string; targets?: Array<{ expr?: string; legendFormat?: string }> }>).filter((p) => p.title === title).flatMap((p) => p.targets ?? []);
  const format = targets.find((t) => t.expr === expr)?.legendFormat;
  if (format) return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, label: string) => metric[label] ?? '');
  return Object.entries(metric).filter(([k]) => !['job', 'namespace', 'instance', 'endpoint', 'service', 'container'].includes(k)).map(([, v]) => v).join(' ') || expr;
}
