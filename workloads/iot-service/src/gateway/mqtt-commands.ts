/**
 * Commands over MQTT (shared/commands.ts): what a device may subscribe to, how its commands reach
 * it, and how its answers are taken.
 *
 * Guarantees: `mayPublish`/`maySubscribe` — a device subscribes only to filters within its own
 * `command/<its id>/req/` (granted at most QoS 1); any other filter is refused (SUBACK 128). Once
 * a device holds such a subscription, its pending commands are published to that connection
 * alone (`command/<id>/req/<command id>/<name>`, QoS 1, the payload's JSON text), in order, up to
 * command-delivery.ts IN_FLIGHT at once: a command counts as delivered at the device's PUBACK of
 * its publish (PUBACKs come in the order of the publishes); none within `ackTimeoutMs`
 * (default 10 s) closes the connection. The commands stop when the device unsubscribes or its
 * connection closes; those not acknowledged then are offered again at once, in order, to its next
 * subscription. `answer` records a publish on `command/<its id>/res/<command id>[/<status>]`
 * (payload: JSON, or empty for none) as the device's answer; an answer to a command that is not
 * the device's is logged and dropped.
 */

import type { Aedes, Client, Subscription } from 'aedes';
import type { Logger } from '../shared/log.ts';
import { isOwnCommandFilter, parseResponseTopic, requestTopic, type Command } from '../shared/commands.ts';
import type { CommandDelivery } from './command-delivery.ts';

export interface MqttCommandsOptions {
  delivery: CommandDelivery;
  log: Logger;
  /** The device a connected client is. */
  deviceOf: (client: Client) => string | undefined;
  ackTimeoutMs?: number;
}

export interface MqttCommands {
  /** The subscription to grant the device (QoS at most 1), or null to refuse it. */
  maySubscribe(deviceId: string, subscription: Subscription): Subscription | null;
  /** Whether the topic is a command answer (then `answer` takes it). */
  isAnswer(topic: string): boolean;
  answer(deviceId: string, topic: string, payload: Buffer): Promise<void>;
}

function answerPayload(bytes: Buffer): unknown {
  if (bytes.length === 0) return null;
  const text = bytes.toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

interface Following {
  /** The device's command filters. */
  filters: Set<string>;
  stop: () => void;
  /** The commands published and waiting for their PUBACK, by topic, in the order published. */
  waiting: Map<string, { acked: () => void; lost: (error: Error) => void }>;
}

export function serveMqttCommands(broker: Aedes, options: MqttCommandsOptions): MqttCommands {
  const { delivery, log, deviceOf } = options;
  const ackTimeoutMs = options.ackTimeoutMs ?? 10_000;
  /** Each following connection: how to stop, and the PUBACKs it waits for. */
  const following = new Map<Client, Following>();

  function send(client: Client, command: Command): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const entry = following.get(client);
      if (!entry) return reject(new Error('the device stopped following its commands'));
      const topic = requestTopic(command);
      const timer = setTimeout(() => {
        log.warn('mqtt connection closed', { device: command.deviceId, command: command.id, reason: `no PUBACK for a command within ${ackTimeoutMs / 1000} s` });
        // stopped first: the commands offered again go to the device's next connection, not to this closing one
        stop(client);
        client.close();
      }, ackTimeoutMs);
      const settled = () => (clearTimeout(timer), entry.waiting.delete(topic));
      entry.waiting.set(topic, { acked: () => (settled(), resolve()), lost: (error) => (settled(), reject(error)) });
      client.publish({ cmd: 'publish', topic, payload: Buffer.from(JSON.stringify(command.payload)), qos: 1, retain: false, dup: false }, (error?: Error) => {
        if (error) entry.waiting.get(topic)?.lost(error);
      });
    });
  }

  function stop(client: Client): void {
    const entry = following.get(client);
    if (!entry) return;
    following.delete(client);
    entry.stop();
    for (const waiting of [...entry.waiting.values()]) waiting.lost(new Error('the device is gone'));
  }

  broker.on('subscribe', (subscriptions, client) => {
    const deviceId = deviceOf(client);
    // a refused subscription is reported with QoS 128
    const filters = subscriptions.filter((subscription) => (subscription.qos as number) !== 128 && deviceId !== undefined && isOwnCommandFilter(deviceId, subscription.topic)).map(({ topic }) => topic);
    if (deviceId === undefined || filters.length === 0) return;
    const existing = following.get(client);
    if (existing) return filters.forEach((filter) => existing.filters.add(filter));
    const entry: Following = { filters: new Set(filters), stop: () => undefined, waiting: new Map() };
    following.set(client, entry);
    entry.stop = delivery.follow(deviceId, (command) => send(client, command));
  });
  broker.on('unsubscribe', (topics, client) => {
    const entry = following.get(client);
    if (!entry) return;
    for (const topic of topics) entry.filters.delete(topic);
    if (entry.filters.size === 0) stop(client);
  });
  broker.on('clientDisconnect', stop);
  broker.on('ack', (packet, client) => {
    const waiting = following.get(client)?.waiting;
    if (!waiting) return;
    // The publish acknowledged, when the broker kept it (a persistent session); else the oldest
    // waiting: a device acknowledges QoS 1 publishes in the order it received them (MQTT 3.1.1 4.6).
    const topic = packet && 'topic' in packet && waiting.has(packet.topic) ? packet.topic : waiting.keys().next().value;
    if (topic !== undefined) waiting.get(topic)?.acked();
  });

  return {
    maySubscribe: (deviceId, subscription) => (isOwnCommandFilter(deviceId, subscription.topic) ? { ...subscription, qos: Math.min(subscription.qos, 1) as 0 | 1 } : null),
    isAnswer: (topic) => topic.startsWith('command/'),
    answer: async (deviceId, topic, payload) => {
      const parsed = parseResponseTopic(topic);
      const known = parsed?.deviceId === deviceId && (await delivery.respond(deviceId, parsed.commandId, parsed.status, answerPayload(payload)));
      if (!known) log.warn('command answer dropped', { device: deviceId, topic, reason: 'not an answer to a command of this device' });
    },
  };
}
