/**
 * The IoT operator's instance metrics as a scraper reads them: one series per IoTService and
 * phase with its namespace and name only, pod figures and the last phase change from its status,
 * nothing for a deleted IoTService or on a replica that does not export; time to Available
 * counted from creation or a spec change, and never for a recovery without a spec change; the
 * ingestion figures of each instance whose broker was read, and none of one that was not.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from '@iot-operator/runtime';
import type { IoTServiceStatus } from '../src/api/iotservice.ts';
import type { IngestionVerdict, InstanceName } from '../src/ingestion.ts';
import { registerInstanceMetrics, TimeToAvailable, type IoTServiceObject } from '../src/instance-metrics.ts';

function iot(name: string, status?: Partial<IoTServiceStatus>, generation = 1, created = '2026-11-27T10:00:00Z'): IoTServiceObject {
  return {
    apiVersion: 'cp.iotservices.io/v1alpha1',
    kind: 'IoTService',
    metadata: { name, namespace: 'landscape', generation, creationTimestamp: created, uid: `uid-${name}` },
    spec: { version: '2.4.1', config: { secretish: 'do-not-export' } },
    ...(status ? { status: status as IoTServiceStatus } : {}),
  } as unknown as IoTServiceObject;
}

const condition = (type: string, status: 'True' | 'False', at: string) => ({ type, status, lastTransitionTime: at, reason: 'r', message: 'm' });

const available = (generation = 1): Partial<IoTServiceStatus> => ({
  phase: 'Available',
  observedGeneration: generation,
  ready: '7/7',
  conditions: [condition('Ready', 'True', '2026-11-27T10:00:20Z'), condition('Progressing', 'False', '2026-11-27T10:00:30Z'), condition('Degraded', 'False', '2026-11-27T10:00:05Z')],
});

async function scrape(objects: IoTServiceObject[], exporting = true): Promise<string[]> {
  const registry = new Registry();
  registerInstanceMetrics(registry, { list: () => objects, ingestion: () => [], exporting: () => exporting });
  return (await registry.metrics()).split('\n').filter((line) => line.startsWith('iotservice_status_'));
}

describe('instance series', () => {
  it('give the phase as 1 for the current one and 0 for the others, the pod figures and the last phase change', async () => {
    const failed = iot('b', {
      phase: 'Failed',
      observedGeneration: 1,
      ready: '3/7',
      conditions: [condition('Ready', 'False', '2026-11-27T10:05:00Z'), condition('Degraded', 'True', '2026-11-27T10:07:00Z')],
    });
    assert.deepEqual((await scrape([iot('a', available()), failed])).sort(), [
      `iotservice_status_phase_transition_timestamp_seconds{namespace="landscape",name="a"} ${Date.parse('2026-11-27T10:00:20Z') / 1000}`,
      `iotservice_status_phase_transition_timestamp_seconds{namespace="landscape",name="b"} ${Date.parse('2026-11-27T10:07:00Z') / 1000}`,
      'iotservice_status_phase{namespace="landscape",name="a",phase="Available"} 1',
      'iotservice_status_phase{namespace="landscape",name="a",phase="Failed"} 0',
      'iotservice_status_phase{namespace="landscape",name="a",phase="Processing"} 0',
      'iotservice_status_phase{namespace="landscape",name="b",phase="Available"} 0',
      'iotservice_status_phase{namespace="landscape",name="b",phase="Failed"} 1',
      'iotservice_status_phase{namespace="landscape",name="b",phase="Processing"} 0',
      'iotservice_status_pods_desired{namespace="landscape",name="a"} 7',
      'iotservice_status_pods_desired{namespace="landscape",name="b"} 7',
      'iotservice_status_pods_ready{namespace="landscape",name="a"} 7',
      'iotservice_status_pods_ready{namespace="landscape",name="b"} 3',
    ]);
  });

  it('of an IoTService without a status yet: no phase is 1, and no pod figures or transition time', async () => {
    assert.deepEqual((await scrape([iot('new')])).sort(), [
      'iotservice_status_phase{namespace="landscape",name="new",phase="Available"} 0',
      'iotservice_status_phase{namespace="landscape",name="new",phase="Failed"} 0',
      'iotservice_status_phase{namespace="landscape",name="new",phase="Processing"} 0',
    ]);
  });

  it('follow the cache: a deleted IoTService has none in the next scrape', async () => {
    const objects = [iot('a', available()), iot('b', available())];
    const registry = new Registry();
    registerInstanceMetrics(registry, { list: () => objects, ingestion: () => [], exporting: () => true });
    assert.match(await registry.metrics(), /name="b"/);
    objects.pop();
    const after = await registry.metrics();
    assert.doesNotMatch(after, /name="b"/);
    assert.match(after, /iotservice_status_phase\{namespace="landscape",name="a",phase="Available"\} 1/);
  });

  it('are not exported by a replica whose controllers do not run (a standby waiting for the lease)', async () => {
    assert.deepEqual(await scrape([iot('a', available())], false), []);
  });

  it('carry nothing of the spec or its config', async () => {
    assert.doesNotMatch((await scrape([iot('a', available())])).join('\n'), /secretish|do-not-export|2\.4\.1/);
  });
});

describe('ingestion series', () => {
  const readings: (InstanceName & IngestionVerdict)[] = [
    {
      namespace: 'landscape',
      name: 'a',
      state: 'Stalled',
      reading: { backlogMessages: 1234, backlogBytes: 5_347_738, backlogLimitBytes: 268_435_456, oldestUnstoredSeconds: 95.4, lastStoredSecondsAgo: 95, lastStoredTimestampSeconds: 1_795_867_133.866, deadLetters: 12, applicationLagMessages: 40 },
    },
    { namespace: 'landscape', name: 'b', state: 'Flowing', reading: { backlogMessages: 0, backlogBytes: 0, oldestUnstoredSeconds: 0, deadLetters: 0 } },
  ];
  const scrapeIngestion = async (exporting: boolean) => {
    const registry = new Registry();
    registerInstanceMetrics(registry, { list: () => [], ingestion: () => readings, exporting: () => exporting });
    return (await registry.metrics()).split('\n').filter((line) => /^iotservice_(ingestion|application)_/.test(line));
  };

  it('give each reading by namespace and name; a backlog without a limit has no limit series, an instance no application follows no lag series, a consumer that never acknowledged no last-stored time', async () => {
    assert.deepEqual((await scrapeIngestion(true)).sort(), [
      'iotservice_application_stream_lag_messages{namespace="landscape",name="a"} 40',
      'iotservice_ingestion_backlog_bytes{namespace="landscape",name="a"} 5347738',
      'iotservice_ingestion_backlog_bytes{namespace="landscape",name="b"} 0',
      'iotservice_ingestion_backlog_limit_bytes{namespace="landscape",name="a"} 268435456',
      'iotservice_ingestion_backlog_messages{namespace="landscape",name="a"} 1234',
      'iotservice_ingestion_backlog_messages{namespace="landscape",name="b"} 0',
      'iotservice_ingestion_dead_letters_total{namespace="landscape",name="a"} 12',
      'iotservice_ingestion_dead_letters_total{namespace="landscape",name="b"} 0',
      'iotservice_ingestion_last_stored_timestamp_seconds{namespace="landscape",name="a"} 1795867133.866',
      'iotservice_ingestion_oldest_unstored_age_seconds{namespace="landscape",name="a"} 95.4',
      'iotservice_ingestion_oldest_unstored_age_seconds{namespace="landscape",name="b"} 0',
      'iotservice_ingestion_stalled{namespace="landscape",name="a"} 1',
      'iotservice_ingestion_stalled{namespace="landscape",name="b"} 0',
    ]);
  });

  it('are not exported by a replica whose controllers do not run', async () => {
    assert.deepEqual(await scrapeIngestion(false), []);
  });
});

describe('backup series', () => {
  const withBackup = (name: string, schedule: string | undefined, backup?: IoTServiceStatus['backup']): IoTServiceObject => {
    const object = iot(name, { ...available(), ...(backup ? { backup } : {}) });
    (object.spec as Record<string, unknown>).backup = { ...(schedule ? { schedule } : {}), retention: 7, target: { volumeClaim: { size: '1Gi' } } };
    return object;
  };
  const scrapeBackup = async (objects: IoTServiceObject[]) => {
    const registry = new Registry();
    registerInstanceMetrics(registry, { list: () => objects, ingestion: () => [], exporting: () => true });
    return (await registry.metrics()).split('\n').filter((line) => line.startsWith('iotservice_backup_'));
  };

  it('give the schedule in seconds, the end of the last backup and when the newest WAL segment was archived, from spec.backup and status.backup', async () => {
    const status = {
      lastBackup: { time: '2026-11-27T03:00:15.000Z', type: 'full', label: '20261127-030000F' },
      lastArchivedWal: '000000010000000000000009',
      lastArchivedWalTime: '2026-11-27T10:04:59.500Z',
      backups: 2,
    };
    assert.deepEqual((await scrapeBackup([withBackup('a', '6h', status), withBackup('b', undefined), iot('c', available())])).sort(), [
      `iotservice_backup_last_archived_wal_timestamp_seconds{namespace="landscape",name="a"} ${Date.parse('2026-11-27T10:04:59.500Z') / 1000}`,
      `iotservice_backup_last_success_timestamp_seconds{namespace="landscape",name="a"} ${Date.parse('2026-11-27T03:00:15Z') / 1000}`,
      'iotservice_backup_schedule_seconds{namespace="landscape",name="a"} 21600',
      // No backup reported yet: only the schedule (the default, 1d, where the spec names none), which alert IoTServiceBackupTooOld reads as none at all.
      'iotservice_backup_schedule_seconds{namespace="landscape",name="b"} 86400',
    ]);
  });

  it('are absent without spec.backup, whatever the status still holds', async () => {
    const stale = iot('a', { ...available(), backup: { lastBackup: { time: '2026-11-27T03:00:15.000Z', type: 'full', label: 'x' }, lastArchivedWalTime: '2026-11-27T10:04:59.500Z' } });
    assert.deepEqual(await scrapeBackup([stale]), []);
  });
});

describe('time to Available', () => {
  const at = (iso: string) => Date.parse(iso);

  it('runs from creation to the first Available status', () => {
    const waits = new TimeToAvailable();
    const created = iot('a');
    waits.added(created);
    const processing = iot('a', { phase: 'Processing', observedGeneration: 1 });
    assert.equal(waits.updated(created, processing, at('2026-11-27T10:00:01Z')), undefined);
    assert.equal(waits.updated(processing, iot('a', available()), at('2026-11-27T10:00:42Z')), 42);
    assert.equal(waits.updated(iot('a', available()), iot('a', { ...available(), ready: '7/7 ' }), at('2026-11-27T10:01:00Z')), undefined, 'counted once');
  });

  it('runs from a spec change to Available for the new generation', () => {
    const waits = new TimeToAvailable();
    waits.added(iot('a', available()));
    const changed = iot('a', available(), 2);
    assert.equal(waits.updated(iot('a', available()), changed, at('2026-11-27T11:00:00Z')), undefined, 'still the old generation');
    const rolling = iot('a', { phase: 'Processing', observedGeneration: 2 }, 2);
    assert.equal(waits.updated(changed, rolling, at('2026-11-27T11:00:01Z')), undefined);
    assert.equal(waits.updated(rolling, iot('a', available(2), 2), at('2026-11-27T11:00:09.5Z')), 9.5);
  });

  it('keeps the earlier start when the spec changes again before Available', () => {
    const waits = new TimeToAvailable();
    const created = iot('a');
    waits.added(created);
    const changed = iot('a', { phase: 'Processing', observedGeneration: 1 }, 2);
    waits.updated(created, changed, at('2026-11-27T10:00:10Z'));
    assert.equal(waits.updated(changed, iot('a', available(1), 2), at('2026-11-27T10:00:20Z')), undefined, 'Available for the earlier spec only');
    assert.equal(waits.updated(changed, iot('a', available(2), 2), at('2026-11-27T10:00:30Z')), 30);
  });

  it('counts a spec change that never left Available as soon as the status names its generation', () => {
    const waits = new TimeToAvailable();
    waits.added(iot('a', available()));
    waits.updated(iot('a', available()), iot('a', available(), 2), at('2026-11-27T11:00:00Z'));
    assert.equal(waits.updated(iot('a', available(), 2), iot('a', available(2), 2), at('2026-11-27T11:00:00.25Z')), 0.25);
  });

  it('is not counted for a recovery without a spec change, for what started before this process, or after deletion', () => {
    const waits = new TimeToAvailable();
    const processing = iot('a', { phase: 'Processing', observedGeneration: 1 });
    waits.added(processing);
    assert.equal(waits.updated(processing, iot('a', available()), at('2026-11-27T12:00:00Z')), undefined, 'a rollout already under way when seen first');
    assert.equal(waits.updated(iot('a', available()), processing, at('2026-11-27T12:01:00Z')), undefined);
    assert.equal(waits.updated(processing, iot('a', available()), at('2026-11-27T12:02:00Z')), undefined, 'a pod lost and replaced');
    const created = iot('b');
    waits.added(created);
    waits.deleted(created);
    assert.equal(waits.updated(created, iot('b', available()), at('2026-11-27T10:00:30Z')), undefined);
  });
});
