/**
 * A cap on the size of the MQTT packets a device may send, enforced on the connection itself.
 *
 * Guarantees: `limitPacketSize` follows the MQTT framing (a fixed-header byte, then the remaining
 * length as a 1–4 byte variable-length integer, then that many bytes) of every byte the MQTT
 * server reads from `socket`, and destroys the socket as soon as a packet's header announces more
 * than `maxRemainingBytes`, or the length is malformed (a fifth length byte) — before the body
 * is buffered, and whether or not the client has authenticated yet. It observes the bytes the
 * server reads ('data' is emitted for each read while the server reads in paused mode); it
 * changes nothing of what the server sees.
 */

import type { Socket } from 'node:net';
import { BODY_LIMIT } from '../shared/http.ts';

/** The largest remaining length accepted: the gateway's largest payload, plus room for the topic and properties. */
export const MAX_MQTT_PACKET_BYTES = BODY_LIMIT + 1024;

export function limitPacketSize(socket: Socket, maxRemainingBytes: number, onRefused: (announcedBytes: number) => void): void {
  let state: 'type' | 'length' | 'body' = 'type';
  let length = 0;
  let multiplier = 1;
  let lengthBytes = 0;
  let bodyLeft = 0;
  const refuse = (announced: number) => {
    socket.removeListener('data', observe);
    onRefused(announced);
    socket.destroy();
  };
  function observe(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (state === 'type') {
        at++;
        state = 'length';
        length = 0;
        multiplier = 1;
        lengthBytes = 0;
      } else if (state === 'length') {
        const byte = chunk[at++]!;
        length += (byte & 0x7f) * multiplier;
        multiplier *= 128;
        lengthBytes++;
        if (length > maxRemainingBytes) return refuse(length);
        if (byte & 0x80) {
          if (lengthBytes === 4) return refuse(Number.POSITIVE_INFINITY);
          continue;
        }
        bodyLeft = length;
        state = bodyLeft > 0 ? 'body' : 'type';
      } else {
        const taken = Math.min(bodyLeft, chunk.length - at);
        at += taken;
        bodyLeft -= taken;
        if (bodyLeft === 0) state = 'type';
      }
    }
  }
  socket.on('data', observe);
}
