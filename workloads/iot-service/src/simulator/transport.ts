/**
 * How the simulator reaches the gateway over either protocol, plaintext or TLS.
 *
 * Guarantees: `isMqttTlsUrl` says whether mqtt.js dials a URL over TLS; `mqttTlsOptions` is what
 * mqtt.js needs for an mqtts:// URL (the CA to trust, the server name to check, a client
 * certificate), nothing for mqtt://. `sendRequest` sends one
 * request and resolves with its status, body and headers: http:// through fetch, https:// through
 * node:https with `tls` (only the given CA trusted when one is given); it rejects on a network or
 * TLS error (a certificate the device does not trust: the handshake's error, e.g.
 * UNABLE_TO_VERIFY_LEAF_SIGNATURE) or when `signal` aborts. `HttpStatusError` is how the simulator
 * reports an answer of another status than it expected.
 */

import { request as httpsRequest } from 'node:https';
import type { GatewayTls } from './types.ts';

/** A request answered with another status than the one expected: `status` and `body` as answered. */
export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    what: string,
  ) {
    super(`${what}: HTTP ${status} ${body}`);
  }
}

/** Whether mqtt.js dials `url` over TLS: mqtts:// (or ssl://, tls://, wss://). */
export function isMqttTlsUrl(url: string): boolean {
  return /^(mqtts|ssl|tls|wss):/.test(url);
}

/** The TLS options of an MQTT connection to `url`: empty unless it is mqtts:// (or ssl://, tls://). */
export function mqttTlsOptions(url: string, tls: GatewayTls | undefined): { ca?: string; servername?: string; cert?: string; key?: string } {
  if (!tls || !isMqttTlsUrl(url)) return {};
  return {
    ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
    ...(tls.servername !== undefined ? { servername: tls.servername } : {}),
    ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
    ...(tls.key !== undefined ? { key: tls.key } : {}),
  };
}

export interface SentRequest {
  method: string;
  headers: Record<string, string>;
  body?: string;
  tls?: GatewayTls;
  signal?: AbortSignal;
}

export interface ReceivedResponse {
  status: number;
  text: string;
  /** The answer's headers, names in lower case. */
  headers: Record<string, string>;
}

/** One request to `url`; its status, body text and headers. */
export async function sendRequest(url: URL, init: SentRequest): Promise<ReceivedResponse> {
  if (url.protocol !== 'https:') {
    const response = await fetch(url, { method: init.method, headers: init.headers, body: init.body, signal: init.signal });
    return { status: response.status, text: await response.text(), headers: Object.fromEntries(response.headers) };
  }
  const tls = init.tls ?? {};
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        method: init.method,
        headers: init.body === undefined ? init.headers : { ...init.headers, 'Content-Length': String(Buffer.byteLength(init.body)) },
        ca: tls.ca,
        servername: tls.servername, // node checks the certificate against it, not the URL's host
        cert: tls.cert,
        key: tls.key,
        signal: init.signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), headers: Object.fromEntries(Object.entries(res.headers).map(([name, value]) => [name, String(value)])) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}
