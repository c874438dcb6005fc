/**
 * An instance's ingestion health as read from its broker: how much telemetry waits in the
 * JetStream stream `TELEMETRY` for processing to store it, how old the oldest of it is, when
 * processing last stored a message (its durable consumer `processing` last acknowledged one; the
 * stream is a work queue, so its first message is the oldest one not stored), and how many
 * messages processing set aside as dead letters (the last sequence number of the stream
 * `DEAD_LETTERS`, where processing announces each once: it only grows while the stream exists),
 * and how far behind the applications following the stream `EVENTS` are (the most events any
 * of its consumers but processing's `connections` has pending: each is one application's
 * stream, core's `GET /v1/stream`).
 *
 * Guarantees:
 * - `parseJsz` reads nats-server's /jsz answer (streams, consumers and config) and nothing else;
 *   `ingestionState` is a pure function of a reading: `Stalled` when messages wait, the oldest
 *   for at least the stall window (the operator's --ingestion-stalled-after, default
 *   `STALLED_AFTER_SECONDS`), and processing stored none for as long (or never, or
 *   has no consumer); otherwise `Full` when the backlog holds at least `FULL_FRACTION` of its
 *   limit; otherwise `Flowing`. A reading's `deadLetters` is 0 while there is no `DEAD_LETTERS`
 *   stream.
 * - `deadLettersEvent` is a pure function of two dead-letter counts of an instance: a Warning
 *   `DeadLetters` when the count grew, naming how many were added and how to read them from the
 *   table; none for the first count (the baseline: letters from before the operator read the
 *   broker make no Event), none when it stayed or fell (a stream made again starts from 0).
 * - `IngestionMonitor` keeps the latest reading of each instance in memory only. A fetch takes
 *   at most `FETCH_TIMEOUT_MS`; a failed one, or an instance without a Ready broker pod, leaves
 *   no reading (unknown), never a guess. An instance whose fetches fail is asked again after
 *   twice as long each time, from the check interval up to `MAX_BACKOFF_MS`, and at the interval
 *   again after a success, so brokers that cannot be reached cost little. Asked earlier than
 *   its schedule (an event, a resync), it fetches nothing.
 * - `onChange` is called when an instance's state differs from the last one known (a first
 *   reading included); an unknown reading changes no state. `deadLetters` is the dead-letter
 *   count of the last reading, kept while readings are unknown, so letters set aside while the
 *   broker could not be read are counted at the next reading.
 * - `registerIngestionMonitor` polls as a controller of IoTServices: it runs only where the
 *   operator's controllers run (the leader), starts and stops with them, and has at most
 *   `MAX_FETCHES_IN_FLIGHT` fetches in flight; its turn for one IoTService is
 *   `ingestionReconciler`, which after each reading records the `DeadLetters` Event, if any, on
 *   the IoTService. The broker pod's IP comes from the pod cache. A shard of a ControllerRing
 *   caches no pods (iotservice-types.ts SHARDED_TYPES) and registers no monitor (controllers.ts), so
 *   under a ControllerRing there are no readings.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Kinds, controller, generationChanged, type KubeObject, type Manager, type Reconciler } from '@iot-operator/runtime';
import type { IngestionState } from './api/iotservice.ts';
import { IoTServiceType, keyOf, type IoTControllerConfig, type StatusEvent } from './iotservice-types.ts';
import { readyPodIP } from './pod-view.ts';
import { instanceNamespaceName } from './resources/index.ts';
import { PORTS } from './resources/ports.ts';

/** The streams and durable consumer the workloads make (workloads/iot-service/src/shared/broker.ts). */
export const TELEMETRY_STREAM = 'TELEMETRY';
export const PROCESSING_CONSUMER = 'processing';
export const DEAD_LETTER_STREAM = 'DEAD_LETTERS';
/** The stream applications follow, and processing's durable consumer of it (workloads/iot-service/src/shared/events.ts). */
export const EVENTS_STREAM = 'EVENTS';
export const CONNECTIONS_CONSUMER = 'connections';
/** The broker pod asked: the StatefulSet's first, which every instance has. */
export const BROKER_POD = 'broker-0';

/** How long messages may wait, with none stored, before ingestion is Stalled, unless the operator is told otherwise (--ingestion-stalled-after). */
export const STALLED_AFTER_SECONDS = 60;
/** The share of its limit at which the backlog is Full. */
export const FULL_FRACTION = 0.95;

export const CHECK_INTERVAL_MS = 15_000;
export const MAX_BACKOFF_MS = 10 * 60_000;
export const FETCH_TIMEOUT_MS = 1_000;
export const MAX_FETCHES_IN_FLIGHT = 8;

/** nats-server's time for "never" (Go's zero time); any time before the epoch counts as never. */
const NEVER_MS = 0;

export interface IngestionReading {
  backlogMessages: number;
  backlogBytes: number;
  /** The stream's max_bytes; undefined when it has none. */
  backlogLimitBytes?: number;
  /** Age of the stream's first message; 0 when it is empty. */
  oldestUnstoredSeconds: number;
  /** Since processing's consumer last acknowledged; undefined without consumer or acknowledgement. */
  lastStoredSecondsAgo?: number;
  /** When it did (Unix seconds, the broker's clock); undefined likewise. */
  lastStoredTimestampSeconds?: number;
  /** Messages set aside as dead letters since the DEAD_LETTERS stream was made (its last sequence number); 0 without it. */
  deadLetters: number;
  /** The most events any application following the EVENTS stream has yet to get; undefined while none follows. */
  applicationLagMessages?: number;
}

/** A reading and the state it makes. */
export interface IngestionVerdict {
  state: IngestionState;
  reading: IngestionReading;
}

interface JszStream {
  name?: string;
  config?: { max_bytes?: number };
  state?: { messages?: number; bytes?: number; first_ts?: string; last_seq?: number };
  consumer_detail?: Array<{ name?: string; num_pending?: number; ack_floor?: { last_active?: string } }>;
}

/** The ingestion figures of a /jsz answer at `now`; undefined when it has no TELEMETRY stream. */
export function parseJsz(body: unknown, now: Date): IngestionReading | undefined {
  const accounts = (body as { account_details?: Array<{ stream_detail?: JszStream[] }> } | undefined)?.account_details ?? [];
  const streams = accounts.flatMap((a) => a.stream_detail ?? []);
  const stream = streams.find((s) => s.name === TELEMETRY_STREAM);
  if (!stream) return undefined;
  const msOf = (time: string | undefined): number | undefined => {
    const ms = Date.parse(time ?? '');
    return Number.isNaN(ms) || ms <= NEVER_MS ? undefined : ms;
  };
  const secondsSince = (time: string | undefined): number | undefined => {
    const ms = msOf(time);
    return ms === undefined ? undefined : Math.max(0, (now.getTime() - ms) / 1000);
  };
  const messages = stream.state?.messages ?? 0;
  const limit = stream.config?.max_bytes;
  const consumer = stream.consumer_detail?.find((c) => c.name === PROCESSING_CONSUMER);
  const lastStored = secondsSince(consumer?.ack_floor?.last_active);
  const lastStoredMs = msOf(consumer?.ack_floor?.last_active);
  const followers = (streams.find((s) => s.name === EVENTS_STREAM)?.consumer_detail ?? []).filter((c) => c.name !== CONNECTIONS_CONSUMER);
  return {
    backlogMessages: messages,
    backlogBytes: stream.state?.bytes ?? 0,
    ...(limit !== undefined && limit > 0 ? { backlogLimitBytes: limit } : {}),
    oldestUnstoredSeconds: messages > 0 ? (secondsSince(stream.state?.first_ts) ?? 0) : 0,
    ...(lastStored !== undefined ? { lastStoredSecondsAgo: lastStored } : {}),
    ...(lastStoredMs !== undefined ? { lastStoredTimestampSeconds: lastStoredMs / 1000 } : {}),
    deadLetters: streams.find((s) => s.name === DEAD_LETTER_STREAM)?.state?.last_seq ?? 0,
    ...(followers.length > 0 ? { applicationLagMessages: Math.max(...followers.map((c) => c.num_pending ?? 0)) } : {}),
  };
}

export function ingestionState(reading: IngestionReading, stalledAfterSeconds = STALLED_AFTER_SECONDS): IngestionState {
  const storedNothingLately = reading.lastStoredSecondsAgo === undefined || reading.lastStoredSecondsAgo >= stalledAfterSeconds;
  if (reading.backlogMessages > 0 && reading.oldestUnstoredSeconds >= stalledAfterSeconds && storedNothingLately) return 'Stalled';
  if (reading.backlogLimitBytes !== undefined && reading.backlogBytes >= FULL_FRACTION * reading.backlogLimitBytes) return 'Full';
  return 'Flowing';
}

/**
 * The Event for an instance whose dead-letter count went from `previous` (undefined: none read
 * yet, this is the baseline) to `current`, in instance namespace `namespace`; undefined unless
 * it grew.
 */
export function deadLettersEvent(previous: number | undefined, current: number | undefined, namespace: string): StatusEvent | undefined {
  if (previous === undefined || current === undefined || current <= previous) return undefined;
  const added = current - previous;
  return {
    type: 'Warning',
    reason: 'DeadLetters',
    message:
      `${added} ${added === 1 ? 'message' : 'messages'} set aside as dead letters since the last check (${current} in all): the database refused ${added === 1 ? 'it' : 'them'} for ${added === 1 ? 'its' : 'their'} data; ` +
      `see table dead_letters (kubectl -n ${namespace} exec database-0 -- psql -h /tmp -U iot -d iot -c 'SELECT device_id, message_id, error, failed_at FROM dead_letters ORDER BY failed_at DESC LIMIT 20')`,
  };
}

/** The part of fetch the monitor uses. */
export type JszFetch = (url: string, init: { signal: AbortSignal }) => Promise<{ ok: boolean; status: number; json(): Promise<unknown> }>;

export interface IngestionMonitorOptions {
  /** An instance's state changed. */
  onChange(instance: InstanceName): void;
  fetch?: JszFetch;
  /** Milliseconds since the epoch. */
  now?: () => number;
  intervalMs?: number;
  /** The stall window in seconds (default STALLED_AFTER_SECONDS). */
  stalledAfterSeconds?: number;
}

/** Where an instance is, for the metrics. */
export interface InstanceName {
  namespace: string;
  name: string;
}

interface Tracked {
  instance: InstanceName;
  verdict?: IngestionVerdict;
  /** The last state known, kept while readings are unknown. */
  lastState?: IngestionState;
  /** The last dead-letter count read, kept while readings are unknown. */
  deadLetters?: number;
  failures: number;
  /** When the next fetch is due (ms since the epoch). */
  dueAt: number;
}

export class IngestionMonitor {
  private readonly tracked = new Map<string, Tracked>();
  private readonly fetch: JszFetch;
  private readonly now: () => number;
  private readonly intervalMs: number;

  constructor(private readonly options: IngestionMonitorOptions) {
    this.fetch = options.fetch ?? ((url, init) => fetch(url, init));
    this.now = options.now ?? Date.now;
    this.intervalMs = options.intervalMs ?? CHECK_INTERVAL_MS;
  }

  /**
   * Reads the instance's broker at `brokerIP` (undefined: no Ready broker pod) if a fetch is due;
   * returns the milliseconds until the next one is.
   */
  async check(key: string, instance: InstanceName, brokerIP: string | undefined): Promise<number> {
    const entry = this.tracked.get(key) ?? { instance, failures: 0, dueAt: 0 };
    this.tracked.set(key, entry);
    const early = entry.dueAt - this.now();
    if (early > 0) return early;
    if (!brokerIP) {
      entry.verdict = undefined;
      return this.schedule(entry, this.intervalMs);
    }
    const reading = await this.read(brokerIP);
    if (reading === 'failed') {
      entry.verdict = undefined;
      entry.failures += 1;
      return this.schedule(entry, Math.min(this.intervalMs * 2 ** (entry.failures - 1), MAX_BACKOFF_MS));
    }
    entry.failures = 0;
    entry.verdict = reading && { state: ingestionState(reading, this.options.stalledAfterSeconds), reading };
    if (reading) entry.deadLetters = reading.deadLetters;
    if (entry.verdict && entry.verdict.state !== entry.lastState) {
      entry.lastState = entry.verdict.state;
      this.options.onChange(entry.instance);
    }
    return this.schedule(entry, this.intervalMs);
  }

  /** The instance's latest reading and its state; undefined when unknown. */
  verdict(key: string): IngestionVerdict | undefined {
    return this.tracked.get(key)?.verdict;
  }

  /** The instance's dead-letter count as last read; undefined before its first reading. */
  deadLetters(key: string): number | undefined {
    return this.tracked.get(key)?.deadLetters;
  }

  /** Every instance with a reading. */
  readings(): Array<InstanceName & IngestionVerdict> {
    return [...this.tracked.values()].flatMap((t) => (t.verdict ? [{ ...t.instance, ...t.verdict }] : []));
  }

  forget(key: string): void {
    this.tracked.delete(key);
  }

  private schedule(entry: Tracked, delayMs: number): number {
    entry.dueAt = this.now() + delayMs;
    return delayMs;
  }

  private async read(ip: string): Promise<IngestionReading | undefined | 'failed'> {
    const host = ip.includes(':') ? `[${ip}]` : ip;
    try {
      const response = await this.fetch(`http://${host}:${PORTS.brokerMonitor}/jsz?streams=true&consumers=true&config=true`, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
      if (!response.ok) return 'failed';
      return parseJsz(await response.json(), new Date(this.now()));
    } catch {
      return 'failed';
    }
  }
}

/**
 * Polls the brokers of the landscape's IoTServices while the operator's controllers run (see the
 * module comment); `onChange` gets the IoTService whose ingestion state changed.
 */
export function registerIngestionMonitor(mgr: Manager, config: IoTControllerConfig, onChange: (instance: InstanceName) => void): IngestionMonitor {
  const monitor = new IngestionMonitor({ onChange, ...(config.ingestionStalledAfterSeconds !== undefined ? { stalledAfterSeconds: config.ingestionStalledAfterSeconds } : {}) });
  controller(mgr)
    .named('iotservice-ingestion')
    // Its own status writes and other updates do not change the schedule.
    .for(IoTServiceType, generationChanged())
    .maxConcurrentReconciles(MAX_FETCHES_IN_FLIGHT)
    .reconcile(ingestionReconciler(monitor, config));
  return monitor;
}

/** One IoTService's turn: its broker read when due, the `DeadLetters` Event recorded when its count grew. */
export function ingestionReconciler(monitor: IngestionMonitor, config: IoTControllerConfig): Reconciler {
  const landscape = config.operatorName;
  return async (request, ctx) => {
    const key = keyOf(request);
    const iot = request.namespace === landscape ? ctx.cache.get(IoTServiceType, request.name, landscape) : undefined;
    if (!iot || iot.metadata.deletionTimestamp) {
      monitor.forget(key);
      return;
    }
    const namespace = instanceNamespaceName(landscape, request.name);
    const pod = namespace.ok ? ctx.cache.get<V1Pod & KubeObject>(Kinds.Pod, BROKER_POD, namespace.name) : undefined;
    const deadLetters = monitor.deadLetters(key);
    const requeueAfterMs = await monitor.check(key, { namespace: landscape, name: request.name }, pod && readyPodIP(pod));
    const event = namespace.ok ? deadLettersEvent(deadLetters, monitor.deadLetters(key), namespace.name) : undefined;
    if (event) ctx.recorder.event(iot, event.type, event.reason, event.message);
    return { requeueAfterMs };
  };
}
