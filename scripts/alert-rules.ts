/**
 * The operators' Prometheus alert rules, from one source: the generator `alert-rules` of `npm run
 * generate` writes the plain rules files (for Prometheus without the Prometheus Operator) beside
 * each operator's manifests and the PrometheusRule templates of the IoT and Armada charts;
 * `npm run generate -- --check` fails when a committed one differs, so a change to an alert lands
 * once, here.
 *
 * Guarantees of every generated file:
 * - Every operator on the runtime gets the runtime's alerts (operator down, no leader, reconcile
 *   errors, work queue backlog, client-side throttling, restart loop); the IoT operator also gets
 *   ShardMissing (only where it runs sharded), the IoTService phase alerts, the ingestion
 *   alerts (stalled, backlog high), the gateway certificate's expiry and the backups' age (last
 *   full backup, WAL archive).
 * - Each alert has a `severity` label and `summary`, `description` (naming the object and what to
 *   do) and `runbook_url` = `<runbook base>#<alert name in lower case>`, a section of
 *   docs/observability.md.
 * - The operator's series are selected by `job` (the Prometheus Operator's job: the name of the
 *   Service it scrapes) and, in a chart, also by `namespace` (the release namespace); a plain file
 *   names in its header the job it expects.
 * - In a chart, the windows a user (or a test) tunes are values under metrics.prometheusRule:
 *   `operatorDownFor` (both charts), `instanceFailedFor` and `instanceProcessingFor` (IoT); the
 *   PrometheusRule exists when metrics.prometheusRule.enabled is true, or auto and the cluster
 *   serves monitoring.coreos.com/v1 PrometheusRule.
 */
import path from 'node:path';
import { notice, repoRoot as root, type Files, type Generator } from './generator.ts';

export const OPERATORS = ['iot', 'armada', 'memcached', 'ptemplate'] as const;
export type Operator = (typeof OPERATORS)[number];

/** The runbook base of the plain files, as the charts' default metrics.prometheusRule.runbookBaseUrl. */
export const DEFAULT_RUNBOOK_BASE = 'docs/observability.md';

/** A window (`for`) of an alert: its default, and the chart value that sets it, if any. */
interface Window {
  default: string;
  value?: 'operatorDownFor' | 'instanceFailedFor' | 'instanceProcessingFor';
}

/** Which operators get an alert: every one on the runtime, the IoT operator sharded, the IoT operator. */
type Scope = 'runtime' | 'sharding' | 'iot';

interface Alert {
  name: string;
  scope: Scope;
  severity: 'critical' | 'warning';
  /** The expression, given the label matchers of the operator's series (`job="…"[, namespace="…"]`). */
  expr: (sel: string) => string;
  for?: Window;
  summary: string;
  description: string;
}

/** Every alert, in the order of docs/observability.md's table. Text may use `{{ $labels.x }}`. */
export const ALERTS: readonly Alert[] = [
  {
    name: 'OperatorDown',
    scope: 'runtime',
    severity: 'critical',
    expr: (sel) => `max by (job, namespace) (up{${sel}}) == 0\nor\nabsent(up{${sel}})`,
    for: { default: '5m', value: 'operatorDownFor' },
    summary: 'Operator {{ $labels.job }} is down: no replica answers on /metrics',
    description:
      'Prometheus has scraped no running replica of {{ $labels.job }} in namespace {{ $labels.namespace }} for the alert\'s whole window: nothing reconciles its objects. ' +
      'Check its pods (kubectl -n {{ $labels.namespace }} get pods; describe; logs --previous) and that Prometheus reaches their /metrics.',
  },
  {
    name: 'OperatorNoLeader',
    scope: 'runtime',
    severity: 'critical',
    expr: (sel) => `max by (job, namespace) (leader_election_master_status{${sel}}) == 0`,
    for: { default: '2m' },
    summary: 'Operator {{ $labels.job }} has no leader: no replica reconciles',
    description:
      'Replicas of {{ $labels.job }} in namespace {{ $labels.namespace }} are running but none has held its Lease for 2 minutes, so none reconciles. ' +
      'Read the Lease (kubectl -n {{ $labels.namespace }} get lease) and the replicas\' logs for "lease request failed" (API server reachable? RBAC on leases?).',
  },
  {
    name: 'OperatorShardMissing',
    scope: 'sharding',
    severity: 'warning',
    expr: (sel) =>
      `(up{${sel}} == 0 and on (job, namespace) (max by (job, namespace) (up{${sel}}) == 1))\nor\nleader_election_master_status{${sel}} == 0`,
    for: { default: '5m' },
    summary: 'A shard of {{ $labels.job }} is out of its ControllerRing',
    description:
      'Replica {{ $labels.instance }} of {{ $labels.job }} in namespace {{ $labels.namespace }} has not been scraped or has not held its shard Lease for 5 minutes while other replicas run: ' +
      'its IoTServices were moved to the other shards, which now carry more than their share. Check the replica\'s pod (describe, logs --previous) and its Lease (kubectl -n {{ $labels.namespace }} get lease -l alpha.sharding.timebertt.dev/controllerring).',
  },
  {
    name: 'OperatorReconcileErrors',
    scope: 'runtime',
    severity: 'warning',
    expr: (sel) => `sum by (job, namespace, controller) (rate(controller_runtime_reconcile_errors_total{${sel}}[5m])) > 0`,
    for: { default: '15m' },
    summary: 'Controller {{ $labels.controller }} of {{ $labels.job }} keeps failing to reconcile',
    description:
      'Controller {{ $labels.controller }} of {{ $labels.job }} in namespace {{ $labels.namespace }} has returned reconcile errors in every 5-minute window for 15 minutes. ' +
      'Its log lines "reconcile failed" name each failing object (field "object") and the error; fix what they name (RBAC, a webhook, an invalid object).',
  },
  {
    name: 'OperatorWorkQueueBacklog',
    scope: 'runtime',
    severity: 'warning',
    expr: (sel) => `workqueue_depth{${sel}} > 0`,
    for: { default: '15m' },
    summary: 'The work queue {{ $labels.name }} of {{ $labels.job }} has not been empty for 15 minutes',
    description:
      'Work queue {{ $labels.name }} of {{ $labels.job }} ({{ $labels.instance }}, namespace {{ $labels.namespace }}) has had keys waiting for 15 minutes: changes wait before they are reconciled. ' +
      'Compare workqueue_adds_total with the reconcile rate and workqueue_longest_running_processor_seconds (a stuck reconcile); raise maxConcurrentReconciles, the client\'s rate limit, or shard.',
  },
  {
    name: 'OperatorClientThrottled',
    scope: 'runtime',
    severity: 'warning',
    expr: (sel) =>
      `sum by (job, namespace, instance) (rate(rest_client_rate_limiter_duration_seconds_sum{${sel}}[5m]))\n/\nsum by (job, namespace, instance) (rate(rest_client_rate_limiter_duration_seconds_count{${sel}}[5m]))\n> 0.1`,
    for: { default: '15m' },
    summary: 'Requests of {{ $labels.job }} wait in its client-side rate limiter',
    description:
      'Requests of {{ $labels.job }} ({{ $labels.instance }}, namespace {{ $labels.namespace }}) have waited on average more than 0.1 s in the client\'s token bucket for 15 minutes: the operator sends as fast as --kube-api-qps / --kube-api-burst let it. ' +
      'If this is a burst of new objects, let it pass; otherwise look for a hot loop in the logs (the same object reconciled again and again) or raise the limit.',
  },
  {
    name: 'OperatorRestartLoop',
    scope: 'runtime',
    severity: 'warning',
    expr: (sel) => `changes(process_start_time_seconds{${sel}}[30m]) > 2`,
    summary: 'Operator {{ $labels.job }} restarts again and again',
    description:
      'The operator process at {{ $labels.instance }} ({{ $labels.job }}, namespace {{ $labels.namespace }}) started more than twice in 30 minutes. ' +
      'Read why the last one ended: kubectl -n {{ $labels.namespace }} logs --previous <pod>, and describe <pod> (OOMKilled: raise resources.limits.memory; a failed liveness probe; lost Lease).',
  },
  {
    name: 'IoTServiceFailed',
    scope: 'iot',
    severity: 'warning',
    expr: (sel) => `max by (job, namespace, name) (iotservice_status_phase{${sel}, phase="Failed"}) == 1`,
    for: { default: '5m', value: 'instanceFailedFor' },
    summary: 'IoTService {{ $labels.namespace }}/{{ $labels.name }} is Failed',
    description:
      'IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} has been Failed for longer than the alert\'s window. ' +
      'Its status.reason and status.message say what to fix: kubectl -n {{ $labels.namespace }} get iots {{ $labels.name }} -o jsonpath=\'{.status}\' (docs/iotservice.md lists every reason).',
  },
  {
    name: 'IoTServiceProcessingTooLong',
    scope: 'iot',
    severity: 'warning',
    expr: (sel) => `max by (job, namespace, name) (iotservice_status_phase{${sel}, phase="Processing"}) == 1`,
    for: { default: '15m', value: 'instanceProcessingFor' },
    summary: 'IoTService {{ $labels.namespace }}/{{ $labels.name }} has been Processing too long',
    description:
      'IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} has not become Available within the alert\'s window. ' +
      'Its status.message names the pods in the way: kubectl -n {{ $labels.namespace }} get iots {{ $labels.name }} -o jsonpath=\'{.status.message}\', then kubectl -n {{ $labels.namespace }}-{{ $labels.name }} get pods (Pending: quota or node capacity; not ready: the pod\'s logs).',
  },
  {
    name: 'IoTServiceIngestionStalled',
    scope: 'iot',
    severity: 'critical',
    expr: (sel) => `max by (job, namespace, name) (iotservice_ingestion_stalled{${sel}}) == 1`,
    for: { default: '1m' },
    summary: 'IoTService {{ $labels.namespace }}/{{ $labels.name }} stores no telemetry',
    description:
      'Telemetry of IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} has waited in its broker for more than a minute and processing has stored none of it: devices\' data does not reach the database. ' +
      'Read processing\'s logs (kubectl -n {{ $labels.namespace }}-{{ $labels.name }} logs deploy/processing) and check the database; iotservice_ingestion_backlog_messages shows what waits.',
  },
  {
    name: 'IoTServiceBacklogHigh',
    scope: 'iot',
    severity: 'warning',
    expr: (sel) =>
      `max by (job, namespace, name) (iotservice_ingestion_backlog_bytes{${sel}})\n/\nmax by (job, namespace, name) (iotservice_ingestion_backlog_limit_bytes{${sel}})\n> 0.8`,
    for: { default: '5m' },
    summary: 'The broker backlog of IoTService {{ $labels.namespace }}/{{ $labels.name }} is above 80 % of its limit',
    description:
      'The telemetry waiting in the broker of IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} has filled more than 80 % of spec.broker.maxBacklog for 5 minutes; when full, the gateway slows devices down or refuses them. ' +
      'Let processing catch up (spec.processing.replicas, the database\'s speed: kubectl -n {{ $labels.namespace }}-{{ $labels.name }} logs deploy/processing) or raise spec.broker.maxBacklog.',
  },
  {
    name: 'IoTServiceApplicationLagging',
    scope: 'iot',
    severity: 'warning',
    expr: (sel) => `max by (job, namespace, name) (iotservice_application_stream_lag_messages{${sel}}) > 10000`,
    for: { default: '10m' },
    summary: 'An application following IoTService {{ $labels.namespace }}/{{ $labels.name }} lags by more than 10,000 events',
    description:
      'An application following the event stream of IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} (GET /v1/stream) has had more than 10,000 events yet to get for 10 minutes: it reads slower than the tenant\'s devices send. ' +
      'Events older than the stream keeps (config.yml events.seconds, a day by default) are gone before it reads them. Check the application\'s network and speed, or split its stream by device (?device=).',
  },
  {
    name: 'IoTServiceCertificateExpiring',
    scope: 'iot',
    severity: 'warning',
    expr: (sel) => `min by (job, namespace, name) (iotservice_gateway_certificate_expiry_timestamp_seconds{${sel}}) - time() < 14 * 86400`,
    for: { default: '1h' },
    summary: 'The gateway certificate of IoTService {{ $labels.namespace }}/{{ $labels.name }} expires in less than 14 days',
    description:
      'The server certificate devices check the gateway of IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} by expires in less than 14 days, although the operator renews it 30 days before: renewal failed. ' +
      'Look for Warning Events and the operator\'s logs about it (kubectl -n {{ $labels.namespace }} get events --field-selector involvedObject.name={{ $labels.name }}) and at Secret gateway-tls (kubectl -n {{ $labels.namespace }}-{{ $labels.name }} get secret gateway-tls).',
  },
  {
    name: 'IoTServiceBackupTooOld',
    scope: 'iot',
    severity: 'warning',
    // A full backup is due one schedule after the last one ended: a quarter of the schedule and
    // the hour of `for` are what a backup may take, retries included. No backup at all (the
    // repository never made one, or cannot be read) counts as too old once the hour has passed.
    expr: (sel) =>
      `time() - max by (job, namespace, name) (iotservice_backup_last_success_timestamp_seconds{${sel}})\n> on (job, namespace, name)\n1.25 * max by (job, namespace, name) (iotservice_backup_schedule_seconds{${sel}})\n` +
      `or\nmax by (job, namespace, name) (iotservice_backup_schedule_seconds{${sel}})\nunless on (job, namespace, name)\niotservice_backup_last_success_timestamp_seconds{${sel}}`,
    for: { default: '1h' },
    summary: 'The last backup of IoTService {{ $labels.namespace }}/{{ $labels.name }} is older than its schedule allows',
    description:
      'IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} has had no completed full backup for more than 1.25 times spec.backup.schedule, for an hour (or none at all for an hour): a restore would start from an old backup and replay the WAL since. ' +
      'Read the repository host\'s log (kubectl -n {{ $labels.namespace }}-{{ $labels.name }} logs backup-0: "full backup failed", "stanza-create failed") and status.backup (kubectl -n {{ $labels.namespace }} get iots {{ $labels.name }} -o jsonpath=\'{.status.backup}\').',
  },
  {
    name: 'IoTServiceWalArchiveStale',
    scope: 'iot',
    severity: 'critical',
    // Telemetry stored at least 4 minutes ago (the last-stored time as it was then) that is more
    // than a minute newer than the newest archived WAL segment: writes older than 4 minutes are
    // not archived, the archive is over 5 minutes behind them. An idle database archives nothing
    // and stores nothing, so its last store is older than its last archived segment: silent. The
    // minute forgives an acknowledgement that wrote nothing (a message stored before, sent again).
    expr: (sel) =>
      `max by (job, namespace, name) (iotservice_ingestion_last_stored_timestamp_seconds{${sel}} offset 4m)\n- on (job, namespace, name)\nmax by (job, namespace, name) (iotservice_backup_last_archived_wal_timestamp_seconds{${sel}})\n> 60`,
    summary: 'The WAL archive of IoTService {{ $labels.namespace }}/{{ $labels.name }} is more than 5 minutes behind its writes',
    description:
      'Telemetry IoTService {{ $labels.name }} in namespace {{ $labels.namespace }} stored more than 4 minutes ago is not in any WAL segment of its backup repository, whose newest segment is over 5 minutes older: a restore would lose what the database wrote since. ' +
      'Read the database\'s log for archive_command failures (kubectl -n {{ $labels.namespace }}-{{ $labels.name }} logs database-0 -c database, or with three replicas the pod labelled role=master: "archive command failed") and the repository host\'s (logs backup-0), and check that backup-0 runs and its volume has room.',
  },
];

export const anchorOf = (alert: Pick<Alert, 'name'>) => alert.name.toLowerCase();

/** The job name each operator's series carry: the Service the Prometheus Operator scrapes. */
export const JOBS: Record<Operator, string> = {
  iot: 'iot-operator-metrics',
  armada: 'armada-operator',
  memcached: 'memcached-operator-metrics',
  ptemplate: 'ptemplate-operator-metrics',
};

const PLAIN_FILES: Record<Operator, string> = {
  iot: 'operators/iot/deploy/prometheus_rules.yml',
  armada: 'operators/armada/deploy/prometheus_rules.yml',
  memcached: 'operators/memcached/deploy/prometheus/prometheus_rules.yaml', // deploy/*.yaml are the OLM bundle's manifests
  ptemplate: 'operators/ptemplate/config/prometheus/rules.yaml',
};

const CHART_FILES: Partial<Record<Operator, string>> = {
  iot: 'operators/iot/chart/iot-operator/templates/prometheusrule.yaml',
  armada: 'operators/armada/chart/armada-operator/templates/prometheusrule.yaml',
};

const alertsOf = (operator: Operator, scopes: readonly Scope[]) =>
  ALERTS.filter((a) => scopes.includes(a.scope) && (a.scope === 'runtime' || operator === 'iot'));

/** How a rule's templated parts are written: plain YAML, or a Helm template. */
interface Style {
  sel: string;
  /** A window's `for`. */
  window: (w: Window) => string;
  /** Text holding Prometheus' `{{ … }}` templates, made safe for the file. */
  text: (s: string) => string;
  runbook: (anchor: string) => string;
}

const indent = (text: string, by: number) => text.split('\n').map((line) => ' '.repeat(by) + line).join('\n');

function ruleYaml(alert: Alert, style: Style): string {
  const lines = [
    `- alert: ${alert.name}`,
    '  expr: |-',
    indent(style.text(alert.expr(style.sel)), 4),
    ...(alert.for ? [`  for: ${style.window(alert.for)}`] : []),
    '  labels:',
    `    severity: ${alert.severity}`,
    '  annotations:',
    '    summary: |-',
    indent(style.text(alert.summary), 6),
    '    description: |-',
    indent(style.text(alert.description), 6),
    `    runbook_url: ${style.runbook(anchorOf(alert))}`,
  ];
  return lines.join('\n');
}

const plainStyle = (operator: Operator): Style => ({
  sel: `job="${JOBS[operator]}"`,
  window: (w) => w.default,
  text: (s) => s,
  runbook: (anchor) => `${DEFAULT_RUNBOOK_BASE}#${anchor}`,
});

/** The plain rules file of `operator`: `rule_files` of a Prometheus without the Prometheus Operator. */
export function plainRules(operator: Operator): string {
  const style = plainStyle(operator);
  const group = (name: string, alerts: readonly Alert[]) =>
    [`  - name: ${name}`, '    rules:', ...alerts.map((a) => indent(ruleYaml(a, style), 6))].join('\n');
  const head = [
    `# ${notice(ALERT_RULES.name, SOURCE)}`,
    `# Alert rules of the ${operator} operator for a Prometheus without the Prometheus Operator (its`,
    '# rule_files); docs/observability.md describes each alert and its runbook. They select the',
    `# operator's series by job="${JOBS[operator]}": name the scrape job of the operator's /metrics so.`,
    'groups:',
  ];
  const parts = [...head, group(`${operator}-operator`, alertsOf(operator, ['runtime', 'iot']))];
  const sharded = alertsOf(operator, ['sharding']);
  if (sharded.length > 0) {
    parts.push('  # Only when the operator runs sharded (--shard-ring): a replica not holding its own Lease is then', '  # out of the ring. Leave this group out otherwise (a standby replica never holds the Lease).');
    parts.push(group(`${operator}-operator-sharding`, sharded));
  }
  return parts.join('\n') + '\n';
}

/** Helm's way of writing Prometheus' own `{{` and `}}`. */
const helmEscape = (s: string) => s.replace(/\{\{|\}\}/g, (m) => (m === '{{' ? '{{ "{{" }}' : '{{ "}}" }}'));

/** The PrometheusRule template of `operator`'s chart (templates/prometheusrule.yaml). */
export function chartTemplate(operator: 'iot' | 'armada'): string {
  const style: Style = {
    sel: `job="${JOBS[operator]}", namespace="\0NAMESPACE\0"`,
    window: (w) => (w.value ? `{{ $rule.${w.value} | quote }}` : w.default),
    text: (s) => helmEscape(s).replaceAll('\0NAMESPACE\0', '{{ .Release.Namespace }}'),
    runbook: (anchor) => `{{ printf "%s#${anchor}" $rule.runbookBaseUrl | quote }}`,
  };
  const rule = (a: Alert) => indent(ruleYaml(a, style), 8);
  const sharded = alertsOf(operator, ['sharding']);
  return [
    `{{- /* ${notice(ALERT_RULES.name, SOURCE)}`,
    '       The alert rules of docs/observability.md ("Alerts") as a PrometheusRule, where the Prometheus',
    '       Operator\'s API is installed (metrics.prometheusRule.enabled: auto = when the API exists, true =',
    '       always, false = never). */ -}}',
    '{{- $rule := .Values.metrics.prometheusRule }}',
    '{{- $enabled := $rule.enabled | toString }}',
    '{{- if or (eq $enabled "true") (and (eq $enabled "auto") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule")) }}',
    'apiVersion: monitoring.coreos.com/v1',
    'kind: PrometheusRule',
    'metadata:',
    `  name: ${operator}-operator`,
    '  namespace: {{ .Release.Namespace }}',
    '  labels:',
    `    {{- include "${operator}-operator.labels" . | nindent 4 }}`,
    '    {{- with $rule.labels }}',
    '    {{- toYaml . | nindent 4 }}',
    '    {{- end }}',
    'spec:',
    '  groups:',
    `    - name: ${operator}-operator`,
    '      rules:',
    ...alertsOf(operator, ['runtime', 'iot']).map(rule),
    ...(sharded.length > 0 ? ['{{- if .Values.sharding.enabled }}', ...sharded.map(rule), '{{- end }}'] : []),
    '{{- end }}',
    '',
  ].join('\n');
}

/** Every generated file, by path from the repository root. */
export function generatedAlertRules(): Files {
  return Object.fromEntries([
    ...OPERATORS.map((operator) => [PLAIN_FILES[operator], plainRules(operator)]),
    ...(['iot', 'armada'] as const).map((operator) => [CHART_FILES[operator]!, chartTemplate(operator)]),
  ]);
}

const SOURCE = 'scripts/alert-rules.ts';
export const ALERT_RULES: Generator = { name: 'alert-rules', files: generatedAlertRules };

export const plainRulesPath = (operator: Operator) => path.join(root, PLAIN_FILES[operator]);
