/**
 * The IoT operator's metrics of its instances, as kube-state-metrics gives them for a custom
 * resource, on the operator's own registry (served on /metrics beside the runtime's):
 * - `iotservice_status_phase{namespace,name,phase}`: 1 for the IoTService's current phase, 0 for
 *   the other two of Available, Processing, Failed (all three 0 before its first status);
 * - `iotservice_status_pods_ready` / `iotservice_status_pods_desired{namespace,name}`: the two
 *   figures of status.ready (`7/7`);
 * - `iotservice_status_phase_transition_timestamp_seconds{namespace,name}`: Unix time of the last
 *   phase change — the later lastTransitionTime of the Ready and Degraded conditions, the two
 *   whose statuses together are the phase;
 * - `iotservice_time_to_available_seconds` (histogram, no per-object labels): from an
 *   IoTService's creation, or from the spec change that made its generation, to its status
 *   reporting Available for that generation;
 * - `iotservice_ingestion_backlog_messages`, `iotservice_ingestion_backlog_bytes`,
 *   `iotservice_ingestion_backlog_limit_bytes`, `iotservice_ingestion_oldest_unstored_age_seconds`,
 *   `iotservice_ingestion_last_stored_timestamp_seconds` (when processing's consumer last
 *   acknowledged a message, by the broker's clock; absent before the first),
 *   `iotservice_ingestion_stalled` (1 when Stalled, else 0) and
 *   `iotservice_ingestion_dead_letters_total` (messages set aside as dead letters since the
 *   broker's DEAD_LETTERS stream was made){namespace,name}: the latest reading of the instance's
 *   broker (ingestion.ts), and from the same reading
 *   `iotservice_application_stream_lag_messages{namespace,name}`: the most events any application
 *   following the instance's stream has yet to get (no series while none follows);
 * - `iotservice_gateway_certificate_expiry_timestamp_seconds{namespace,name}`: Unix time the
 *   gateway's server certificate expires (status.gateway.tls.notAfter); the operator renews it
 *   30 days before, so alert IoTServiceCertificateExpiring (14 days) means renewal failed.
 * - With spec.backup: `iotservice_backup_schedule_seconds{namespace,name}` (spec.backup.schedule
 *   in seconds), `iotservice_backup_last_success_timestamp_seconds` (status.backup.lastBackup.time:
 *   the end of the latest completed backup) and
 *   `iotservice_backup_last_archived_wal_timestamp_seconds` (status.backup.lastArchivedWalTime:
 *   when the newest WAL segment reached the repository); with the ingestion gauges'
 *   `iotservice_ingestion_last_stored_timestamp_seconds` (when processing last stored telemetry)
 *   they are what alerts IoTServiceBackupTooOld and IoTServiceWalArchiveStale compare.
 *
 * Guarantees:
 * - Labels are the IoTService's namespace and name (and phase) only: nothing of its spec, config
 *   or secrets.
 * - The gauges are computed from the cache when /metrics is scraped: an IoTService deleted has
 *   no series in the next scrape, and nothing runs between scrapes. The ingestion gauges are the
 *   ingestion monitor's readings as held in memory: an instance whose broker could not be read
 *   (or whose backlog has no limit, for the limit) has no series.
 * - One exporter per object: only a replica whose controllers run exports instance series and
 *   counts times to Available — the leader (a replica waiting for the lease exports none), or,
 *   in a ControllerRing, each shard for the IoTServices assigned to it while it holds its Lease.
 * - Time to Available is counted once per creation or spec change, when the Available status is
 *   seen for a generation at least that of the change; a spec change while the instance is not
 *   yet Available keeps the earlier start (the user has been waiting since then). What the
 *   process did not see start is not counted: a spec change made while no replica ran, a
 *   rollout that was in progress when this replica started.
 */
import { Gauge, Histogram, type KubeObject, type Manager, type Registry } from '@iot-operator/runtime';
import { DEFAULT_BACKUP_SCHEDULE, PHASES, backupScheduleSeconds, type IoTService, type IoTServicePhase } from './api/iotservice.ts';
import { IoTServiceType } from './iotservice-types.ts';
import type { IngestionMonitor, IngestionVerdict, InstanceName } from './ingestion.ts';
import { CONDITION_DEGRADED, CONDITION_READY } from './status/status.ts';

export type IoTServiceObject = IoTService & KubeObject;

/** What the metrics are read from: the IoTServices, their brokers' readings, and whether this replica exports them. */
export interface InstanceSource {
  list(): readonly IoTServiceObject[];
  ingestion(): readonly (InstanceName & IngestionVerdict)[];
  exporting(): boolean;
}

/** One IoTService's series values; an absent figure has no series. */
export interface InstanceSeries {
  namespace: string;
  name: string;
  phase: IoTServicePhase | undefined;
  podsReady?: number;
  podsDesired?: number;
  phaseTransitionSeconds?: number;
  certificateExpirySeconds?: number;
  backupScheduleSeconds?: number;
  backupLastSuccessSeconds?: number;
  walArchivedSeconds?: number;
}

/** Unix seconds of an RFC 3339 time; undefined when there is none or it does not parse. */
const secondsOf = (time: string | undefined): number | undefined => {
  const ms = Date.parse(time ?? '');
  return Number.isNaN(ms) ? undefined : ms / 1000;
};

/** The seconds of spec.backup.schedule (the API server defaults it; a spec without one is the default); undefined without spec.backup or for a schedule that is not one. */
function scheduleSeconds(iot: IoTServiceObject): number | undefined {
  const backup = iot.spec?.backup;
  if (!backup) return undefined;
  try {
    return backupScheduleSeconds(backup.schedule ?? DEFAULT_BACKUP_SCHEDULE);
  } catch {
    return undefined;
  }
}

/** Time to Available, in seconds: a few seconds for an instance with cached images up to an hour. */
export const TIME_TO_AVAILABLE_BUCKETS = [1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600];

/** The series of one IoTService, from its status. */
export function instanceSeries(iot: IoTServiceObject): InstanceSeries {
  const status = iot.status;
  const ready = /^(\d+)\/(\d+)$/.exec(status?.ready ?? '');
  const expiry = secondsOf(status?.gateway?.tls?.notAfter);
  const schedule = scheduleSeconds(iot);
  // status.backup is dropped with spec.backup (status.ts); a backup figure without it has no series.
  const lastBackup = schedule === undefined ? undefined : secondsOf(status?.backup?.lastBackup?.time);
  const walArchived = schedule === undefined ? undefined : secondsOf(status?.backup?.lastArchivedWalTime);
  const transitions = (status?.conditions ?? [])
    .filter((c) => c.type === CONDITION_READY || c.type === CONDITION_DEGRADED)
    .map((c) => Date.parse(c.lastTransitionTime))
    .filter((ms) => !Number.isNaN(ms));
  return {
    namespace: iot.metadata.namespace ?? '',
    name: iot.metadata.name ?? '',
    phase: status?.phase,
    ...(ready ? { podsReady: Number(ready[1]), podsDesired: Number(ready[2]) } : {}),
    ...(transitions.length > 0 ? { phaseTransitionSeconds: Math.max(...transitions) / 1000 } : {}),
    ...(expiry === undefined ? {} : { certificateExpirySeconds: expiry }),
    ...(schedule === undefined ? {} : { backupScheduleSeconds: schedule }),
    ...(lastBackup === undefined ? {} : { backupLastSuccessSeconds: lastBackup }),
    ...(walArchived === undefined ? {} : { walArchivedSeconds: walArchived }),
  };
}

interface Pending {
  /** When the wait began (ms since the epoch). */
  since: number;
  /** The generation whose Available ends it. */
  generation: number;
}

/**
 * When each IoTService began waiting to be Available (its creation or a spec change), fed with
 * the cache's events; says how long the wait took when an Available status for it arrives.
 */
export class TimeToAvailable {
  private readonly pending = new Map<string, Pending>();

  /** An object listed or created: one without a status yet waits since its creation. */
  added(iot: IoTServiceObject): void {
    if (iot.status?.phase) return;
    const created = Date.parse(String(iot.metadata.creationTimestamp ?? ''));
    if (!Number.isNaN(created)) this.pending.set(keyOf(iot), { since: created, generation: iot.metadata.generation ?? 1 });
  }

  /** An object changed at `now` (ms); the seconds waited when this change completes a wait. */
  updated(before: IoTServiceObject, after: IoTServiceObject, now: number): number | undefined {
    const key = keyOf(after);
    const generation = after.metadata.generation ?? 1;
    const waiting = this.pending.get(key);
    if (generation > (before.metadata.generation ?? 1)) {
      this.pending.set(key, { since: waiting?.since ?? now, generation });
    }
    const wait = this.pending.get(key);
    if (!wait || after.status?.phase !== 'Available' || (after.status.observedGeneration ?? 0) < wait.generation) return undefined;
    this.pending.delete(key);
    return Math.max(0, (now - wait.since) / 1000);
  }

  deleted(iot: IoTServiceObject): void {
    this.pending.delete(keyOf(iot));
  }
}

function keyOf(iot: IoTServiceObject): string {
  return `${iot.metadata.namespace ?? ''}/${iot.metadata.name ?? ''}`;
}

/** The instance metrics on `registry`, read from `source`; returns the histogram's observer. */
export function registerInstanceMetrics(registry: Registry, source: InstanceSource): { observeTimeToAvailable(seconds: number): void } {
  const registers = [registry];
  const current = () => (source.exporting() ? source.list().map(instanceSeries) : []);
  new Gauge({
    name: 'iotservice_status_phase',
    help: 'The phase of an IoTService: 1 for the current one of Available, Processing and Failed, 0 for the others.',
    labelNames: ['namespace', 'name', 'phase'],
    registers,
    collect() {
      this.reset();
      for (const s of current()) for (const phase of PHASES) this.set({ namespace: s.namespace, name: s.name, phase }, s.phase === phase ? 1 : 0);
    },
  });
  /** A gauge of one figure per instance, from `rows` (each with the instance's namespace and name); an absent figure has no series. */
  const figureOf =
    <Row extends { namespace: string; name: string }>(rows: () => readonly Row[]) =>
    (name: string, help: string, of: (row: Row) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ['namespace', 'name'],
        registers,
        collect() {
          this.reset();
          for (const row of rows()) {
            const value = of(row);
            if (value !== undefined) this.set({ namespace: row.namespace, name: row.name }, value);
          }
        },
      });
  const figure = figureOf(current);
  figure('iotservice_status_pods_ready', 'Ready pods of an IoTService (status.ready, before the slash).', (s) => s.podsReady);
  figure('iotservice_status_pods_desired', 'Pods an IoTService asks for (status.ready, after the slash).', (s) => s.podsDesired);
  figure('iotservice_status_phase_transition_timestamp_seconds', 'Unix time of the last phase change of an IoTService.', (s) => s.phaseTransitionSeconds);
  figure('iotservice_gateway_certificate_expiry_timestamp_seconds', "Unix time the gateway's server certificate of an IoTService expires (status.gateway.tls.notAfter).", (s) => s.certificateExpirySeconds);
  figure('iotservice_backup_schedule_seconds', 'Seconds between full backups of an IoTService (spec.backup.schedule).', (s) => s.backupScheduleSeconds);
  figure('iotservice_backup_last_success_timestamp_seconds', 'Unix time the latest completed backup of an IoTService ended (status.backup.lastBackup.time).', (s) => s.backupLastSuccessSeconds);
  figure('iotservice_backup_last_archived_wal_timestamp_seconds', "Unix time the newest WAL segment of an IoTService's database reached its backup repository (status.backup.lastArchivedWalTime).", (s) => s.walArchivedSeconds);
  const ingestionFigure = figureOf(() => (source.exporting() ? source.ingestion() : []));
  ingestionFigure('iotservice_ingestion_backlog_messages', "Messages in an IoTService's broker not yet stored by processing.", (v) => v.reading.backlogMessages);
  ingestionFigure('iotservice_ingestion_backlog_bytes', 'Bytes of those messages.', (v) => v.reading.backlogBytes);
  ingestionFigure('iotservice_ingestion_backlog_limit_bytes', "The broker's limit of that backlog in bytes (spec.broker.maxBacklog).", (v) => v.reading.backlogLimitBytes);
  ingestionFigure('iotservice_ingestion_oldest_unstored_age_seconds', 'Age of the oldest message not yet stored.', (v) => v.reading.oldestUnstoredSeconds);
  ingestionFigure('iotservice_ingestion_last_stored_timestamp_seconds', 'Unix time processing last stored a message (its consumer last acknowledged one, by the broker).', (v) => v.reading.lastStoredTimestampSeconds);
  ingestionFigure('iotservice_ingestion_stalled', 'Whether ingestion is stalled: messages wait and none was stored for a minute (1), or not (0).', (v) => (v.state === 'Stalled' ? 1 : 0));
  ingestionFigure('iotservice_ingestion_dead_letters_total', 'Messages processing set aside as dead letters: refused by the database for their data (table dead_letters).', (v) => v.reading.deadLetters);
  ingestionFigure('iotservice_application_stream_lag_messages', 'The most events any application following an IoTService\'s stream (GET /v1/stream) has yet to get.', (v) => v.reading.applicationLagMessages);
  const histogram = new Histogram({
    name: 'iotservice_time_to_available_seconds',
    help: 'Seconds from the creation of an IoTService, or from a change of its spec, to its status reporting Available.',
    buckets: TIME_TO_AVAILABLE_BUCKETS,
    registers,
  });
  return { observeTimeToAvailable: (seconds) => histogram.observe(seconds) };
}

/** The instance metrics of the IoTServices in `landscape`, on the manager's registry and cache, and of their brokers' readings. */
export function exportInstanceMetrics(mgr: Manager, landscape: string, ingestion: IngestionMonitor | undefined): void {
  const metrics = registerInstanceMetrics(mgr.metrics.registry, {
    list: () => mgr.cache.list<IoTServiceObject>(IoTServiceType, { namespace: landscape }),
    ingestion: () => ingestion?.readings() ?? [],
    exporting: () => mgr.isLeader,
  });
  const waits = new TimeToAvailable();
  const observe = (seconds: number | undefined) => {
    if (seconds !== undefined && mgr.isLeader) metrics.observeTimeToAvailable(seconds);
  };
  mgr.cache.informer<IoTServiceObject>(IoTServiceType).addHandler({
    onAdd: (iot) => waits.added(iot),
    onUpdate: (before, after) => observe(waits.updated(before, after, Date.now())),
    onDelete: (iot) => waits.deleted(iot),
  });
}
