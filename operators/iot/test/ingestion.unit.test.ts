/**
 * The ingestion health read from a broker: /jsz as nats-server answers it becomes a reading, the
 * reading a state at the thresholds, and the monitor asks each broker on its schedule, backs off
 * from brokers it cannot reach, forgets nothing it read until told, and reports state changes
 * only; dead letters counted from the stream DEAD_LETTERS make a Warning Event on the IoTService
 * when the count grew since the previous reading, none for the first one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { IoTServiceType } from '../src/iotservice-types.ts';
import {
  CHECK_INTERVAL_MS,
  deadLettersEvent,
  ingestionReconciler,
  IngestionMonitor,
  MAX_BACKOFF_MS,
  STALLED_AFTER_SECONDS,
  ingestionState,
  parseJsz,
  type IngestionReading,
  type InstanceName,
  type JszFetch,
} from '../src/ingestion.ts';
import { iotService, TEST_CONFIG } from './fixtures.ts';

/** A /jsz answer of nats-server with streams, consumers and config; `deadLetters` adds the DEAD_LETTERS stream with that state. */
function jsz(state: Record<string, unknown>, ackedAt = '2026-11-28T12:05:33.867Z', consumers = true, deadLetters?: { messages: number; last_seq: number }): unknown {
  return {
    server_id: 'NB7',
    now: '2026-11-28T12:07:00Z',
    memory: 0,
    account_details: [
      { name: '$SYS', id: '$SYS', stream_detail: [] },
      {
        name: '$G',
        id: '$G',
        stream_detail: [
          { name: 'OTHER', config: { max_bytes: 10 }, state: { messages: 99, bytes: 9 } },
          {
            name: 'TELEMETRY',
            created: '2026-11-28T12:00:00Z',
            config: { name: 'TELEMETRY', subjects: ['telemetry.>'], retention: 'workqueue', max_bytes: 1000000, storage: 'file' },
            state: { messages: 4, bytes: 168, first_seq: 2, first_ts: '2026-11-28T12:05:33.863Z', last_seq: 5, last_ts: '2026-11-28T12:06:10Z', consumer_count: 1, ...state },
            ...(consumers
              ? {
                  consumer_detail: [
                    {
                      stream_name: 'TELEMETRY',
                      name: 'processing',
                      num_pending: 4,
                      num_ack_pending: 0,
                      delivered: { consumer_seq: 1, stream_seq: 1, last_active: '2026-11-28T12:05:33.866Z' },
                      ack_floor: { consumer_seq: 1, stream_seq: 1, last_active: ackedAt },
                    },
                  ],
                }
              : {}),
          },
          ...(deadLetters
            ? [
                {
                  name: 'DEAD_LETTERS',
                  created: '2026-11-28T12:00:00Z',
                  config: { name: 'DEAD_LETTERS', subjects: ['deadletters.>'], retention: 'limits', max_msgs: 100000, max_age: 2592000000000000, discard: 'old', storage: 'file' },
                  state: { bytes: 210 * deadLetters.messages, first_seq: deadLetters.last_seq - deadLetters.messages + 1, first_ts: '2026-11-28T12:01:00Z', last_ts: '2026-11-28T12:06:00Z', consumer_count: 0, ...deadLetters },
                },
              ]
            : []),
        ],
      },
    ],
  };
}

const NOW = new Date('2026-11-28T12:07:08.863Z'); // 95 s after the first message

describe('parseJsz', () => {
  it('reads the TELEMETRY stream of any account: backlog, limit, age of the oldest message, time since the last acknowledgement', () => {
    const reading = parseJsz(jsz({}), NOW)!;
    assert.equal(reading.backlogMessages, 4);
    assert.equal(reading.backlogBytes, 168);
    assert.equal(reading.backlogLimitBytes, 1_000_000);
    assert.equal(reading.oldestUnstoredSeconds, 95);
    assert.ok(Math.abs(reading.lastStoredSecondsAgo! - 94.996) < 1e-9);
    assert.equal(reading.lastStoredTimestampSeconds, Date.parse('2026-11-28T12:05:33.867Z') / 1000);
  });

  it('gives an empty stream age 0, whatever its zero time says', () => {
    const reading = parseJsz(jsz({ messages: 0, bytes: 0, first_ts: '0001-01-01T00:00:00Z' }), NOW)!;
    assert.equal(reading.backlogMessages, 0);
    assert.equal(reading.oldestUnstoredSeconds, 0);
  });

  it('has no time of the last acknowledgement without a consumer or without any acknowledgement', () => {
    assert.equal(parseJsz(jsz({}, undefined, false), NOW)!.lastStoredSecondsAgo, undefined);
    assert.equal(parseJsz(jsz({}, '0001-01-01T00:00:00Z'), NOW)!.lastStoredSecondsAgo, undefined);
    assert.equal(parseJsz(jsz({}, '0001-01-01T00:00:00Z'), NOW)!.lastStoredTimestampSeconds, undefined);
  });

  it('gives the applications\' lag as the most events any consumer of EVENTS but processing\'s connections has pending; none while no application follows', () => {
    const withEvents = (consumers: Array<{ name: string; num_pending: number }>) => {
      const body = jsz({}) as { account_details: Array<{ stream_detail: unknown[] }> };
      body.account_details[0]!.stream_detail.push({ name: 'EVENTS', state: { messages: 900 }, consumer_detail: consumers });
      return parseJsz(body, NOW)!;
    };
    assert.equal(withEvents([{ name: 'connections', num_pending: 500 }, { name: 'app_a', num_pending: 12 }, { name: 'app_b', num_pending: 40 }]).applicationLagMessages, 40);
    assert.equal(withEvents([{ name: 'connections', num_pending: 500 }]).applicationLagMessages, undefined);
    assert.equal(parseJsz(jsz({}), NOW)!.applicationLagMessages, undefined);
  });

  it('counts dead letters by the DEAD_LETTERS stream\'s last sequence number, which only grows (its messages expire); 0 without that stream', () => {
    assert.equal(parseJsz(jsz({}, undefined, true, { messages: 4, last_seq: 12 }), NOW)!.deadLetters, 12);
    assert.equal(parseJsz(jsz({}, undefined, true, { messages: 0, last_seq: 0 }), NOW)!.deadLetters, 0);
    assert.equal(parseJsz(jsz({}), NOW)!.deadLetters, 0);
  });

  it('gives no reading without a TELEMETRY stream, or for a body of another shape', () => {
    assert.equal(parseJsz({ account_details: [{ stream_detail: [{ name: 'OTHER' }] }] }, NOW), undefined);
    assert.equal(parseJsz({ now: 'x' }, NOW), undefined);
    assert.equal(parseJsz(undefined, NOW), undefined);
  });
});

describe('ingestionState', () => {
  const reading = (r: Partial<IngestionReading>): IngestionReading => ({
    backlogMessages: 10,
    backlogBytes: 1000,
    backlogLimitBytes: 1_000_000,
    oldestUnstoredSeconds: 5,
    lastStoredSecondsAgo: 1,
    deadLetters: 0,
    ...r,
  });

  it(`is Stalled when messages wait for ${STALLED_AFTER_SECONDS} s and none was stored for as long, or ever`, () => {
    assert.equal(ingestionState(reading({ oldestUnstoredSeconds: 60, lastStoredSecondsAgo: 60 })), 'Stalled');
    assert.equal(ingestionState(reading({ oldestUnstoredSeconds: 600, lastStoredSecondsAgo: undefined })), 'Stalled');
    assert.equal(ingestionState(reading({ oldestUnstoredSeconds: 59.9, lastStoredSecondsAgo: 600 })), 'Flowing', 'the oldest is younger than a minute');
    assert.equal(ingestionState(reading({ oldestUnstoredSeconds: 600, lastStoredSecondsAgo: 59 })), 'Flowing', 'processing stores, slowly');
    assert.equal(ingestionState(reading({ backlogMessages: 0, oldestUnstoredSeconds: 600, lastStoredSecondsAgo: undefined })), 'Flowing', 'nothing waits');
  });

  it('takes the operator\'s stall window (--ingestion-stalled-after) in place of the default', () => {
    assert.equal(ingestionState(reading({ oldestUnstoredSeconds: 20, lastStoredSecondsAgo: 20 }), 20), 'Stalled');
    assert.equal(ingestionState(reading({ oldestUnstoredSeconds: 19, lastStoredSecondsAgo: 600 }), 20), 'Flowing', 'the oldest is younger than the window');
    assert.equal(ingestionState(reading({ oldestUnstoredSeconds: 60, lastStoredSecondsAgo: 60 }), 120), 'Flowing', 'a longer window waits longer');
  });

  it('is Full at 95 % of the limit, unless Stalled', () => {
    assert.equal(ingestionState(reading({ backlogBytes: 950_000 })), 'Full');
    assert.equal(ingestionState(reading({ backlogBytes: 949_999 })), 'Flowing');
    assert.equal(ingestionState(reading({ backlogBytes: 999_999, backlogLimitBytes: undefined })), 'Flowing', 'no limit');
    assert.equal(ingestionState(reading({ backlogBytes: 999_999, oldestUnstoredSeconds: 90, lastStoredSecondsAgo: 90 })), 'Stalled');
  });
});

describe('deadLettersEvent', () => {
  const NS = 'devawsk8s-tenant-a';
  const query = `see table dead_letters (kubectl -n ${NS} exec database-0 -- psql -h /tmp -U iot -d iot -c 'SELECT device_id, message_id, error, failed_at FROM dead_letters ORDER BY failed_at DESC LIMIT 20')`;

  it('is a Warning DeadLetters when the count grew, naming how many since the last check, how many in all, and how to read them', () => {
    assert.deepEqual(deadLettersEvent(9, 12, NS), {
      type: 'Warning',
      reason: 'DeadLetters',
      message: `3 messages set aside as dead letters since the last check (12 in all): the database refused them for their data; ${query}`,
    });
    assert.equal(deadLettersEvent(0, 1, NS)?.message, `1 message set aside as dead letters since the last check (1 in all): the database refused it for its data; ${query}`);
  });

  it('is none for the first count (the baseline), whatever it is', () => {
    assert.equal(deadLettersEvent(undefined, 12, NS), undefined);
    assert.equal(deadLettersEvent(undefined, 0, NS), undefined);
  });

  it('is none when the count stayed, fell (the stream made again) or is unknown', () => {
    assert.equal(deadLettersEvent(12, 12, NS), undefined);
    assert.equal(deadLettersEvent(12, 0, NS), undefined, 'the stream is gone or new: 0');
    assert.equal(deadLettersEvent(12, undefined, NS), undefined);
  });
});

describe('IngestionMonitor', () => {
  const instance: InstanceName = { namespace: 'landscape', name: 'a' };

  function setup(answers: Array<unknown | Error>) {
    let now = NOW.getTime();
    const urls: string[] = [];
    const changes: InstanceName[] = [];
    const fetch: JszFetch = async (url, init) => {
      urls.push(url);
      assert.ok(init.signal instanceof AbortSignal, 'every fetch has a timeout');
      const answer = answers.shift();
      if (answer instanceof Error) throw answer;
      return { ok: true, status: 200, json: async () => answer };
    };
    const monitor = new IngestionMonitor({ onChange: (i) => changes.push(i), fetch, now: () => now });
    return { monitor, urls, changes, advance: (ms: number) => (now += ms) };
  }

  it('asks the broker pod at its monitor port and reports a first state and each change, not a reading in the same state', async () => {
    const { monitor, urls, changes, advance } = setup([jsz({}), jsz({ messages: 5 }), jsz({ messages: 0, bytes: 0 })]);
    assert.equal(await monitor.check('landscape/a', instance, '10.0.0.7'), CHECK_INTERVAL_MS);
    assert.deepEqual(urls, ['http://10.0.0.7:8222/jsz?streams=true&consumers=true&config=true']);
    assert.equal(monitor.verdict('landscape/a')?.state, 'Stalled');
    assert.deepEqual(changes, [instance]);
    advance(CHECK_INTERVAL_MS);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    assert.equal(monitor.verdict('landscape/a')?.reading.backlogMessages, 5);
    assert.equal(changes.length, 1, 'still Stalled: no change');
    advance(CHECK_INTERVAL_MS);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    assert.equal(monitor.verdict('landscape/a')?.state, 'Flowing');
    assert.equal(changes.length, 2);
    assert.deepEqual(monitor.readings(), [{ ...instance, ...monitor.verdict('landscape/a')! }]);
  });

  it('keeps the dead-letter count of the last reading while readings are unknown', async () => {
    const noTelemetry = { account_details: [{ stream_detail: [] }] };
    const { monitor, advance } = setup([jsz({}, undefined, true, { messages: 2, last_seq: 2 }), new Error('connect ETIMEDOUT'), noTelemetry, jsz({}, undefined, true, { messages: 5, last_seq: 5 })]);
    assert.equal(monitor.deadLetters('landscape/a'), undefined, 'nothing read yet');
    await monitor.check('landscape/a', instance, '10.0.0.7');
    assert.equal(monitor.deadLetters('landscape/a'), 2);
    advance(CHECK_INTERVAL_MS);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    assert.equal(monitor.verdict('landscape/a'), undefined);
    assert.equal(monitor.deadLetters('landscape/a'), 2, 'kept while unknown');
    await monitor.check('landscape/a', instance, undefined);
    assert.equal(monitor.deadLetters('landscape/a'), 2, 'kept without a Ready broker pod');
    advance(2 * CHECK_INTERVAL_MS);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    assert.equal(monitor.deadLetters('landscape/a'), 2, 'kept while the broker has no TELEMETRY stream');
    advance(CHECK_INTERVAL_MS);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    assert.equal(monitor.deadLetters('landscape/a'), 5);
  });

  it('fetches nothing when asked before the next check is due', async () => {
    const { monitor, urls, advance } = setup([jsz({})]);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    advance(5_000);
    assert.equal(await monitor.check('landscape/a', instance, '10.0.0.7'), CHECK_INTERVAL_MS - 5_000);
    assert.equal(urls.length, 1);
  });

  it('backs off from a broker it cannot reach, doubling up to 10 minutes, with no reading meanwhile; a success resets it', async () => {
    const failures = Array.from({ length: 8 }, () => new Error('connect ETIMEDOUT'));
    const { monitor, changes, advance } = setup([jsz({}), ...failures, jsz({})]);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    const delays: number[] = [];
    for (let i = 0; i < failures.length; i++) {
      advance(delays.at(-1) ?? CHECK_INTERVAL_MS);
      delays.push(await monitor.check('landscape/a', instance, '10.0.0.7'));
      assert.equal(monitor.verdict('landscape/a'), undefined, 'unknown');
    }
    assert.deepEqual(delays, [15_000, 30_000, 60_000, 120_000, 240_000, 480_000, MAX_BACKOFF_MS, MAX_BACKOFF_MS]);
    advance(MAX_BACKOFF_MS);
    assert.equal(await monitor.check('landscape/a', instance, '10.0.0.7'), CHECK_INTERVAL_MS);
    assert.equal(monitor.verdict('landscape/a')?.state, 'Stalled');
    assert.equal(changes.length, 1, 'unknown readings in between are no change of state');
  });

  it('treats an answer other than 200 as a failure, and has no reading without a Ready broker pod', async () => {
    const { monitor } = setup([]);
    const refusing = new IngestionMonitor({ onChange: () => undefined, fetch: async () => ({ ok: false, status: 503, json: async () => ({}) }) });
    await refusing.check('landscape/a', instance, '10.0.0.7');
    assert.equal(refusing.verdict('landscape/a'), undefined);
    assert.equal(await monitor.check('landscape/a', instance, undefined), CHECK_INTERVAL_MS);
    assert.deepEqual(monitor.readings(), []);
  });

  it('forgets a deleted instance', async () => {
    const { monitor } = setup([jsz({})]);
    await monitor.check('landscape/a', instance, '10.0.0.7');
    monitor.forget('landscape/a');
    assert.equal(monitor.verdict('landscape/a'), undefined);
    assert.deepEqual(monitor.readings(), []);
  });

  it('puts an IPv6 address in brackets', async () => {
    const { monitor, urls } = setup([jsz({})]);
    await monitor.check('landscape/a', instance, 'fd00::7');
    assert.equal(urls[0], 'http://[fd00::7]:8222/jsz?streams=true&consumers=true&config=true');
  });
});

describe('ingestionReconciler', () => {
  const NAME = 'tenant-a';
  const INSTANCE_NAMESPACE = `${TEST_CONFIG.operatorName}-${NAME}`;

  it('records a Warning DeadLetters Event on the IoTService when the count grew since the previous reading, none for the first', async () => {
    const cluster = new FakeClient();
    cluster.seed(IoTServiceType, iotService(NAME, {}) as unknown as KubeObject);
    cluster.seed(Kinds.Pod, {
      metadata: { name: 'broker-0', namespace: INSTANCE_NAMESPACE },
      status: { phase: 'Running', podIP: '10.0.0.7', conditions: [{ type: 'Ready', status: 'True' }] },
    } as KubeObject);
    const answers = [
      jsz({ messages: 0, bytes: 0 }, undefined, true, { messages: 7, last_seq: 7 }),
      jsz({ messages: 0, bytes: 0 }, undefined, true, { messages: 7, last_seq: 7 }),
      jsz({ messages: 0, bytes: 0 }, undefined, true, { messages: 10, last_seq: 10 }),
    ];
    let now = NOW.getTime();
    const monitor = new IngestionMonitor({ onChange: () => undefined, fetch: async () => ({ ok: true, status: 200, json: async () => answers.shift() }), now: () => now });
    const events: Array<{ on: string; type: string; reason: string; message: string }> = [];
    const ctx = { ...cluster.reconcileContext(), recorder: { event: (obj: KubeObject, type: string, reason: string, message: string) => void events.push({ on: obj.metadata.name!, type, reason, message }), flush: async () => undefined } };
    const reconcile = ingestionReconciler(monitor, { ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1 });
    const request = { namespace: TEST_CONFIG.operatorName, name: NAME };

    await reconcile(request, ctx);
    assert.equal(events.length, 0, 'the first reading is the baseline: 7 from before');
    now += CHECK_INTERVAL_MS;
    await reconcile(request, ctx);
    assert.equal(events.length, 0, 'no new letters');
    await reconcile(request, ctx);
    assert.equal(events.length, 0, 'asked before the next check is due: nothing read, nothing recorded');
    now += CHECK_INTERVAL_MS;
    await reconcile(request, ctx);
    assert.deepEqual(
      events.map(({ on, type, reason }) => ({ on, type, reason })),
      [{ on: NAME, type: 'Warning', reason: 'DeadLetters' }],
    );
    assert.match(events[0]!.message, new RegExp(`^3 messages set aside as dead letters since the last check \\(10 in all\\).*kubectl -n ${INSTANCE_NAMESPACE} exec database-0`));
  });
});
