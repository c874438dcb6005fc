/**
 * The webhook server: HTTPS endpoints the API server calls for admission (validating, mutating)
 * and CRD conversion, each handler registered at its own path.
 *
 * Guarantees:
 * - HTTPS only, with the certificate and key of `certFile` / `keyFile`, read again when they
 *   change (cert-watcher.ts): new connections get the new certificate without a restart. A pair
 *   that cannot be read or used fails `start`.
 * - `listening` is true from the moment the port accepts connections until `stop`; the manager
 *   is not ready (/readyz) before.
 * - A request is answered 404 at an unregistered path, 405 unless POST, 400 unless its
 *   Content-Type is application/json, its body is JSON and a review of its webhook's kind, and
 *   413 when its body is larger than `maxRequestBytes` (default 7 MiB, controller-runtime's: an
 *   update's review carries the object twice); otherwise 200 with the review's answer.
 * - A handler has until its deadline — `handlerTimeoutMs` (default 9 s), shortened to the API
 *   server's own timeout (the `timeout` query parameter it sends, e.g. `timeout=2s`) less
 *   500 ms — to answer; past it the request is refused (admission: denied with code 500,
 *   conversion: Failure) with a message saying so, and the handler's signal is aborted. A handler
 *   never crashes the server: its exceptions become refusals (admission.ts, conversion.ts).
 * - Every request at a registered path counts in the webhook metrics (metrics.ts) under that path.
 * - `stop` first drains for `drainMs` (default 1 s): it still accepts and answers, each answer
 *   with `Connection: close`, so a client keeping its connection alive (the API server) sends its
 *   next request on it, is told to close it and opens a new one (through a Service, to another
 *   replica), instead of sending it just as the connection is closed (`connection reset by peer`).
 *   Then it stops accepting connections, closes idle ones, lets requests in flight finish (each
 *   is bounded by its deadline) — also those read from an open connection meanwhile — answering
 *   each with `Connection: close`; then closes every connection and stops watching the
 *   certificate files.
 */
import https from 'node:https';
import type http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { pino, type Logger } from 'pino';
import type { Registry } from '../metrics/prom-client.ts';
import { CertWatcher } from './cert-watcher.ts';
import { WebhookMetrics } from './metrics.ts';
import { BadReviewError, type Webhook } from './review.ts';

export interface WebhookServerOptions {
  /** host:port to listen on; port 0 picks a free port. Default `0.0.0.0:9443`, controller-runtime's port. */
  address?: string;
  /** PEM certificate (chain) and key files, e.g. tls.crt and tls.key of a mounted Secret. */
  certFile: string;
  keyFile: string;
  /** Largest request body served (default 7 MiB); larger ones are answered 413. */
  maxRequestBytes?: number;
  /** Longest a handler may take (default 9 s, under the API server's default webhook timeout of 10 s). */
  handlerTimeoutMs?: number;
  /** How often the certificate files are read even without a change notification (default 10 s). */
  certReadIntervalMs?: number;
  /** How long `stop` keeps answering, each answer closing its connection, before it closes them (default 1 s). */
  drainMs?: number;
}

export const webhookServerDefaults = {
  address: '0.0.0.0:9443',
  maxRequestBytes: 7 * 1024 * 1024,
  handlerTimeoutMs: 9_000,
  drainMs: 1_000,
} as const;

/** Time kept back from the API server's own timeout, so the refusal reaches it in time. */
const answerMarginMs = 500;

export class WebhookServer {
  private readonly webhooks = new Map<string, Webhook>();
  private readonly metrics: WebhookMetrics;
  private readonly logger: Logger;
  private server: https.Server | undefined;
  private certWatcher: CertWatcher | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  /** Set by `stop`: every answer from then on closes its connection. */
  private stopping = false;
  private stopped: Promise<void> | undefined;
  /** The answers not sent yet, to close their connections when `stop` begins. */
  private readonly unanswered = new Set<http.ServerResponse>();

  constructor(
    readonly options: WebhookServerOptions,
    context: { registry: Registry; logger?: Logger },
  ) {
    this.metrics = new WebhookMetrics(context.registry);
    this.logger = context.logger ?? pino({ level: 'silent' });
  }

  /** Serves `webhook` at `path` (e.g. `/validate-example-com-v1-widget`); one webhook per path. */
  register<Review>(path: string, webhook: Webhook<Review>): void {
    if (!path.startsWith('/')) throw new Error(`webhook path ${path} must start with /`);
    if (this.webhooks.has(path)) throw new Error(`a webhook is already registered at ${path}`);
    this.webhooks.set(path, webhook as unknown as Webhook);
    this.metrics.track(path);
  }

  get listening(): boolean {
    return this.server?.listening ?? false;
  }

  get port(): number | undefined {
    return (this.server?.address() as AddressInfo | null)?.port;
  }

  async start(): Promise<void> {
    const address = this.options.address ?? webhookServerDefaults.address;
    const colon = address.lastIndexOf(':');
    const host = colon > 0 ? address.slice(0, colon) : '0.0.0.0';
    const port = Number(address.slice(colon + 1));
    const server = https.createServer({}, (req, res) => this.track(this.serve(req, res)));
    this.certWatcher = new CertWatcher({
      certFile: this.options.certFile,
      keyFile: this.options.keyFile,
      intervalMs: this.options.certReadIntervalMs,
      logger: this.logger,
      onChange: (pair) => server.setSecureContext(pair),
    });
    server.setSecureContext(await this.certWatcher.start());
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        this.logger.info({ address: `https://${host}:${this.port}`, webhooks: [...this.webhooks.keys()] }, 'serving webhooks');
        resolve();
      });
    });
  }

  /**
   * Lets the process exit while this server listens (a server that lives as long as its process),
   * also while a client (the API server keeps its connections to webhooks alive for 90 s) holds a
   * connection open.
   */
  unref(): void {
    this.server?.unref();
    this.server?.on('connection', (socket: Socket) => socket.unref());
  }

  /** Drains (answers closing their connections), stops accepting, lets requests in flight finish, closes every connection. */
  stop(): Promise<void> {
    this.stopped ??= this.drainAndClose();
    return this.stopped;
  }

  private async drainAndClose(): Promise<void> {
    this.certWatcher?.stop();
    const server = this.server;
    if (!server) return;
    this.stopping = true;
    for (const res of this.unanswered) if (!res.headersSent) res.setHeader('Connection', 'close');
    await new Promise((resolve) => setTimeout(resolve, this.options.drainMs ?? webhookServerDefaults.drainMs));
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    // A request read from a connection after stop began is waited for too: destroying its
    // connection would reset it (the API server reports "connection reset by peer").
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
    server.closeAllConnections();
    await closed;
  }

  private track(serving: Promise<void>): void {
    this.inFlight.add(serving);
    void serving.finally(() => this.inFlight.delete(serving));
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    // Kept alive, the connection would be used again by its client just as `stop` closes it.
    if (this.stopping) res.setHeader('Connection', 'close');
    this.unanswered.add(res);
    res.on('finish', () => this.unanswered.delete(res));
    res.on('close', () => this.unanswered.delete(res));
    const url = new URL(req.url ?? '/', 'https://webhook');
    const webhook = this.webhooks.get(url.pathname);
    if (!webhook) {
      send(res, 404, `no webhook at ${url.pathname}`);
      return;
    }
    const labels = { webhook: url.pathname };
    const started = performance.now();
    this.metrics.inFlight.inc(labels);
    try {
      const code = await this.review(webhook, url, req, res);
      this.metrics.requests.inc({ ...labels, code: String(code) });
    } catch (err) {
      this.logger.error({ webhook: url.pathname, err: err instanceof Error ? err.message : String(err) }, 'webhook request failed');
      if (!res.headersSent) send(res, 500, 'internal error');
      else res.destroy();
      this.metrics.requests.inc({ ...labels, code: '500' });
    } finally {
      this.metrics.inFlight.dec(labels);
      this.metrics.latency.observe(labels, (performance.now() - started) / 1000);
    }
  }

  /** Answers one request at a registered path; resolves with the HTTP status code sent. */
  private async review(webhook: Webhook, url: URL, req: http.IncomingMessage, res: http.ServerResponse): Promise<number> {
    if (req.method !== 'POST') return send(res, 405, 'only POST is served');
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (contentType !== 'application/json') return send(res, 400, `Content-Type ${contentType || '(none)'} is not served; expected application/json`);
    const limit = this.options.maxRequestBytes ?? webhookServerDefaults.maxRequestBytes;
    const body = await readBody(req, limit);
    if (body === undefined) {
      res.setHeader('Connection', 'close');
      return send(res, 413, `the request body is larger than ${limit} bytes`);
    }
    let review: unknown;
    try {
      review = webhook.decode(JSON.parse(body.toString('utf8')));
    } catch (err) {
      if (err instanceof SyntaxError) return send(res, 400, `the request body is not JSON: ${err.message}`);
      if (err instanceof BadReviewError) return send(res, 400, err.message);
      throw err;
    }
    const deadlineMs = this.deadline(url);
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<unknown>((resolve) => {
      timer = setTimeout(() => {
        abort.abort();
        this.logger.warn({ webhook: url.pathname, deadlineMs }, 'webhook handler did not answer in time; refusing the request');
        resolve(webhook.refuse(review, { message: `the ${webhook.kind} webhook at ${url.pathname} did not answer within ${deadlineMs} ms`, code: 500, reason: 'InternalError' }));
      }, deadlineMs);
    });
    const answered = await Promise.race([webhook.answer(review, { signal: abort.signal, logger: this.logger }), timedOut]).finally(() => clearTimeout(timer));
    return send(res, 200, JSON.stringify(answered), 'application/json');
  }

  /** The handler's deadline: the configured one, or less when the API server waits less. */
  private deadline(url: URL): number {
    const configured = this.options.handlerTimeoutMs ?? webhookServerDefaults.handlerTimeoutMs;
    const callerMs = parseGoDuration(url.searchParams.get('timeout'));
    if (callerMs === undefined) return configured;
    return Math.max(1, Math.min(configured, callerMs - answerMarginMs));
  }
}

/** The body, or undefined once it exceeds `limit` bytes (by Content-Length or as it arrives). */
function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length'] ?? 0) > limit) {
      req.resume();
      return resolve(undefined);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) resolve(undefined);
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res: http.ServerResponse, code: number, body: string, contentType = 'text/plain; charset=utf-8'): number {
  res.statusCode = code;
  res.setHeader('Content-Type', contentType);
  res.end(body);
  return code;
}

/** A Go duration as the API server writes it (`10s`, `1m30s`, `500ms`) in milliseconds; undefined if absent or unreadable. */
export function parseGoDuration(text: string | null): number | undefined {
  if (!text || !/^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$/.test(text)) return undefined;
  const unitMs: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 };
  let total = 0;
  for (const [, value, , unit] of text.matchAll(/(\d+(\.\d+)?)(h|ms|m|s|us|µs|ns)/g)) total += Number(value) * unitMs[unit!]!;
  return total;
}
