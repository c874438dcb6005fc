/**
 * core's events API: `GET /v1/stream` follows the stream EVENTS (shared/events.ts) as
 * Server-Sent Events, for applications and for the api token alike.
 *
 * Guarantees: each event is written as `id: <stream sequence>`, `event: telemetry|connection`,
 * `data: <the event's JSON>`, in the stream's order (per device: the order processing stored
 * and the gateway saw), through a JetStream ordered consumer that survives a broker restart or a
 * reconnect without skipping or repeating. Where it starts: after the sequence in the
 * `Last-Event-ID` header (what an EventSource sends when it reconnects) or `?after=<sequence>`;
 * else at `?from=<RFC 3339 time>`; else at the events that come after the request, the answer
 * then opening with `id: <the stream's last sequence>` and no data (so a client that reconnects
 * with it misses nothing even if no event came before). `?device=<id>` (repeatable, at most
 * MAX_DEVICES) keeps only those devices' events. A malformed sequence, time or device id → 400
 * with the reason; core not connected to the broker or the stream missing → 503 with
 * `Retry-After: 1`. A comment line every `heartbeatMs` (default 15 s) keeps proxies from closing
 * an idle stream. `stillAllowed` is asked every `recheckMs` (default 2 s): once false (the
 * application's credential revoked) the response ends. `close` ends every open response (core's
 * shutdown), so none holds the server open; so does the broker ending the consumer (the client
 * resumes). `followers()` names the application of each open stream.
 */

import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DeliverPolicy, jetstream, jetstreamManager, type Consumer } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { EVENTS_STREAM, deviceEventSubjects } from '../shared/events.ts';
import { HttpError } from '../shared/http.ts';
import type { Logger } from '../shared/log.ts';
import { isDeviceId } from '../shared/telemetry.ts';

export const MAX_DEVICES = 100;

export interface EventStreamOptions {
  /** core's broker connection, once it has one. */
  broker: () => NatsConnection | undefined;
  log: Logger;
  heartbeatMs?: number;
  recheckMs?: number;
}

/** Who follows: `application` for the log and `lag`, and whether its credential still holds. */
export interface Follower {
  application: string;
  stillAllowed: () => Promise<boolean>;
}

type Start = { after: number } | { from: string } | 'next';

function parseStart(req: IncomingMessage, url: URL): Start {
  const header = req.headers['last-event-id'];
  const after = (Array.isArray(header) ? header[0] : header) ?? url.searchParams.get('after');
  if (after !== null && after !== undefined && after !== '') {
    if (!/^\d{1,15}$/.test(after)) throw new HttpError(400, 'Last-Event-ID (or after) must be an event id: a stream sequence number');
    return { after: Number(after) };
  }
  const from = url.searchParams.get('from');
  if (from !== null) {
    const time = Date.parse(from);
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(from) || Number.isNaN(time)) throw new HttpError(400, 'from must be an RFC 3339 time, e.g. 2026-11-29T08:00:00Z');
    return { from: new Date(time).toISOString() };
  }
  return 'next';
}

function parseDevices(url: URL): string[] {
  const devices = url.searchParams.getAll('device');
  if (devices.length > MAX_DEVICES) throw new HttpError(400, `at most ${MAX_DEVICES} device parameters`);
  const bad = devices.find((id) => !isDeviceId(id));
  if (bad !== undefined) throw new HttpError(400, `device ${JSON.stringify(bad)} is not a device id (1-128 characters of A-Z a-z 0-9 . _ : -)`);
  return devices;
}

export class EventStreams {
  private readonly open = new Map<ServerResponse, string>();

  constructor(private readonly options: EventStreamOptions) {}

  /** The application of each open stream. */
  followers(): string[] {
    return [...this.open.values()];
  }

  close(): void {
    for (const res of this.open.keys()) res.end();
  }

  async serve(req: IncomingMessage, res: ServerResponse, url: URL, follower: Follower): Promise<void> {
    const start = parseStart(req, url);
    const filter_subjects = deviceEventSubjects(parseDevices(url));
    const broker = this.options.broker();
    if (!broker) throw new HttpError(503, 'core is not connected to the broker yet', { 'Retry-After': '1' });
    let consumer: Consumer;
    let opening = '';
    try {
      if (start === 'next') {
        const last = (await (await jetstreamManager(broker, { checkAPI: false })).streams.info(EVENTS_STREAM)).state.last_seq;
        opening = `id: ${last}\n\n`;
        consumer = await jetstream(broker).consumers.get(EVENTS_STREAM, { filter_subjects, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: last + 1 });
      } else if ('after' in start) {
        consumer = await jetstream(broker).consumers.get(EVENTS_STREAM, { filter_subjects, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start.after + 1 });
      } else {
        consumer = await jetstream(broker).consumers.get(EVENTS_STREAM, { filter_subjects, deliver_policy: DeliverPolicy.StartTime, opt_start_time: start.from });
      }
    } catch (error) {
      this.options.log.warn('events stream not available', { error });
      throw new HttpError(503, 'the events stream is not available now', { 'Retry-After': '1' });
    }
    const messages = await consumer.consume();
    this.open.set(res, follower.application);
    const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), this.options.heartbeatMs ?? 15_000);
    const recheck = setInterval(() => {
      follower.stillAllowed().then(
        (allowed) => {
          if (!allowed) res.end();
        },
        (error: unknown) => this.options.log.warn('cannot check an application\'s credential; asking again', { error }),
      );
    }, this.options.recheckMs ?? 2_000);
    const closed = new AbortController();
    res.once('close', () => {
      closed.abort();
      clearInterval(heartbeat);
      clearInterval(recheck);
      this.open.delete(res);
      void messages.close().catch(() => undefined);
    });
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
    res.write(`: following ${EVENTS_STREAM}\n\n${opening}`);
    this.options.log.info('application following events', { application: follower.application });
    try {
      for await (const message of messages) {
        if (res.writableEnded) break;
        const type = message.subject.split('.')[1];
        if (!res.write(`id: ${message.seq}\nevent: ${type}\ndata: ${message.string()}\n\n`)) await once(res, 'drain', { signal: closed.signal }).catch(() => undefined);
      }
    } catch (error) {
      this.options.log.warn('event stream ended by the broker', { application: follower.application, error });
    } finally {
      res.end(); // the client resumes after the last id it got
    }
  }
}
