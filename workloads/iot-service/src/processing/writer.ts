/**
 * processing's core: each message from the broker is written to the database once, and
 * acknowledged only after the write committed.
 *
 * Guarantees: `createMessageHandler` is an mqtt.js `MqttClient#handleMessage` (mqtt.js sends the
 * PUBACK of a QoS 1 message only after it called back without error, in every protocol version;
 * its `customHandleAcks` option works only with MQTT 5): for a message it decodes the envelope
 * and inserts it keyed by (device id, message id), retrying a failing write until it succeeds,
 * and only then calls back, so the PUBACK follows the commit; a message stored before (a redelivery) is
 * acknowledged without a second row. Once `signal` aborts it acknowledges nothing more: a message
 * in retry or arriving later stays unacknowledged and the broker delivers it again to the
 * persistent session. A message that is not a valid envelope can never be stored: it is logged
 * and acknowledged, so it cannot block the messages behind it. mqtt.js hands over the next message
 * only after this handler called back, so writes happen in the broker's order.
 */

import type { MqttClient } from 'mqtt';
import type { Logger } from '../shared/log.ts';
import { retry } from '../shared/retry.ts';
import type { TelemetryStore } from '../shared/store.ts';
import { decodeEnvelope, type TelemetryEnvelope } from '../shared/telemetry.ts';

export type Outcome = 'stored' | 'duplicate' | 'malformed';

export interface WriterOptions {
  store: TelemetryStore;
  log: Logger;
  signal: AbortSignal;
  delayMs?: (failures: number) => number;
}

/** Stores one message; resolves when it may be acknowledged, rejects (only once `signal` aborted) when it may not. */
export async function writeMessage(message: Buffer, options: WriterOptions): Promise<Outcome> {
  options.signal.throwIfAborted();
  let envelope: TelemetryEnvelope;
  try {
    envelope = decodeEnvelope(message);
  } catch (error) {
    options.log.error('message dropped: not a telemetry envelope', { error, bytes: message.length });
    return 'malformed';
  }
  const stored = await retry(() => options.store.insertTelemetry(envelope), {
    signal: options.signal,
    delayMs: options.delayMs,
    onFailure: (error, failures) =>
      options.log.warn('write failed; retrying before acknowledging', { device: envelope.deviceId, messageId: envelope.messageId, failures, error }),
  });
  return stored ? 'stored' : 'duplicate';
}

export function createMessageHandler(options: WriterOptions): MqttClient['handleMessage'] {
  return (packet, callback) => {
    writeMessage(Buffer.from(packet.payload), options).then(
      () => callback(),
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
    );
  };
}
