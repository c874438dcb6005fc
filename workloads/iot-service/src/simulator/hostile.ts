/**
 * What a misbehaving device sends, for tests of the gateway's limits.
 *
 * Guarantees: `mqttHeaderAnnouncing(bytes)` is an MQTT fixed header (a CONNECT by default) whose
 * remaining length, MQTT's 1–4 byte variable-length integer, announces `bytes` more bytes — the
 * header alone, so that a test can check the gateway closes the connection before any body arrives.
 */

const CONNECT = 0x10;

export function mqttHeaderAnnouncing(bytes: number, packetType = CONNECT): Buffer {
  const header = [packetType];
  let left = bytes;
  do {
    header.push((left % 128) | (left >= 128 ? 0x80 : 0));
    left = Math.floor(left / 128);
  } while (left > 0);
  return Buffer.from(header);
}
