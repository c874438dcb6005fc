// The operators' alert rules (scripts/alert-rules.ts; scripts/test/generate.unit.test.ts holds the
// committed files to the generated ones), offline with the project's helm and promtool: the charts
// render a PrometheusRule when asked (auto: when the API is served), with the values' windows, labels and
// runbook base, selecting the release namespace, ShardMissing only when sharded; `promtool check
// rules` accepts every plain file and every rendered PrometheusRule's spec; `promtool test rules`
// shows every alert firing on series that should fire it, silent on series that should not and
// silent just under its window.
//
//   node --import tsx --test scripts/test/alert-rules.unit.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { ALERTS, anchorOf, DEFAULT_RUNBOOK_BASE, JOBS, OPERATORS, plainRulesPath } from '../alert-rules.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const CHARTS = { iot: 'operators/iot/chart/iot-operator', armada: 'operators/armada/chart/armada-operator' } as const;
const NAMESPACE = 'land';
let helm = '';
let promtool = '';
const work = mkdtempSync(path.join(os.tmpdir(), 'alert-rules-'));

before(async () => {
  const lastLine = async (script: string, ...args: string[]) =>
    (await run('bash', [path.join(root, script), ...args], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
  helm = await lastLine('cluster/engines/build.sh', 'helm');
  promtool = await lastLine('cluster/engines/build.sh', 'promtool');
});
after(() => rmSync(work, { recursive: true, force: true }));

interface RuleGroups {
  groups: { name: string; rules: { alert: string; expr: string; for?: string; labels: Record<string, string>; annotations: Record<string, string> }[] }[];
}

/** The PrometheusRule `helm template` renders for `chart` with `args`, or undefined when it renders none. */
async function renderRule(chart: keyof typeof CHARTS, args: string[]): Promise<{ metadata: { labels: Record<string, string> }; spec: RuleGroups } | undefined> {
  const { stdout } = await run(helm, ['template', 'example', path.join(root, CHARTS[chart]), '--namespace', NAMESPACE, ...args], { maxBuffer: 16 * 1024 * 1024 });
  return parseAllDocuments(stdout).map((d) => d.toJS()).find((o) => o?.kind === 'PrometheusRule');
}

async function promtoolRun(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run(promtool, args, { cwd: work, maxBuffer: 16 * 1024 * 1024 });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? String(err)}`);
  }
}

/** Writes `groups` as a rules file in the work directory; returns its name. */
function rulesFile(name: string, groups: RuleGroups | string): string {
  writeFileSync(path.join(work, name), typeof groups === 'string' ? groups : stringify(groups));
  return name;
}

const enabled = ['--set', 'metrics.prometheusRule.enabled=true'];

describe('generated alert rules', () => {
  it('every alert has a severity, a summary, a description and a runbook section of docs/observability.md', () => {
    const iot = parse(readFileSync(plainRulesPath('iot'), 'utf8')) as RuleGroups;
    const rules = iot.groups.flatMap((g) => g.rules);
    assert.deepEqual(rules.map((r) => r.alert).sort(), ALERTS.map((a) => a.name).sort());
    for (const rule of rules) {
      assert.match(rule.labels.severity!, /^(critical|warning)$/, rule.alert);
      assert.ok(rule.annotations.summary && rule.annotations.description, rule.alert);
      assert.equal(rule.annotations.runbook_url, `${DEFAULT_RUNBOOK_BASE}#${rule.alert.toLowerCase()}`);
    }
    const docs = readFileSync(path.join(root, 'docs/observability.md'), 'utf8');
    for (const alert of ALERTS) assert.match(docs, new RegExp(`^### ${alert.name}$`, 'm'), `docs/observability.md has a runbook section for ${alert.name}`);
  });
});

describe("the charts' PrometheusRule", () => {
  it('enabled: auto renders it only where the cluster serves monitoring.coreos.com/v1 PrometheusRule; false never', async () => {
    for (const chart of ['iot', 'armada'] as const) {
      assert.equal(await renderRule(chart, []), undefined, `${chart}: no API, no rule`);
      assert.ok(await renderRule(chart, ['--api-versions', 'monitoring.coreos.com/v1/PrometheusRule']), `${chart}: API served`);
      assert.equal(await renderRule(chart, ['--api-versions', 'monitoring.coreos.com/v1/PrometheusRule', '--set', 'metrics.prometheusRule.enabled=false']), undefined);
    }
  });

  it("carries the values' labels, windows and runbook base, selects the release namespace, and ShardMissing only when sharded", async () => {
    const rule = (await renderRule('iot', [...enabled, '--set', 'metrics.prometheusRule.labels.release=monitoring', '--set', 'metrics.prometheusRule.instanceFailedFor=90s',
      '--set', 'metrics.prometheusRule.runbookBaseUrl=https://docs.example.com/observability']))!;
    assert.equal(rule.metadata.labels.release, 'monitoring');
    const rules = rule.spec.groups.flatMap((g) => g.rules);
    assert.equal(rules.find((r) => r.alert === 'IoTServiceFailed')!.for, '90s');
    assert.equal(rules.find((r) => r.alert === 'OperatorDown')!.annotations.runbook_url, 'https://docs.example.com/observability#operatordown');
    for (const r of rules) assert.ok(r.expr.includes(`job="${JOBS.iot}", namespace="${NAMESPACE}"`), `${r.alert} selects the release's series`);
    assert.ok(!rules.some((r) => r.alert === 'OperatorShardMissing'));
    const sharded = (await renderRule('iot', [...enabled, '--set', 'sharding.enabled=true']))!.spec.groups.flatMap((g) => g.rules);
    assert.ok(sharded.some((r) => r.alert === 'OperatorShardMissing'));
    const armada = (await renderRule('armada', enabled))!.spec.groups.flatMap((g) => g.rules).map((r) => r.alert);
    assert.deepEqual(armada, ALERTS.filter((a) => a.scope === 'runtime').map((a) => a.name));
  });
});

describe('promtool check rules', () => {
  for (const operator of OPERATORS) {
    it(`accepts ${path.relative(root, plainRulesPath(operator))}`, async () => {
      assert.match(await promtoolRun('check', 'rules', plainRulesPath(operator)), /SUCCESS: \d+ rules found/);
    });
  }
  for (const [chart, args] of [['iot', []], ['iot', ['--set', 'sharding.enabled=true']], ['armada', []]] as const) {
    it(`accepts the spec of the ${chart} chart's PrometheusRule ${args.join(' ')}`, async () => {
      const file = rulesFile(`${chart}-chart.yml`, (await renderRule(chart, [...enabled, ...args]))!.spec);
      const rules = ALERTS.filter((a) => a.scope === 'runtime' || (chart === 'iot' && (a.scope === 'iot' || args.length > 0)));
      assert.match(await promtoolRun('check', 'rules', file), new RegExp(`SUCCESS: ${rules.length} rules found`));
    });
  }
});

/** An alert expected at an evaluation time: its name and the labels of each firing instance. */
interface Expectation {
  at: string;
  alert: string;
  firing: Record<string, string>[];
}
interface Case {
  title: string;
  series: Record<string, string>;
  expect: Expectation[];
}

/** A Prometheus template of the rules, expanded as Prometheus expands `{{ $labels.x }}`. */
const expand = (text: string, labels: Record<string, string>) => text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, name: string) => labels[name] ?? '');

/** promtool's test file for `cases` against rules file `rules` (whose runbook base is `runbookBase`). */
function promtoolTests(rules: string, runbookBase: string, cases: Case[]): string {
  return stringify({
    rule_files: [rules],
    evaluation_interval: '1m',
    tests: cases.map((c) => ({
      name: c.title,
      interval: '1m',
      input_series: Object.entries(c.series).map(([series, values]) => ({ series, values })),
      alert_rule_test: c.expect.map((e) => {
        const alert = ALERTS.find((a) => a.name === e.alert)!;
        return {
          eval_time: e.at,
          alertname: e.alert,
          exp_alerts: e.firing.map((labels) => ({
            exp_labels: { ...labels, severity: alert.severity },
            exp_annotations: {
              summary: expand(alert.summary, labels),
              description: expand(alert.description, labels),
              runbook_url: `${runbookBase}#${anchorOf(alert)}`,
            },
          })),
        };
      }),
    })),
  });
}

/**
 * The cases every operator's rules pass, for series of `job` in namespace `ns`, with the
 * operator-down window `downFor` (minutes); `chart`: the rules select the namespace too (so an
 * absent operator's alert names it).
 */
function runtimeCases(job: string, ns: string, downFor: number, chart: boolean): Case[] {
  const at = (minutes: number) => `${minutes}m`;
  const sel = (extra = '') => `job="${job}", namespace="${ns}", instance="10.0.0.1:8080"${extra}`;
  const other = `job="${job}", namespace="${ns}", instance="10.0.0.2:8080"`;
  const target = { job, namespace: ns, instance: '10.0.0.1:8080' };
  const group = { job, namespace: ns };
  return [
    {
      title: 'OperatorDown: the only replica not scraped fires after the window, not just under it',
      series: { [`up{${sel()}}`]: '0x20' },
      expect: [
        { at: at(downFor - 1), alert: 'OperatorDown', firing: [] },
        { at: at(downFor), alert: 'OperatorDown', firing: [group] },
      ],
    },
    {
      title: "OperatorDown: no target at all (the operator is absent) fires; another job's target does not count",
      series: { [`up{job="someone-else", namespace="${ns}", instance="10.0.0.9:8080"}`]: '1x20' },
      expect: [
        { at: at(downFor - 1), alert: 'OperatorDown', firing: [] },
        { at: at(downFor), alert: 'OperatorDown', firing: [chart ? group : { job }] },
      ],
    },
    {
      title: 'OperatorDown: one replica of two down is not the operator down',
      series: { [`up{${sel()}}`]: '0x20', [`up{${other}}`]: '1x20' },
      expect: [{ at: at(15), alert: 'OperatorDown', firing: [] }],
    },
    {
      title: 'OperatorNoLeader: running replicas none of which holds the Lease fire after 2 minutes',
      series: {
        [`up{${sel()}}`]: '1x20',
        [`leader_election_master_status{${sel(', name="op-leader"')}}`]: '0x20',
        [`leader_election_master_status{${other}, name="op-leader"}`]: '0x20',
      },
      expect: [
        { at: '1m', alert: 'OperatorNoLeader', firing: [] },
        { at: '2m', alert: 'OperatorNoLeader', firing: [group] },
      ],
    },
    {
      title: 'OperatorNoLeader: a standby replica beside the leader is silent',
      series: {
        [`leader_election_master_status{${sel(', name="op-leader"')}}`]: '0x20',
        [`leader_election_master_status{${other}, name="op-leader"}`]: '1x20',
      },
      expect: [{ at: '15m', alert: 'OperatorNoLeader', firing: [] }],
    },
    {
      title: 'OperatorReconcileErrors: errors in every window fire after 15 minutes of them; one error once, or none, does not',
      series: {
        [`controller_runtime_reconcile_errors_total{${sel(', controller="failing"')}}`]: '0+1x30',
        [`controller_runtime_reconcile_errors_total{${sel(', controller="once"')}}`]: '0x5 1x25',
        [`controller_runtime_reconcile_errors_total{${sel(', controller="fine"')}}`]: '0x30',
      },
      // The rate exists from the second sample (1m): the errors have lasted 15 minutes at 16m.
      expect: [
        { at: '15m', alert: 'OperatorReconcileErrors', firing: [] },
        { at: '16m', alert: 'OperatorReconcileErrors', firing: [{ ...group, controller: 'failing' }] },
        { at: '25m', alert: 'OperatorReconcileErrors', firing: [{ ...group, controller: 'failing' }] },
      ],
    },
    {
      title: 'OperatorWorkQueueBacklog: a queue never empty for 15 minutes fires; one emptied in between does not',
      series: {
        [`workqueue_depth{${sel(', name="stuck"')}}`]: '3x30',
        [`workqueue_depth{${sel(', name="busy"')}}`]: '5x10 0 5x20',
        [`workqueue_depth{${sel(', name="idle"')}}`]: '0x30',
      },
      expect: [
        { at: '14m', alert: 'OperatorWorkQueueBacklog', firing: [] },
        { at: '15m', alert: 'OperatorWorkQueueBacklog', firing: [{ ...target, name: 'stuck' }] },
        { at: '25m', alert: 'OperatorWorkQueueBacklog', firing: [{ ...target, name: 'stuck' }] },
      ],
    },
    {
      title: 'OperatorClientThrottled: requests waiting 0.5 s on average fire after 15 minutes; 0.05 s, or no limiter, does not',
      series: {
        [`rest_client_rate_limiter_duration_seconds_sum{${sel(', verb="GET", host="api:6443"')}}`]: '0+30x30',
        [`rest_client_rate_limiter_duration_seconds_count{${sel(', verb="GET", host="api:6443"')}}`]: '0+60x30',
        [`rest_client_rate_limiter_duration_seconds_sum{${other}, verb="GET", host="api:6443"}`]: '0+3x30',
        [`rest_client_rate_limiter_duration_seconds_count{${other}, verb="GET", host="api:6443"}`]: '0+60x30',
        [`rest_client_rate_limiter_duration_seconds_sum{job="${job}", namespace="${ns}", instance="10.0.0.3:8080", verb="GET", host="api:6443"}`]: '0x30',
        [`rest_client_rate_limiter_duration_seconds_count{job="${job}", namespace="${ns}", instance="10.0.0.3:8080", verb="GET", host="api:6443"}`]: '0x30',
      },
      expect: [
        { at: '15m', alert: 'OperatorClientThrottled', firing: [] },
        { at: '16m', alert: 'OperatorClientThrottled', firing: [target] },
      ],
    },
    {
      title: 'OperatorRestartLoop: a third start within 30 minutes fires at once; two starts do not',
      series: {
        [`process_start_time_seconds{${sel()}}`]: '100 100 160 160 220 220 280 280 280',
        [`process_start_time_seconds{${other}}`]: '100 100 160 160 160 160 160 160 160',
      },
      expect: [
        { at: '5m', alert: 'OperatorRestartLoop', firing: [] },
        { at: '6m', alert: 'OperatorRestartLoop', firing: [target] },
      ],
    },
  ];
}

/** The IoTService phase alerts, with windows `failedFor` and `processingFor` (minutes), and the ingestion alerts. */
function instanceCases(job: string, ns: string, failedFor: number, processingFor: number): Case[] {
  const phase = (name: string, p: string) => `iotservice_status_phase{job="${job}", namespace="${ns}", instance="10.0.0.1:8080", name="${name}", phase="${p}"}`;
  const instance = (name: string) => ({ job, namespace: ns, name });
  const ingestion = (figure: string, name: string, label = name) => `iotservice_ingestion_${figure}{job="${job}", namespace="${ns}", instance="10.0.0.1:8080", name="${label}"}`;
  const backup = (figure: string, name: string) => `iotservice_backup_${figure}{job="${job}", namespace="${ns}", instance="10.0.0.1:8080", name="${name}"}`;
  return [
    {
      title: 'IoTServiceFailed: Failed for the window fires, not just under it; Failed for less, then Available, does not',
      series: {
        [phase('broken', 'Failed')]: '1x30',
        [phase('broken', 'Available')]: '0x30',
        [phase('recovered', 'Failed')]: `1x${failedFor - 2} 0x30`,
        [phase('recovered', 'Available')]: `0x${failedFor - 2} 1x30`,
      },
      expect: [
        { at: `${failedFor - 1}m`, alert: 'IoTServiceFailed', firing: [] },
        { at: `${failedFor}m`, alert: 'IoTServiceFailed', firing: [instance('broken')] },
      ],
    },
    {
      title: 'IoTServiceProcessingTooLong: Processing for the window fires, not just under it; Available does not',
      series: {
        [phase('slow', 'Processing')]: '1x40',
        [phase('up', 'Processing')]: '0x40',
        [phase('up', 'Available')]: '1x40',
      },
      expect: [
        { at: `${processingFor - 1}m`, alert: 'IoTServiceProcessingTooLong', firing: [] },
        { at: `${processingFor}m`, alert: 'IoTServiceProcessingTooLong', firing: [instance('slow')] },
        { at: `${processingFor}m`, alert: 'IoTServiceFailed', firing: [] },
      ],
    },
    {
      title: 'IoTServiceIngestionStalled: stalled for a minute fires, not just under it; stalled briefly, or flowing, does not',
      series: {
        [ingestion('stalled', 'stalled')]: '0 1x20',
        [ingestion('stalled', 'stalled', 'blip')]: '0 1 0x20',
        [ingestion('stalled', 'flowing')]: '0x20',
      },
      expect: [
        { at: '1m', alert: 'IoTServiceIngestionStalled', firing: [] },
        { at: '2m', alert: 'IoTServiceIngestionStalled', firing: [instance('stalled')] },
      ],
    },
    {
      title: 'IoTServiceBacklogHigh: above 80 % of the limit for 5 minutes fires, not just under it; 80 % or below does not',
      series: {
        [ingestion('backlog_bytes', 'filling')]: '900x20',
        [ingestion('backlog_limit_bytes', 'filling')]: '1000x20',
        [ingestion('backlog_bytes', 'fine')]: '800x20',
        [ingestion('backlog_limit_bytes', 'fine')]: '1000x20',
      },
      expect: [
        { at: '4m', alert: 'IoTServiceBacklogHigh', firing: [] },
        { at: '5m', alert: 'IoTServiceBacklogHigh', firing: [instance('filling')] },
      ],
    },
    {
      title: 'IoTServiceApplicationLagging: an application over 10,000 events behind for 10 minutes fires, not just under it; 10,000 or less does not',
      series: {
        [`iotservice_application_stream_lag_messages{job="${job}", namespace="${ns}", instance="10.0.0.1:8080", name="behind"}`]: '20000x20',
        [`iotservice_application_stream_lag_messages{job="${job}", namespace="${ns}", instance="10.0.0.1:8080", name="keeping-up"}`]: '10000x20',
      },
      expect: [
        { at: '9m', alert: 'IoTServiceApplicationLagging', firing: [] },
        { at: '10m', alert: 'IoTServiceApplicationLagging', firing: [instance('behind')] },
      ],
    },
    {
      // A 10-minute schedule: too old past 12.5 minutes, firing an hour later.
      title: 'IoTServiceBackupTooOld: no backup for 1.25 schedules, for an hour, fires; none at all for an hour fires; backups on schedule do not',
      series: {
        [backup('schedule_seconds', 'late')]: '600x90',
        [backup('last_success_timestamp_seconds', 'late')]: '0x90',
        [backup('schedule_seconds', 'regular')]: '600x90',
        // A backup ending every 10 minutes (the sample at t shows the one that ended at t).
        [backup('last_success_timestamp_seconds', 'regular')]: Array.from({ length: 91 }, (_, i) => Math.floor(i / 10) * 600).join(' '),
        [backup('schedule_seconds', 'never')]: '600x90',
      },
      expect: [
        { at: '59m', alert: 'IoTServiceBackupTooOld', firing: [] },
        { at: '60m', alert: 'IoTServiceBackupTooOld', firing: [instance('never')] },
        { at: '72m', alert: 'IoTServiceBackupTooOld', firing: [instance('never')] },
        { at: '73m', alert: 'IoTServiceBackupTooOld', firing: [instance('never'), instance('late')] },
      ],
    },
    {
      // Values are Unix seconds; the series start at time 0 and have a sample each minute.
      title: 'IoTServiceWalArchiveStale: writes going on, the archive stuck, fires once writes 4 minutes old are over a minute newer than it; idle, healthy, just woken or a late duplicate acknowledgement do not',
      series: {
        [ingestion('last_stored_timestamp_seconds', 'broken')]: '0+60x22',
        [backup('last_archived_wal_timestamp_seconds', 'broken')]: '0x22',
        // Nothing stored since 0, its segment archived at 30.
        [ingestion('last_stored_timestamp_seconds', 'idle')]: '0x22',
        [backup('last_archived_wal_timestamp_seconds', 'idle')]: '30x22',
        // Writes all the time, each archived and reported within 150 s.
        [ingestion('last_stored_timestamp_seconds', 'healthy')]: '0+60x22',
        [backup('last_archived_wal_timestamp_seconds', 'healthy')]: '-150+60x22',
        // Idle until 10 minutes, then writing; the first segment of it (archived at 660) reported at 13 minutes.
        [ingestion('last_stored_timestamp_seconds', 'woken')]: '0x9 600+60x12',
        [backup('last_archived_wal_timestamp_seconds', 'woken')]: '30x12 660+60x9',
        // Stored at 0 and archived at 40; the same message stored again at 90 writes nothing (a duplicate), then idle.
        [ingestion('last_stored_timestamp_seconds', 'duplicate')]: '0 0 90x20',
        [backup('last_archived_wal_timestamp_seconds', 'duplicate')]: '40x22',
      },
      expect: [
        { at: '5m', alert: 'IoTServiceWalArchiveStale', firing: [] },
        { at: '6m', alert: 'IoTServiceWalArchiveStale', firing: [instance('broken')] },
        { at: '21m', alert: 'IoTServiceWalArchiveStale', firing: [instance('broken')] },
      ],
    },
  ];
}

/** OperatorShardMissing, for a sharded operator's series. */
function shardCases(job: string, ns: string): Case[] {
  const a = `job="${job}", namespace="${ns}", instance="10.0.0.1:8080"`;
  const b = `job="${job}", namespace="${ns}", instance="10.0.0.2:8080"`;
  return [
    {
      title: "OperatorShardMissing: a replica's target down while another is up fires after 5 minutes",
      series: { [`up{${a}}`]: '0x20', [`up{${b}}`]: '1x20' },
      expect: [
        { at: '4m', alert: 'OperatorShardMissing', firing: [] },
        { at: '5m', alert: 'OperatorShardMissing', firing: [{ job, namespace: ns, instance: '10.0.0.1:8080' }] },
      ],
    },
    {
      title: 'OperatorShardMissing: a running replica without its shard Lease fires; every replica down is OperatorDown, not this',
      series: {
        [`up{${a}}`]: '1x20',
        [`up{${b}}`]: '1x20',
        [`leader_election_master_status{${a}, name="shard-a"}`]: '0x20',
        [`leader_election_master_status{${b}, name="shard-b"}`]: '1x20',
      },
      expect: [
        { at: '4m', alert: 'OperatorShardMissing', firing: [] },
        { at: '5m', alert: 'OperatorShardMissing', firing: [{ job, namespace: ns, instance: '10.0.0.1:8080', name: 'shard-a' }] },
      ],
    },
    {
      title: 'OperatorShardMissing: all replicas down',
      series: { [`up{${a}}`]: '0x20', [`up{${b}}`]: '0x20' },
      expect: [{ at: '10m', alert: 'OperatorShardMissing', firing: [] }],
    },
  ];
}

describe('promtool test rules', () => {
  async function passes(name: string, rules: string, runbookBase: string, cases: Case[]) {
    const file = path.join(work, `${name}.test.yml`);
    writeFileSync(file, promtoolTests(rules, runbookBase, cases));
    assert.match(await promtoolRun('test', 'rules', file), /SUCCESS/);
  }

  for (const operator of OPERATORS) {
    it(`every alert of ${path.relative(root, plainRulesPath(operator))} fires when it should and only then (default windows)`, async () => {
      const rules = rulesFile(`${operator}-plain.yml`, readFileSync(plainRulesPath(operator), 'utf8'));
      // The plain files' series carry whatever namespace the scrape gives them: one is used here.
      const cases = [...runtimeCases(JOBS[operator], 'ops', 5, false), ...(operator === 'iot' ? [...instanceCases(JOBS.iot, 'ops', 5, 15), ...shardCases(JOBS.iot, 'ops')] : [])];
      await passes(`${operator}-plain`, rules, DEFAULT_RUNBOOK_BASE, cases);
    });
  }

  it("the IoT chart's rules fire with the values' windows, only for the release namespace's series", async () => {
    const base = 'https://docs.example.com/observability.md';
    const spec = (await renderRule('iot', [...enabled, '--set', 'sharding.enabled=true', '--set', 'metrics.prometheusRule.operatorDownFor=2m',
      '--set', 'metrics.prometheusRule.instanceFailedFor=3m', '--set', 'metrics.prometheusRule.instanceProcessingFor=4m', '--set', `metrics.prometheusRule.runbookBaseUrl=${base}`]))!.spec;
    const rules = rulesFile('iot-chart-short.yml', spec);
    const elsewhere: Case = {
      title: "another namespace's operator and instances do not count: this release's operator is absent",
      series: {
        [`up{job="${JOBS.iot}", namespace="other", instance="10.0.0.5:8080"}`]: '1x20',
        [`iotservice_status_phase{job="${JOBS.iot}", namespace="other", instance="10.0.0.5:8080", name="x", phase="Failed"}`]: '1x20',
      },
      expect: [
        { at: '2m', alert: 'OperatorDown', firing: [{ job: JOBS.iot, namespace: NAMESPACE }] },
        { at: '10m', alert: 'IoTServiceFailed', firing: [] },
      ],
    };
    await passes('iot-chart', rules, base, [...runtimeCases(JOBS.iot, NAMESPACE, 2, true), ...instanceCases(JOBS.iot, NAMESPACE, 3, 4), ...shardCases(JOBS.iot, NAMESPACE), elsewhere]);
  });

  it("the Armada chart's rules fire for the release's operator", async () => {
    const rules = rulesFile('armada-chart.yml', (await renderRule('armada', [...enabled, '--set', 'metrics.prometheusRule.operatorDownFor=3m']))!.spec);
    await passes('armada-chart', rules, DEFAULT_RUNBOOK_BASE, runtimeCases(JOBS.armada, NAMESPACE, 3, true));
  });
});
