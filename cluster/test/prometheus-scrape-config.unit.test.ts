/**
 * The ServiceMonitor → Prometheus scrape configuration translation of the test support's
 * Prometheus (src/prometheus.ts): what the Prometheus Operator generates for the charts'
 * ServiceMonitor — the Service kept by its labels, the endpoint by its port name, HTTPS with the
 * pod's ServiceAccount token, `job` the Service's name — accepted by `promtool check config`
 * (v0.316.0, engines/build.sh promtool); a field it does not translate is refused by name.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { it } from 'node:test';
import { stringify } from 'yaml';
import { scrapeConfigForServiceMonitor, type ServiceMonitor } from '../src/prometheus.ts';
import { clusterDir } from '../src/up.ts';

const run = promisify(execFile);

/** The IoT chart's ServiceMonitor with metrics.secure (release iot-operator in devawsk8s). */
const monitor: ServiceMonitor = {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'ServiceMonitor',
  metadata: { name: 'iot-operator-metrics', namespace: 'devawsk8s' },
  spec: {
    selector: { matchLabels: { 'app.kubernetes.io/instance': 'iot-operator', 'app.kubernetes.io/component': 'metrics' } },
    endpoints: [{ port: 'https-metrics', path: '/metrics', scheme: 'https', bearerTokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token', tlsConfig: { insecureSkipVerify: true } }],
  },
};

it('a ServiceMonitor becomes the Prometheus Operator’s scrape configuration, which promtool accepts', async () => {
  const [config, ...more] = scrapeConfigForServiceMonitor(monitor);
  assert.equal(more.length, 0, 'one scrape configuration per endpoint');
  assert.equal(config!.job_name, 'serviceMonitor/devawsk8s/iot-operator-metrics/0');
  assert.deepEqual(config!.kubernetes_sd_configs, [{ role: 'endpoints', namespaces: { names: ['devawsk8s'] } }]);
  assert.equal(config!.scheme, 'https');
  assert.deepEqual(config!.authorization, { type: 'Bearer', credentials_file: '/var/run/secrets/kubernetes.io/serviceaccount/token' });
  assert.deepEqual(config!.tls_config, { insecure_skip_verify: true });
  const relabels = config!.relabel_configs as Array<Record<string, unknown>>;
  assert.deepEqual(relabels.filter((r) => r.action === 'keep').map((r) => [r.source_labels, r.regex]), [
    [['__meta_kubernetes_service_label_app_kubernetes_io_instance', '__meta_kubernetes_service_labelpresent_app_kubernetes_io_instance'], '(iot-operator);true'],
    [['__meta_kubernetes_service_label_app_kubernetes_io_component', '__meta_kubernetes_service_labelpresent_app_kubernetes_io_component'], '(metrics);true'],
    [['__meta_kubernetes_endpoint_port_name'], 'https-metrics'],
  ]);
  assert.deepEqual(relabels.find((r) => r.target_label === 'job')?.source_labels, ['__meta_kubernetes_service_name']);
  assert.deepEqual(relabels.find((r) => r.target_label === 'namespace')?.source_labels, ['__meta_kubernetes_namespace']);

  const promtool = (await run('bash', [path.join(clusterDir, 'engines', 'build.sh'), 'promtool'], { maxBuffer: 16 * 1024 * 1024, timeout: 30 * 60 * 1000 })).stdout.trim().split('\n').at(-1)!;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'scrape-config-'));
  try {
    writeFileSync(path.join(dir, 'prometheus.yml'), stringify({ scrape_configs: [config] }));
    // --syntax-only: the token file exists only in a pod.
    await run(promtool, ['check', 'config', '--syntax-only', path.join(dir, 'prometheus.yml')]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it('a field the translation does not know is refused, named', () => {
  const withInterval = { ...monitor, spec: { ...monitor.spec, endpoints: [{ ...monitor.spec.endpoints[0], interval: '30s' }] } } as unknown as ServiceMonitor;
  assert.throws(() => scrapeConfigForServiceMonitor(withInterval), /ServiceMonitor endpoint: interval not supported/);
  const withExpressions = { ...monitor, spec: { ...monitor.spec, selector: { matchExpressions: [] } } } as unknown as ServiceMonitor;
  assert.throws(() => scrapeConfigForServiceMonitor(withExpressions), /ServiceMonitor selector: matchExpressions not supported/);
});
