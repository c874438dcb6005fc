/**
 * core keeps the broker's streams and processing's consumer in place: the gateway and processing
 * only use them and may not make them (image/broker.sh), so core, the instance's one component
 * trusted to change the broker's setup, makes them.
 *
 * Guarantees: `keepBrokerResources` makes the stream TELEMETRY (config.yml's `stream`), the
 * durable consumer `processing`, the stream DEAD_LETTERS, the stream EVENTS (shared/events.ts, config.yml's `events`) and its
 * durable consumer `connections`, and the command streams COMMANDS and COMMAND_STATES
 * (shared/commands.ts, shared/command-states.ts) exist with their settings
 * (shared/broker.ts: safe from any number of core replicas at once; an existing one with other
 * limits is brought to these), at once and then every `checkMs` (default 5 s), so a broker that
 * lost them (its volume) has them back within that. A round that fails is logged and the next
 * one tries again; a round still running when the next is due is not run twice. It stops when
 * `signal` aborts. `inPlace()` says whether the last round made or found all of them.
 */

import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureDeadLetterStream, ensureProcessingConsumer, ensureTelemetryStream } from '../shared/broker.ts';
import { ensureCommandStateStream } from '../shared/command-states.ts';
import { ensureCommandStream } from '../shared/commands.ts';
import type { EventsConfig, StreamConfig } from '../shared/config.ts';
import { ensureConnectionsConsumer, ensureEventsStream } from '../shared/events.ts';
import type { Logger } from '../shared/log.ts';

export interface BrokerResourcesOptions {
  stream: StreamConfig;
  events: EventsConfig;
  log: Logger;
  signal: AbortSignal;
  checkMs?: number;
}

export function keepBrokerResources(connection: NatsConnection, options: BrokerResourcesOptions): { inPlace(): boolean } {
  let inPlace = false;
  let running: Promise<void> | undefined;
  const round = () =>
    (running ??= (async () => {
      const jsm = await jetstreamManager(connection, { checkAPI: false });
      await ensureTelemetryStream(jsm, options.stream);
      await ensureProcessingConsumer(jsm);
      await ensureDeadLetterStream(jsm, options.stream);
      await ensureEventsStream(jsm, options.stream, options.events);
      await ensureConnectionsConsumer(jsm);
      await ensureCommandStream(jsm, options.stream);
      await ensureCommandStateStream(jsm, options.stream);
    })()
      .then(
        () => {
          if (!inPlace) options.log.info('broker streams and consumer in place');
          inPlace = true;
        },
        (error: unknown) => {
          inPlace = false;
          if (!options.signal.aborted) options.log.warn('broker streams and consumer not in place; trying again', { error });
        },
      )
      .finally(() => (running = undefined)));
  void round();
  const timer = setInterval(() => void round(), options.checkMs ?? 5_000);
  options.signal.addEventListener('abort', () => clearInterval(timer), { once: true });
  return { inPlace: () => inPlace };
}
