/**
 * HTTP transport to one API server: connection settings from a kubeconfig (KUBECONFIG,
 * ~/.kube/config) or from the in-cluster ServiceAccount, one keep-alive connection pool,
 * credentials refreshed periodically (rotating ServiceAccount tokens and exec plugins keep
 * working).
 *
 * Guarantees: the request body and response are JSON; a response with a non-2xx code is
 * returned with its code, never thrown here (the client turns it into an ApiError); a request
 * can be aborted through its signal; streaming responses are delivered line by line.
 * The cluster's `tls-server-name` is the name the server certificate is checked against (and
 * sent as SNI); its `proxy-url` is the HTTP proxy every connection goes through (see proxy.ts).
 * A 401 re-reads the credentials from their source (kubeconfig file, token file, exec plugin,
 * in-cluster token, client certificate and key files) and, when they changed, sends the request
 * once more with the new ones (new connections for a new certificate); a 401 that persists is
 * returned as it is.
 */
import http from 'node:http';
import https from 'node:https';
import { urlToHttpOptions } from 'node:url';
import { loadConnection, type Credentials, type Headers } from './kubeconfig.ts';
import { parseProxyUrl, proxyAuthorization, TunnelAgent } from './proxy.ts';

export interface HttpRequest {
  method: string;
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** Abort a non-streaming request after this many milliseconds (default 60 s). */
  timeoutMs?: number;
  /** Accept header; default `application/json` (e.g. `...;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` for metadata only). */
  accept?: string;
}

export interface HttpResponse {
  code: number;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface HttpStream {
  code: number;
  headers: http.IncomingHttpHeaders;
  /** Lines of the response body; ends when the server closes the stream. */
  lines: AsyncIterable<string>;
  /** Present when code is not 2xx: the parsed error body. */
  errorBody?: unknown;
  close(): void;
}

const credentialRefreshMs = 60_000;

export class Transport {
  private readonly url: URL;
  private agent: http.Agent;
  private readonly agentOptions: https.AgentOptions;
  private readonly proxy: URL | undefined;
  /** Set when plain-http requests are forwarded through an HTTP proxy. */
  private readonly forwardProxy: URL | undefined;
  private headers: Headers = {};
  private headersFetchedAt = 0;
  private reloading: Promise<void> | undefined;

  private constructor(
    private readonly credentials: Credentials,
    server: string,
    tls: https.AgentOptions,
    proxyUrl: string | undefined,
  ) {
    this.url = new URL(server);
    this.agentOptions = { keepAlive: true, maxSockets: 256, ...tls };
    this.proxy = proxyUrl ? parseProxyUrl(proxyUrl) : undefined;
    this.agent = this.newAgent(this.agentOptions);
    if (this.url.protocol !== 'https:') this.forwardProxy = this.proxy;
  }

  private newAgent(options: https.AgentOptions): http.Agent {
    if (this.url.protocol !== 'https:') return new http.Agent(options);
    return this.proxy ? new TunnelAgent(this.proxy, options) : new https.Agent(options);
  }

  /** Loads KUBECONFIG / ~/.kube/config, or the in-cluster ServiceAccount when neither exists. */
  static async load(kubeconfigPath?: string): Promise<Transport> {
    const connection = await loadConnection(kubeconfigPath);
    const transport = new Transport(connection.credentials, connection.server, connection.tls, connection.proxyUrl);
    transport.storeHeaders(await connection.credentials.current());
    return transport;
  }

  get server(): string {
    return this.url.origin;
  }

  /** host:port of the API server, as the client metrics label it. */
  get host(): string {
    return this.url.host;
  }

  async send(req: HttpRequest): Promise<HttpResponse> {
    const res = await this.open(req);
    const text = await readAll(res);
    return { code: res.statusCode ?? 0, headers: res.headers, body: parseJson(text) };
  }

  async stream(req: HttpRequest): Promise<HttpStream> {
    const res = await this.open({ ...req, timeoutMs: 0 });
    const code = res.statusCode ?? 0;
    if (code < 200 || code >= 300) {
      return { code, headers: res.headers, lines: emptyLines(), errorBody: parseJson(await readAll(res)), close: () => res.destroy() };
    }
    return { code, headers: res.headers, lines: splitLines(res), close: () => res.destroy() };
  }

  close(): void {
    this.agent.destroy();
  }

  /** Sends the request; on a 401 re-reads the credentials and, if they changed, sends it once more. */
  private async open(req: HttpRequest): Promise<http.IncomingMessage> {
    const used = await this.authHeaders();
    const usedAgent = this.agent;
    const res = await this.request(req, used);
    if (res.statusCode !== 401) return res;
    const renewed = await this.renewedCredentials(used, usedAgent);
    if (!renewed) return res;
    res.resume();
    return this.request(req, renewed);
  }

  private async request(req: HttpRequest, headers: Headers): Promise<http.IncomingMessage> {
    const url = new URL(req.path, this.url);
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const payload = req.body === undefined ? undefined : Buffer.from(typeof req.body === 'string' ? req.body : JSON.stringify(req.body));
    const requestHeaders: Record<string, string> = { ...headers, Accept: req.accept ?? 'application/json', 'User-Agent': 'iot-operator-runtime' };
    if (payload) {
      requestHeaders['Content-Type'] = req.contentType ?? 'application/json';
      requestHeaders['Content-Length'] = String(payload.length);
    }
    const lib = url.protocol === 'https:' ? https : http;
    const target: http.RequestOptions = this.forwardProxy
      ? { host: this.forwardProxy.hostname, port: this.forwardProxy.port || 80, path: url.href }
      : urlToHttpOptions(url);
    if (this.forwardProxy) Object.assign(requestHeaders, { Host: url.host }, proxyAuthorization(this.forwardProxy));
    const timeoutMs = req.timeoutMs ?? 60_000;
    return new Promise((resolve, reject) => {
      const request = lib.request({ ...target, method: req.method, headers: requestHeaders, agent: this.agent, signal: req.signal }, resolve);
      request.on('error', reject);
      if (timeoutMs > 0) {
        request.setTimeout(timeoutMs, () => request.destroy(new Error(`request timed out after ${timeoutMs} ms`)));
      }
      request.end(payload);
    });
  }

  private async authHeaders(): Promise<Headers> {
    if (Date.now() - this.headersFetchedAt > credentialRefreshMs) this.storeHeaders(await this.credentials.current());
    return this.headers;
  }

  /**
   * After a 401 with `used` over `usedAgent`: credentials that differ from them (headers, or a
   * client certificate on new connections), re-read from their source unless a concurrent request
   * already did; undefined when the source still yields the refused ones.
   */
  private async renewedCredentials(used: Headers, usedAgent: http.Agent): Promise<Headers | undefined> {
    const unchanged = () => sameHeaders(this.headers, used) && this.agent === usedAgent;
    if (unchanged()) {
      this.reloading ??= this.reloadCredentials().finally(() => (this.reloading = undefined));
      await this.reloading;
    }
    return unchanged() ? undefined : this.headers;
  }

  /** Fresh credentials: the kubeconfig, token and certificate files read again, exec plugins run again. */
  private async reloadCredentials(): Promise<void> {
    try {
      this.storeHeaders(await this.credentials.reload());
    } catch {
      // The source cannot be read now: the request fails with its 401 and the next one tries again.
    }
    try {
      const certificate = this.credentials.reloadClientCertificate?.();
      if (certificate && !(samePem(certificate.cert, this.agentOptions.cert) && samePem(certificate.key, this.agentOptions.key))) {
        Object.assign(this.agentOptions, certificate);
        const previous = this.agent;
        this.agent = this.newAgent(this.agentOptions);
        // Requests still on the old connections finish; then they close (watches reconnect with the new certificate).
        setTimeout(() => previous.destroy(), 60_000).unref();
      }
    } catch {
      // Unreadable certificate files (mid-rotation): the next 401 tries again.
    }
  }

  private storeHeaders(headers: Headers): void {
    this.headers = headers;
    this.headersFetchedAt = Date.now();
  }
}

function samePem(a: unknown, b: unknown): boolean {
  return String(a ?? '') === String(b ?? '');
}

function sameHeaders(a: Headers, b: Headers): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

async function readAll(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

async function* emptyLines(): AsyncIterable<string> {}

async function* splitLines(res: http.IncomingMessage): AsyncIterable<string> {
  let buffered = '';
  res.setEncoding('utf8');
  for await (const chunk of res) {
    buffered += chunk as string;
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (line) yield line;
      newline = buffered.indexOf('\n');
    }
  }
  if (buffered.trim()) yield buffered.trim();
}
