/**
 * The fault-injecting API proxy: an HTTPS proxy on 127.0.0.1 in front of a real API server, so
 * that end-to-end tests can make the API server slow, silent, rude or forgetful on purpose and
 * assert what an operator does about it.
 *
 * Guarantees:
 * - `FaultProxy.start({ kubeconfigPath })` forwards to the cluster of that kubeconfig with its
 *   credentials (client certificate or token); the proxy serves TLS with its own self-signed
 *   certificate for 127.0.0.1 (made once per process with the `openssl` command).
 * - `kubeconfigFor(client)` opens a listener of its own for `client` (one per name) and writes a
 *   kubeconfig that trusts the proxy's certificate and carries no credentials; every request
 *   arriving there is recorded and matched as coming from `client`, so one operator process can
 *   be disturbed while another is left alone.
 * - Without an injected fault a request is forwarded unchanged (body, headers, streaming) and the
 *   answer relayed unchanged.
 * - `inject(match, fault, { times })` applies `fault` to the next `times` requests (default:
 *   every one) that `match` selects (see fault-rules.ts); rules are tried in the order injected
 *   and the first whose budget is not spent applies. Faults: `delay` (forward after a pause),
 *   `hang` (never answer; the connection stays open), `reset` (the connection closed
 *   unanswered: the client sees ECONNRESET),
 *   `status` (answer with a metav1.Status of that code and reason, with Retry-After when asked),
 *   `endWatch` (end a watch stream after N events), `stallWatch` (forward N events, then nothing
 *   more while keeping the connection open).
 * - `requests` records every request in arrival order: time, client, method, path, verb,
 *   resource, the fault applied, the status answered and, for watches, how many events were
 *   forwarded.
 * - `stop()` closes every listener and every connection, hung and stalled ones included.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { describeApiRequest, matchesRequest, type ApiRequestInfo, type ApiVerb, type RequestMatch } from './fault-rules.ts';

const run = promisify(execFile);

export type Fault =
  | { kind: 'delay'; ms: number }
  | { kind: 'hang' }
  | { kind: 'reset' }
  | { kind: 'status'; code: number; reason: string; message: string; retryAfterSeconds?: number }
  | { kind: 'endWatch'; afterEvents: number }
  | { kind: 'stallWatch'; afterEvents: number };

const defaultReasons: Record<number, string> = { 410: 'Gone', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable' };

/** Constructors of the faults the proxy injects. */
export const faults = {
  delay: (ms: number): Fault => ({ kind: 'delay', ms }),
  hang: (): Fault => ({ kind: 'hang' }),
  reset: (): Fault => ({ kind: 'reset' }),
  status: (code: number, options: { reason?: string; message?: string; retryAfterSeconds?: number } = {}): Fault => ({
    kind: 'status',
    code,
    reason: options.reason ?? defaultReasons[code] ?? 'Unknown',
    message: options.message ?? `injected by the fault proxy: HTTP ${code}`,
    retryAfterSeconds: options.retryAfterSeconds,
  }),
  endWatch: (afterEvents = 0): Fault => ({ kind: 'endWatch', afterEvents }),
  stallWatch: (afterEvents = 0): Fault => ({ kind: 'stallWatch', afterEvents }),
};

export interface RecordedRequest {
  /** Arrival at the proxy, ms since the epoch. */
  at: number;
  client: string;
  method: string;
  path: string;
  query: string;
  verb: ApiVerb;
  group: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  fault?: Fault['kind'];
  /** The status code answered; undefined while unanswered (hung) or when the connection was reset. */
  status?: number;
  answeredAt?: number;
  /** Watch events forwarded (bookmarks included). */
  events?: number;
}

export interface InjectedFault {
  /** Requests this fault has been applied to. */
  readonly hits: number;
  remove(): void;
}

interface Rule {
  match: RequestMatch;
  fault: Fault;
  remaining: number;
  hits: number;
  removed: boolean;
}

interface Upstream {
  server: URL;
  agent: https.Agent | http.Agent;
  headers: Record<string, string>;
}

let servingCertificate: Promise<{ cert: string; key: string }> | undefined;

/** A self-signed certificate for 127.0.0.1, made once per process. */
function proxyCertificate(): Promise<{ cert: string; key: string }> {
  servingCertificate ??= (async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fault-proxy-'));
    const [certFile, keyFile] = [path.join(dir, 'cert.pem'), path.join(dir, 'key.pem')];
    await run('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', keyFile, '-out', certFile, '-days', '7', '-subj', '/CN=fault-proxy', '-addext', 'subjectAltName=IP:127.0.0.1',
    ]);
    return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
  })();
  return servingCertificate;
}

async function loadUpstream(kubeconfigPath: string): Promise<Upstream> {
  const config = new KubeConfig();
  config.loadFromFile(kubeconfigPath);
  const cluster = config.getCurrentCluster();
  if (!cluster) throw new Error(`${kubeconfigPath}: no cluster in the current context`);
  const options: https.RequestOptions = {};
  await config.applyToHTTPSOptions(options);
  const server = new URL(cluster.server);
  const tls: https.AgentOptions = { keepAlive: true };
  if (options.ca) tls.ca = options.ca;
  if (options.cert) tls.cert = options.cert;
  if (options.key) tls.key = options.key;
  if (options.rejectUnauthorized !== undefined) tls.rejectUnauthorized = options.rejectUnauthorized;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.headers ?? {})) if (v !== undefined) headers[k.toLowerCase()] = String(v);
  return { server, agent: server.protocol === 'https:' ? new https.Agent(tls) : new http.Agent(tls), headers };
}

const hopByHop = ['connection', 'keep-alive', 'transfer-encoding', 'host'];

function withoutHopByHop(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = { ...headers };
  for (const name of hopByHop) delete out[name];
  return out;
}

export class FaultProxy {
  readonly requests: RecordedRequest[] = [];
  private readonly rules: Rule[] = [];
  private readonly listeners = new Map<string, { server: https.Server; port: number }>();
  /** Responses the proxy holds open on purpose (hung requests, stalled watches). */
  private readonly held = new Set<http.ServerResponse>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly dir: Promise<string>;
  private stopped = false;

  private constructor(
    private readonly upstream: Upstream,
    private readonly certificate: { cert: string; key: string },
  ) {
    this.dir = mkdtemp(path.join(os.tmpdir(), 'fault-proxy-kubeconfig-'));
  }

  /** A proxy in front of the cluster of `kubeconfigPath`, using its credentials. */
  static async start(options: { kubeconfigPath: string }): Promise<FaultProxy> {
    return new FaultProxy(await loadUpstream(options.kubeconfigPath), await proxyCertificate());
  }

  /** The URL of `client`'s listener (opened on first use). */
  async url(client = 'default'): Promise<string> {
    return `https://127.0.0.1:${await this.listen(client)}`;
  }

  /** A kubeconfig file whose requests go through this proxy as `client`. */
  async kubeconfigFor(client = 'default'): Promise<string> {
    const server = await this.url(client);
    const file = path.join(await this.dir, `${client.replace(/[^a-zA-Z0-9_.-]/g, '_')}.kubeconfig.yaml`);
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'fault-proxy', cluster: { server, 'certificate-authority-data': Buffer.from(this.certificate.cert).toString('base64') } }],
      users: [{ name: client, user: {} }],
      contexts: [{ name: 'fault-proxy', context: { cluster: 'fault-proxy', user: client } }],
      'current-context': 'fault-proxy',
    };
    await writeFile(file, stringify(config), { mode: 0o600 });
    return file;
  }

  /** Applies `fault` to the next `times` requests `match` selects (default: all of them). */
  inject(match: RequestMatch, fault: Fault, options: { times?: number } = {}): InjectedFault {
    const rule: Rule = { match, fault, remaining: options.times ?? Infinity, hits: 0, removed: false };
    this.rules.push(rule);
    return {
      get hits() {
        return rule.hits;
      },
      remove: () => {
        rule.removed = true;
        const index = this.rules.indexOf(rule);
        if (index >= 0) this.rules.splice(index, 1);
      },
    };
  }

  /** Removes every injected fault (held connections stay held until `stop` or `release`). */
  clearFaults(): void {
    for (const rule of this.rules) rule.removed = true;
    this.rules.length = 0;
  }

  /** Closes the connections held open by `hang` and `stallWatch` faults. */
  releaseHeld(): void {
    for (const res of this.held) res.destroy();
    this.held.clear();
  }

  /** The recorded requests `match` selects. */
  requestsMatching(match: RequestMatch): RecordedRequest[] {
    return this.requests.filter((r) => matchesRequest(match, describeApiRequest(r.method, `${r.path}${r.query}`, r.client)));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.clearFaults();
    this.releaseHeld();
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all(
      [...this.listeners.values()].map(
        ({ server }) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          }),
      ),
    );
    this.upstream.agent.destroy();
  }

  private async listen(client: string): Promise<number> {
    const existing = this.listeners.get(client);
    if (existing) return existing.port;
    const server = https.createServer({ cert: this.certificate.cert, key: this.certificate.key }, (req, res) => this.handle(client, req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    this.listeners.set(client, { server, port });
    return port;
  }

  private takeFault(info: ApiRequestInfo): Fault | undefined {
    for (const rule of this.rules) {
      if (rule.removed || rule.remaining <= 0 || !matchesRequest(rule.match, info)) continue;
      rule.remaining--;
      rule.hits++;
      return rule.fault;
    }
    return undefined;
  }

  private handle(client: string, req: http.IncomingMessage, res: http.ServerResponse): void {
    const info = describeApiRequest(req.method ?? 'GET', req.url ?? '/', client);
    const fault = this.stopped ? undefined : this.takeFault(info);
    const record: RecordedRequest = {
      at: Date.now(),
      client,
      method: info.method,
      path: info.path,
      query: info.query.toString() ? `?${info.query}` : '',
      verb: info.verb,
      group: info.group,
      resource: info.resource,
      subresource: info.subresource,
      namespace: info.namespace,
      name: info.name,
      fault: fault?.kind,
    };
    this.requests.push(record);
    const answered = (code: number) => {
      record.status = code;
      record.answeredAt = Date.now();
    };
    switch (fault?.kind) {
      case 'hang':
        this.hold(res);
        return;
      case 'reset':
        // A TLS socket cannot send a TCP RST; closing it unanswered is what the client sees
        // of a reset either way: ECONNRESET ("socket hang up").
        req.socket.destroy();
        return;
      case 'status': {
        const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json' };
        if (fault.retryAfterSeconds !== undefined) headers['retry-after'] = String(fault.retryAfterSeconds);
        answered(fault.code);
        res.writeHead(fault.code, headers);
        res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: fault.message, reason: fault.reason, code: fault.code }));
        return;
      }
      case 'delay': {
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          if (!res.destroyed) this.forward(req, res, info, record, answered);
        }, fault.ms);
        this.timers.add(timer);
        return;
      }
      default:
        this.forward(req, res, info, record, answered, fault);
    }
  }

  private hold(res: http.ServerResponse): void {
    this.held.add(res);
    res.once('close', () => this.held.delete(res));
  }

  private forward(req: http.IncomingMessage, res: http.ServerResponse, info: ApiRequestInfo, record: RecordedRequest, answered: (code: number) => void, watchFault?: Fault): void {
    const target = new URL(req.url ?? '/', this.upstream.server);
    const headers = withoutHopByHop(req.headers);
    if (this.upstream.headers.authorization) delete headers.authorization;
    Object.assign(headers, this.upstream.headers);
    const lib = target.protocol === 'https:' ? https : http;
    const upstreamRequest = lib.request(target, { method: req.method, headers, agent: this.upstream.agent }, (upstream) => {
      const code = upstream.statusCode ?? 502;
      answered(code);
      if (info.verb === 'watch' && code === 200) {
        const out = withoutHopByHop(upstream.headers);
        delete out['content-length'];
        res.writeHead(code, out);
        // Headers go out at once, as the API server sends them when a watch starts.
        res.flushHeaders();
        this.relayWatch(upstream, res, record, watchFault);
        return;
      }
      res.writeHead(code, withoutHopByHop(upstream.headers));
      upstream.pipe(res);
    });
    upstreamRequest.on('error', (err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      answered(502);
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'ServiceUnavailable', code: 502, message: `fault proxy: upstream failed: ${err.message}` }));
    });
    res.once('close', () => {
      if (!res.writableFinished) upstreamRequest.destroy();
    });
    req.pipe(upstreamRequest);
  }

  /** Relays a watch stream event by event, ending or stalling it when a watch fault says so. */
  private relayWatch(upstream: http.IncomingMessage, res: http.ServerResponse, record: RecordedRequest, fault?: Fault): void {
    const limit = fault?.kind === 'endWatch' || fault?.kind === 'stallWatch' ? fault.afterEvents : Infinity;
    record.events = 0;
    let pending = '';
    const cut = () => {
      upstream.destroy();
      if (fault?.kind === 'endWatch') res.end();
      else this.hold(res);
    };
    if (limit === 0) return cut();
    upstream.setEncoding('utf8');
    upstream.on('data', (chunk: string) => {
      pending += chunk;
      let newline = pending.indexOf('\n');
      while (newline >= 0) {
        res.write(pending.slice(0, newline + 1));
        pending = pending.slice(newline + 1);
        record.events!++;
        if (record.events! >= limit) return cut();
        newline = pending.indexOf('\n');
      }
    });
    upstream.on('end', () => res.end(pending));
    upstream.on('error', () => res.destroy());
  }
}
