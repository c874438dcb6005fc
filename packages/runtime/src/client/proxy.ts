/**
 * Reaching the API server through an HTTP proxy: a kubeconfig cluster's `proxy-url`.
 *
 * Guarantees:
 * - An https API server is reached through an HTTP CONNECT tunnel; TLS runs end to end between
 *   this process and the API server with the agent's TLS settings (CA, client certificate,
 *   `tls-server-name`), so the proxy sees only host and port. Tunnelled connections are pooled
 *   and kept alive like direct ones.
 * - A plain-http API server is reached by sending each request to the proxy with its absolute URL
 *   (forwarding), as Go's HTTP client does.
 * - User and password in the proxy URL are sent as `Proxy-Authorization: Basic`.
 * - A proxy that refuses the tunnel, or cannot be reached, fails the request with an error naming
 *   the proxy and the status or cause; a proxy URL of another scheme (socks5, https) is refused
 *   when the configuration is loaded, never silently bypassed.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';

const tunnelTimeoutMs = 30_000;

/** Parses and checks a kubeconfig `proxy-url`. */
export function parseProxyUrl(proxyUrl: string): URL {
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw new Error(`kubeconfig proxy-url ${JSON.stringify(proxyUrl)} is not a URL`);
  }
  if (url.protocol !== 'http:') {
    throw new Error(`kubeconfig proxy-url ${url.protocol}//${url.host}: only http:// proxies are supported`);
  }
  return url;
}

/** The Proxy-Authorization header for a proxy URL carrying user and password, if any. */
export function proxyAuthorization(proxy: URL): Record<string, string> {
  if (!proxy.username && !proxy.password) return {};
  const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return { 'Proxy-Authorization': `Basic ${Buffer.from(credentials).toString('base64')}` };
}

/** An https agent whose connections are CONNECT tunnels through `proxy`. */
export class TunnelAgent extends https.Agent {
  constructor(
    private readonly proxy: URL,
    options: https.AgentOptions,
  ) {
    super(options);
  }

  override createConnection(options: https.RequestOptions, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    const done = callback ?? (() => {});
    // Node's agent accepts a failure without a socket; its typing does not say so.
    const fail = (err: Error) => done(err, undefined as unknown as Duplex);
    const target = `${options.host ?? 'localhost'}:${options.port ?? 443}`;
    const connect = http.request({
      host: this.proxy.hostname,
      port: this.proxy.port || 80,
      method: 'CONNECT',
      path: target,
      headers: { Host: target, ...proxyAuthorization(this.proxy) },
      agent: false,
      timeout: tunnelTimeoutMs,
    });
    connect.once('connect', (res, socket, head) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        fail(new Error(`proxy ${this.proxy.host} refused the tunnel to ${target}: HTTP ${res.statusCode}`));
        return;
      }
      if (head.length > 0) socket.unshift(head);
      done(null, tls.connect({ ...(options as tls.ConnectionOptions), socket }));
    });
    connect.once('timeout', () => connect.destroy(new Error(`no answer within ${tunnelTimeoutMs} ms`)));
    connect.once('error', (err) => fail(new Error(`proxy ${this.proxy.host}: ${err.message}`)));
    connect.end();
    return undefined;
  }
}
