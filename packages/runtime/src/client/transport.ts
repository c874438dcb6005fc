/**
 * HTTP transport to one API server: connection settings from a kubeconfig (KUBECONFIG,
 * ~/.kube/config) or from the in-cluster ServiceAccount, one keep-alive connection pool,
 * credentials refreshed periodically (rotating ServiceAccount tokens and exec plugins keep
 * working).
 *
 * Guarantees: the request body and response are JSON; a response with a non-2xx code is
 * returned with its code, never thrown here (the client turns it into an ApiError); a request
 * can be aborted through its signal; streaming responses are delivered line by line.
 */
import { KubeConfig } from '@kubernetes/client-node';
import http from 'node:http';
import https from 'node:https';

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
  private readonly agent: http.Agent;
  private headers: Record<string, string> = {};
  private headersFetchedAt = 0;

  private constructor(
    private readonly config: KubeConfig,
    server: string,
    tls: https.AgentOptions,
  ) {
    this.url = new URL(server);
    const agentOptions = { keepAlive: true, maxSockets: 256, ...tls };
    this.agent = this.url.protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  }

  /** Loads KUBECONFIG / ~/.kube/config, or the in-cluster ServiceAccount when neither exists. */
  static async load(kubeconfigPath?: string): Promise<Transport> {
    const config = new KubeConfig();
    if (kubeconfigPath) config.loadFromFile(kubeconfigPath);
    else config.loadFromDefault();
    const cluster = config.getCurrentCluster();
    if (!cluster) throw new Error('no Kubernetes cluster configured: set KUBECONFIG or run in a cluster');
    const options: https.RequestOptions = {};
    await config.applyToHTTPSOptions(options);
    const tls: https.AgentOptions = {};
    if (options.ca) tls.ca = options.ca;
    if (options.cert) tls.cert = options.cert;
    if (options.key) tls.key = options.key;
    if (options.rejectUnauthorized !== undefined) tls.rejectUnauthorized = options.rejectUnauthorized;
    const transport = new Transport(config, cluster.server, tls);
    transport.storeHeaders(options.headers);
    return transport;
  }

  get server(): string {
    return this.url.origin;
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

  private async open(req: HttpRequest): Promise<http.IncomingMessage> {
    const headers = await this.authHeaders();
    const url = new URL(req.path, this.url);
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const payload = req.body === undefined ? undefined : Buffer.from(typeof req.body === 'string' ? req.body : JSON.stringify(req.body));
    const requestHeaders: Record<string, string> = { ...headers, Accept: req.accept ?? 'application/json', 'User-Agent': 'iot-operator-runtime' };
    if (payload) {
      requestHeaders['Content-Type'] = req.contentType ?? 'application/json';
      requestHeaders['Content-Length'] = String(payload.length);
    }
    const lib = url.protocol === 'https:' ? https : http;
    const timeoutMs = req.timeoutMs ?? 60_000;
    return new Promise((resolve, reject) => {
      const request = lib.request(url, { method: req.method, headers: requestHeaders, agent: this.agent, signal: req.signal }, resolve);
      request.on('error', reject);
      if (timeoutMs > 0) {
        request.setTimeout(timeoutMs, () => request.destroy(new Error(`request timed out after ${timeoutMs} ms`)));
      }
      request.end(payload);
    });
  }

  private async authHeaders(): Promise<Record<string, string>> {
    if (Date.now() - this.headersFetchedAt > credentialRefreshMs) {
      const options: https.RequestOptions = {};
      await this.config.applyToHTTPSOptions(options);
      this.storeHeaders(options.headers);
    }
    return this.headers;
  }

  private storeHeaders(headers: http.OutgoingHttpHeaders | readonly string[] | undefined): void {
    const flat: Record<string, string> = {};
    if (headers && !Array.isArray(headers)) {
      for (const [k, v] of Object.entries(headers)) if (v !== undefined) flat[k] = String(v);
    }
    this.headers = flat;
    this.headersFetchedAt = Date.now();
  }
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
