/**
 * A real Prometheus (github.com/prometheus/prometheus, built from Go modules by
 * `engines/build.sh prometheus`) in a pod on the local cluster's real node, for end-to-end
 * tests of what operators promise to a monitoring stack: scrape configurations, alert rules and
 * dashboard queries evaluated by Prometheus itself.
 *
 * Guarantees:
 * - `prometheusImage(env)` is an image of the built binary alone (`/bin/prometheus`, uid 65534),
 *   loaded into the real node's containerd once; its tag names the build.
 * - `scrapeConfigForServiceMonitor` translates a ServiceMonitor into Prometheus's own scrape
 *   configuration as the Prometheus Operator does for the fields it supports (selector.matchLabels,
 *   endpoints' port, path, scheme, bearerTokenFile, tlsConfig.insecureSkipVerify): Kubernetes
 *   service discovery of role `endpoints` in the monitor's namespace, the Service kept by its labels
 *   and the endpoint by its port name, `job` = the Service's name, `namespace`, `service`, `pod`,
 *   `container` and `endpoint` labels. Any other field is refused with an error naming it.
 * - `deployPrometheus` runs Prometheus in a namespace of the caller: a ServiceAccount with a
 *   ClusterRole for service discovery (list/watch endpoints, services, pods) and, when given,
 *   bound to a metrics-reader ClusterRole; a ConfigMap holding prometheus.yml and the rule files;
 *   one pod on the real node (non-root, read-only root file system, no capabilities, TSDB on an
 *   emptyDir) scraping and evaluating every `intervalSeconds` (default 2). It returns once
 *   Prometheus is ready and has loaded every rule file, with its base URL on the pod network
 *   (reachable from this machine) and helpers for its HTTP API. `remove()` deletes the
 *   cluster-scoped RBAC (the namespace is the caller's to delete).
 */
import { stringify as toYaml } from 'yaml';
import { isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { engineImage, onRealNode, readyPodIP } from './real-node.ts';

const CONFIG_DIR = '/etc/prometheus';
const PORT = 9090;

/** The Prometheus image (the binary built by engines/build.sh), loaded into the real node's containerd; its reference. */
export function prometheusImage(env: TestEnv): Promise<string> {
  return engineImage(env, 'prometheus', 'prometheus');
}

interface ServiceMonitorEndpoint {
  port?: string;
  path?: string;
  scheme?: string;
  bearerTokenFile?: string;
  tlsConfig?: { insecureSkipVerify?: boolean };
}

export interface ServiceMonitor extends KubeObject {
  spec: { selector: { matchLabels?: Record<string, string> }; endpoints: ServiceMonitorEndpoint[] };
}

/** Prometheus's name for a Kubernetes label in service discovery meta labels. */
const metaLabel = (label: string) => label.replace(/[^a-zA-Z0-9_]/g, '_');

function refuseOthers(what: string, object: object, known: readonly string[]): void {
  const unknown = Object.keys(object).filter((k) => !known.includes(k));
  if (unknown.length > 0) throw new Error(`${what}: ${unknown.join(', ')} not supported by this translation`);
}

/** The scrape configurations the Prometheus Operator generates for `monitor` (one per endpoint). */
export function scrapeConfigForServiceMonitor(monitor: ServiceMonitor): Array<Record<string, unknown>> {
  const namespace = monitor.metadata.namespace!;
  refuseOthers('ServiceMonitor spec', monitor.spec, ['selector', 'endpoints']);
  refuseOthers('ServiceMonitor selector', monitor.spec.selector, ['matchLabels']);
  return monitor.spec.endpoints.map((endpoint, index) => {
    refuseOthers('ServiceMonitor endpoint', endpoint, ['port', 'path', 'scheme', 'bearerTokenFile', 'tlsConfig']);
    refuseOthers('ServiceMonitor endpoint tlsConfig', endpoint.tlsConfig ?? {}, ['insecureSkipVerify']);
    if (!endpoint.port) throw new Error('ServiceMonitor endpoint: only endpoints naming a port are supported');
    return {
      job_name: `serviceMonitor/${namespace}/${monitor.metadata.name}/${index}`,
      kubernetes_sd_configs: [{ role: 'endpoints', namespaces: { names: [namespace] } }],
      metrics_path: endpoint.path ?? '/metrics',
      scheme: endpoint.scheme ?? 'http',
      ...(endpoint.bearerTokenFile ? { authorization: { type: 'Bearer', credentials_file: endpoint.bearerTokenFile } } : {}),
      ...(endpoint.tlsConfig ? { tls_config: { insecure_skip_verify: endpoint.tlsConfig.insecureSkipVerify === true } } : {}),
      relabel_configs: [
        ...Object.entries(monitor.spec.selector.matchLabels ?? {}).map(([label, value]) => ({
          action: 'keep',
          source_labels: [`__meta_kubernetes_service_label_${metaLabel(label)}`, `__meta_kubernetes_service_labelpresent_${metaLabel(label)}`],
          regex: `(${value});true`,
        })),
        { action: 'keep', source_labels: ['__meta_kubernetes_endpoint_port_name'], regex: endpoint.port },
        { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
        { source_labels: ['__meta_kubernetes_service_name'], target_label: 'service' },
        { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
        { source_labels: ['__meta_kubernetes_pod_container_name'], target_label: 'container' },
        { source_labels: ['__meta_kubernetes_service_name'], target_label: 'job' },
        { target_label: 'endpoint', replacement: endpoint.port },
      ],
    };
  });
}

export interface PrometheusOptions {
  /** The namespace Prometheus runs in (the caller creates and deletes it). */
  namespace: string;
  scrapeConfigs: Array<Record<string, unknown>>;
  /** Rule files by name: each a rule file's content (`{ groups: [...] }`, e.g. a PrometheusRule's spec). */
  ruleFiles?: Record<string, unknown>;
  /** A ClusterRole granting `get` on /metrics (an operator's metrics-reader), bound to Prometheus's ServiceAccount. */
  metricsReaderClusterRole?: string;
  /** Scrape and rule evaluation interval (default 2 s). */
  intervalSeconds?: number;
}

export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface PromSeries {
  metric: Record<string, string>;
  values: Array<[number, string]>;
}

export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

export interface PromRuleGroup {
  name: string;
  file: string;
  rules: Array<{ name: string; type: 'alerting' | 'recording'; health: string; lastError?: string; query: string; state?: string }>;
}

export interface PromTarget {
  labels: Record<string, string>;
  scrapePool: string;
  scrapeUrl: string;
  health: 'up' | 'down' | 'unknown';
  lastError: string;
}

export interface Prometheus {
  /** Base URL of Prometheus's HTTP API from this machine (the pod's IP). */
  url: string;
  query(expr: string): Promise<PromSample[]>;
  queryRange(expr: string, startSeconds: number, endSeconds: number, stepSeconds: number): Promise<PromSeries[]>;
  /** Active alerts (pending and firing), as /api/v1/alerts lists them. */
  alerts(): Promise<PromAlert[]>;
  rules(): Promise<PromRuleGroup[]>;
  targets(): Promise<PromTarget[]>;
  /**
   * Waits until an alert named `name` whose labels include `labels` is in `state`; `inactive`
   * means no such alert is pending or firing. Returns the alert (undefined for `inactive`).
   */
  waitForAlert(name: string, state: 'pending' | 'firing' | 'inactive', labels?: Record<string, string>, timeoutMs?: number): Promise<PromAlert | undefined>;
  /** Deletes the cluster-scoped RBAC made for this Prometheus. */
  remove(): Promise<void>;
}

async function api<T>(url: string): Promise<T> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const body = (await response.json()) as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`Prometheus answered ${response.status} to ${url}: ${body.error ?? JSON.stringify(body)}`);
  return body.data;
}

/** Runs Prometheus on the real node with `options`; returns once it is ready and has loaded every rule file. */
export async function deployPrometheus(env: TestEnv, options: PrometheusOptions): Promise<Prometheus> {
  const { namespace } = options;
  const interval = `${options.intervalSeconds ?? 2}s`;
  const name = 'prometheus';
  const clusterName = `${namespace}-prometheus`;
  const ruleFiles = Object.entries(options.ruleFiles ?? {});
  const config = {
    global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
    rule_files: ruleFiles.map(([file]) => `${CONFIG_DIR}/${file}`),
    scrape_configs: options.scrapeConfigs,
  };
  const subject = { kind: 'ServiceAccount', name, namespace };
  await env.client.create(Kinds.ServiceAccount, { metadata: { name, namespace } });
  await env.client.create(Kinds.ClusterRole, {
    metadata: { name: clusterName },
    rules: [{ apiGroups: [''], resources: ['endpoints', 'services', 'pods'], verbs: ['get', 'list', 'watch'] }],
  });
  await env.client.create(Kinds.ClusterRoleBinding, {
    metadata: { name: clusterName },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterName },
    subjects: [subject],
  });
  if (options.metricsReaderClusterRole) {
    await env.client.create(Kinds.ClusterRoleBinding, {
      metadata: { name: `${clusterName}-metrics-reader` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: options.metricsReaderClusterRole },
      subjects: [subject],
    });
  }
  const remove = async () => {
    for (const binding of [clusterName, `${clusterName}-metrics-reader`]) {
      await env.client.delete(Kinds.ClusterRoleBinding, binding).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
    }
    await env.client.delete(Kinds.ClusterRole, clusterName).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
  };
  try {
    return await startPod(env, options, config, ruleFiles, remove);
  } catch (e) {
    await remove();
    throw e;
  }
}

async function startPod(env: TestEnv, options: PrometheusOptions, config: object, ruleFiles: Array<[string, unknown]>, remove: () => Promise<void>): Promise<Prometheus> {
  const { namespace } = options;
  const name = 'prometheus';
  await env.client.create(Kinds.ConfigMap, {
    metadata: { name, namespace },
    data: { 'prometheus.yml': toYaml(config), ...Object.fromEntries(ruleFiles.map(([file, content]) => [file, typeof content === 'string' ? content : toYaml(content)])) },
  });
  await env.client.create(Kinds.Pod, {
    metadata: { name, namespace, labels: { 'app.kubernetes.io/name': 'prometheus' } },
    spec: {
      ...onRealNode,
      serviceAccountName: name,
      securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534, fsGroup: 65534, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name,
          image: await prometheusImage(env),
          imagePullPolicy: 'Never',
          args: [`--config.file=${CONFIG_DIR}/prometheus.yml`, '--storage.tsdb.path=/prometheus', `--web.listen-address=:${PORT}`, '--log.level=info'],
          ports: [{ name: 'web', containerPort: PORT }],
          readinessProbe: { httpGet: { path: '/-/ready', port: PORT }, periodSeconds: 1 },
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '512Mi' } },
          volumeMounts: [
            { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
            { name: 'data', mountPath: '/prometheus' },
          ],
        },
      ],
      volumes: [
        { name: 'config', configMap: { name } },
        { name: 'data', emptyDir: {} },
      ],
    },
  });
  const ip = await readyPodIP(env, namespace, name, 'Prometheus');
  const url = `http://${ip}:${PORT}`;

  const prometheus: Prometheus = {
    url,
    query: (expr) => api<{ result: PromSample[] }>(`${url}/api/v1/query?${new URLSearchParams({ query: expr })}`).then((d) => d.result),
    queryRange: (expr, start, end, step) =>
      api<{ result: PromSeries[] }>(`${url}/api/v1/query_range?${new URLSearchParams({ query: expr, start: String(start), end: String(end), step: String(step) })}`).then((d) => d.result),
    alerts: () => api<{ alerts: PromAlert[] }>(`${url}/api/v1/alerts`).then((d) => d.alerts),
    rules: () => api<{ groups: PromRuleGroup[] }>(`${url}/api/v1/rules`).then((d) => d.groups),
    targets: () => api<{ activeTargets: PromTarget[] }>(`${url}/api/v1/targets?state=active`).then((d) => d.activeTargets),
    waitForAlert: (alertName, state, labels = {}, timeoutMs = 120_000) =>
      waitFor(`alert ${alertName} ${JSON.stringify(labels)} to be ${state}`, async () => {
        const matching = (await prometheus.alerts()).filter((a) => a.labels.alertname === alertName && Object.entries(labels).every(([k, v]) => a.labels[k] === v));
        const alert = matching.find((a) => a.state === state);
        return { done: state === 'inactive' ? matching.length === 0 : !!alert, value: alert, seen: matching };
      }, { timeoutMs, intervalMs: 1000 }),
    remove,
  };
  const files = ruleFiles.map(([file]) => `${CONFIG_DIR}/${file}`);
  await waitFor('Prometheus to have loaded every rule file', async () => {
    const loaded = new Set((await prometheus.rules()).map((g) => g.file));
    return { done: files.every((f) => loaded.has(f)), value: undefined, seen: [...loaded] };
  }, { timeoutMs: 30_000 });
  return prometheus;
}
