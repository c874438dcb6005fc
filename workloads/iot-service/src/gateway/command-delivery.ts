/**
 * How the gateway takes a device's commands off the broker (shared/commands.ts) and records what
 * became of them (shared/command-states.ts), whatever protocol hands them to the device.
 *
 * Guarantees: the device's commands come from its one durable consumer on COMMANDS (made here
 * when missing; every gateway uses the same one, so a device that moves to another gateway gets
 * what is left), in order, at most IN_FLIGHT of them handed out and not yet acknowledged by the
 * device (so a device's commands are not held back by each one's round trip). `follow(device,
 * send)` hands each pending command to `send` in order, without waiting for the previous send to
 * settle, until the returned function is called; `next(device, waitMs)` takes one for an HTTP
 * device polling, waiting up to `waitMs`, and leaves it to the caller to say `delivered()` or
 * `undelivered()`. A command is acknowledged on the broker only once the device acknowledged it
 * (then recorded `delivered` with its attempt count); one `send` rejected or `undelivered` is
 * offered again (the next delivery). Once a follow is stopped (the device gone), every command it
 * took and the device did not acknowledge, sent or not, is offered again at once, in the order
 * taken, so the device's next connection gets them first and in order instead of after
 * ACK_WAIT_MS; one the device acknowledged never is. One whose TTL passed is recorded `expired`
 * and one delivered 1 + `retries` times without the device's acknowledgement is recorded
 * `failed`, both taken off the stream without reaching the device. `respond` records the
 * device's answer (2xx `succeeded`, else `failed`) for a command of that device only: false for a
 * command that is unknown or another device's. A consumer that cannot be made or read is tried
 * again every second while followed.
 */

import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type Consumer, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommandStates } from '../shared/command-states.ts';
import { COMMAND_STREAM, commandSubject, decodeCommand, deviceConsumer, type Command } from '../shared/commands.ts';
import type { Logger } from '../shared/log.ts';
import { isApiError, nanos } from '../shared/broker.ts';

/** Offers the command again at once (the next delivery). */
function handBack(message: JsMsg): void {
  try {
    message.nak();
  } catch {
    // the broker connection closed: the broker offers it again after ACK_WAIT_MS
  }
}

/** How long a command handed out waits for the gateway's acknowledgement before the broker offers it again (a gateway that stopped). */
const ACK_WAIT_MS = 30_000;
/** A device's consumer left unused this long is removed by the broker (its commands stay in the stream). */
const INACTIVE_MS = 60 * 60_000;
/** NATS Server's error for a consumer created again with other settings. */
const CONSUMER_EXISTS = 10148;
/** A device's commands handed out and not yet acknowledged by it, at most. */
export const IN_FLIGHT = 8;

export interface PolledCommand {
  command: Command;
  delivered(): Promise<void>;
  undelivered(): void;
}

export class CommandDelivery {
  private readonly states: Promise<CommandStates>;

  constructor(
    private readonly connection: Promise<NatsConnection>,
    private readonly log: Logger,
  ) {
    this.states = connection.then((made) => new CommandStates(made));
  }

  follow(deviceId: string, send: (command: Command) => Promise<void>): () => void {
    const stopped = new AbortController();
    let messages: { stop(): void } | undefined;
    /** The commands taken off the consumer and not yet acknowledged by the device, in the order taken. */
    const held = new Set<JsMsg>();
    void (async () => {
      let consumer: Consumer | undefined;
      while (!stopped.signal.aborted) {
        try {
          consumer = await this.consumer(deviceId);
          const consuming = await consumer.consume({ max_messages: IN_FLIGHT });
          messages = consuming;
          if (stopped.signal.aborted) consuming.stop();
          for await (const message of consuming) {
            const command = await this.admitted(message);
            if (!command) continue;
            held.add(message);
            if (stopped.signal.aborted) continue;
            send(command).then(
              () => {
                held.delete(message);
                return this.acknowledged(message, command).catch((error: unknown) => this.log.warn('command delivery not recorded', { device: deviceId, command: command.id, error }));
              },
              (error: unknown) => {
                if (stopped.signal.aborted) return; // handed back with the others, in order
                held.delete(message);
                this.log.info('command not acknowledged by the device; offered again', { device: deviceId, command: command.id, error });
                handBack(message);
              },
            );
          }
        } catch (error) {
          if (stopped.signal.aborted) break;
          this.log.warn('device commands not readable; trying again', { device: deviceId, error });
          await sleep(1_000);
        }
      }
      if (held.size === 0) return;
      // Asking for the consumer's info makes the broker drop the pulls of the stopped subscription
      // first: with one left, the first command handed back would be offered after the others.
      await consumer?.info().catch(() => undefined);
      this.log.info('commands not acknowledged by the device handed back', { device: deviceId, commands: held.size });
      for (const message of held) handBack(message);
    })();
    return () => {
      stopped.abort();
      messages?.stop();
    };
  }

  async next(deviceId: string, waitMs: number): Promise<PolledCommand | undefined> {
    const consumer = await this.consumer(deviceId);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const left = deadline - Date.now();
      if (left < 1_000) return undefined; // the broker takes no shorter wait
      const message = await consumer.next({ expires: left });
      if (!message) return undefined;
      const command = await this.admitted(message);
      if (command) return { command, delivered: () => this.acknowledged(message, command), undelivered: () => message.nak() };
    }
  }

  async respond(deviceId: string, commandId: string, status: number, response: unknown): Promise<boolean> {
    const change = { state: status >= 200 && status < 300 ? 'succeeded' : 'failed', status, response, ...(status >= 300 ? { reason: `the device answered ${status}` } : {}) } as const;
    const recorded = await (await this.states).advance(commandId, change, deviceId);
    if (!recorded) return false;
    this.log.info('command answered', { device: deviceId, command: commandId, status, state: recorded.state });
    return true;
  }

  /** The command to deliver, or undefined when it expired or ran out of deliveries (then recorded and taken off the stream). */
  private async admitted(message: JsMsg): Promise<Command | undefined> {
    let command: Command;
    try {
      command = decodeCommand(message.data);
    } catch (error) {
      this.log.warn('not a command; dropped', { subject: message.subject, error });
      message.term();
      return undefined;
    }
    const attempts = message.info.deliveryCount;
    const outcome =
      Date.now() >= Date.parse(command.expiresAt)
        ? ({ state: 'expired', reason: 'not delivered within its TTL' } as const)
        : attempts > command.retries + 1
          ? ({ state: 'failed', reason: `the device acknowledged none of ${attempts - 1} deliveries` } as const)
          : undefined;
    if (!outcome) return command;
    message.term();
    await (await this.states).advance(command.id, { ...outcome, attempts: attempts - 1 });
    this.log.info(`command ${outcome.state}`, { device: command.deviceId, command: command.id, reason: outcome.reason });
    return undefined;
  }

  private async acknowledged(message: JsMsg, command: Command): Promise<void> {
    message.ack();
    await (await this.states).advance(command.id, { state: 'delivered', attempts: message.info.deliveryCount });
    this.log.info('command delivered', { device: command.deviceId, command: command.id, attempts: message.info.deliveryCount });
  }

  private async consumer(deviceId: string): Promise<Consumer> {
    const connection = await this.connection;
    const name = deviceConsumer(deviceId);
    const jsm = await jetstreamManager(connection, { checkAPI: false });
    const settings = { ack_wait: nanos(ACK_WAIT_MS), max_ack_pending: IN_FLIGHT, inactive_threshold: nanos(INACTIVE_MS) };
    try {
      await jsm.consumers.add(COMMAND_STREAM, { durable_name: name, filter_subject: commandSubject(deviceId), ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, max_deliver: -1, ...settings });
    } catch (error) {
      // One made with other settings (a gateway of before): brought to these.
      if (!isApiError(error, CONSUMER_EXISTS)) throw error;
      await jsm.consumers.update(COMMAND_STREAM, name, settings);
    }
    return jetstream(connection).consumers.get(COMMAND_STREAM, name);
  }
}
