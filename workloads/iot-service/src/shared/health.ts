/**
 * The health server every component runs on the operator's health port (8081).
 *
 * Guarantees: `GET /healthz` answers 200 `{"status":"ok","component","version"}` while the process
 * serves at all (the liveness probe); `GET /readyz` runs every readiness check at once, each
 * bounded by `checkTimeoutMs` (below the probes' 1 s timeout), and answers 200 when all pass,
 * else 503, with `{"ready", "checks": {name: "ok" | error message}}`; once `stopping()` it answers
 * 503 without running checks, so the pod leaves its Services before it exits. With `metrics`,
 * `GET /metrics` answers its Prometheus text (`text/plain; version=0.0.4`). Any other path is
 * 404.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sendJson } from './http.ts';
import { closeServer, listenOn } from './net.ts';

export type ReadinessCheck = () => Promise<void>;

export interface HealthOptions {
  component: string;
  version: string;
  checks: Readonly<Record<string, ReadinessCheck>>;
  checkTimeoutMs?: number;
  /** The Prometheus text of `/metrics`. */
  metrics?: () => string;
}

export interface HealthServer {
  server: Server;
  port: number;
  /** From now on /readyz answers 503. */
  stopping(): void;
  close(): Promise<void>;
}

export async function runChecks(
  checks: Readonly<Record<string, ReadinessCheck>>,
  timeoutMs: number,
): Promise<{ ready: boolean; checks: Record<string, string> }> {
  const results = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        await Promise.race([check(), timeout]);
        return [name, 'ok'] as const;
      } catch (error) {
        return [name, error instanceof Error ? error.message : String(error)] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return { ready: results.every(([, result]) => result === 'ok'), checks: Object.fromEntries(results) };
}

export async function startHealthServer(options: HealthOptions, listen: { host: string; port: number }): Promise<HealthServer> {
  let stopping = false;
  const timeoutMs = options.checkTimeoutMs ?? 800;
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: 'method not allowed' });
    if (path === '/healthz') {
      return sendJson(res, 200, { status: 'ok', component: options.component, version: options.version });
    }
    if (path === '/readyz') {
      if (stopping) return sendJson(res, 503, { ready: false, checks: { shutdown: 'stopping' } });
      void runChecks(options.checks, timeoutMs).then((report) => sendJson(res, report.ready ? 200 : 503, report));
      return;
    }
    if (path === '/metrics' && options.metrics) {
      const text = options.metrics();
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4', 'Content-Length': Buffer.byteLength(text) });
      return void res.end(text);
    }
    sendJson(res, 404, { error: 'not found' });
  });
  await listenOn(server, listen);
  return {
    server,
    port: (server.address() as AddressInfo).port,
    stopping: () => {
      stopping = true;
    },
    close: () => closeServer(server),
  };
}
