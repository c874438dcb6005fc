/**
 * The operator under test, run as a separate process exactly as it would be run by hand.
 *
 * Guarantees:
 * - The command runs through `sh -c "exec <command>"`, so the process the benchmark measures
 *   (RSS, CPU, signals) is the operator itself, not a shell. With `memoryLimitMiB` it runs in a
 *   memory cgroup of that limit (cgroup.ts), as in a Pod with that memory limit; the cgroup is
 *   removed when the process exits.
 * - The operator gets KUBECONFIG, OPERATOR_NAME (the landscape) and WATCH_NAMESPACE by
 *   environment; its metrics address is a free loopback port, passed as
 *   `--metrics-bind-address 127.0.0.1:<port>` unless the command contains `{metricsAddress}`,
 *   which is then replaced.
 * - `waitReady` resolves when /readyz answers 200 and fails early, with the tail of the
 *   operator's log, if the process exits first. /readyz is asked on the metrics address, or, when
 *   the command contains `{healthAddress}`, on a second free loopback port put there (for an
 *   operator serving its probes apart from its metrics, as controller-runtime's do).
 * - `stop` sends SIGTERM and, after a grace period, SIGKILL; it resolves once the process is gone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { repoRoot, sleep, now } from './kube.ts';
import { parseMetrics, type Sample } from './prom.ts';
import { ProcSampler } from './proc.ts';
import { createMemoryCgroup, enterCommand } from './cgroup.ts';
import { OPERATOR_NODE_FLAGS } from '../../images/bundle.ts';

/** The command that runs operator `name` as its image does: the bundle, with the image's V8 flags. */
export function bundledOperatorCommand(name: string): string {
  return `node ${OPERATOR_NODE_FLAGS.join(' ')} operators/${name}/dist/${name}-operator.mjs --log-level warn`;
}

export interface OperatorStart {
  command: string;
  env: Record<string, string>;
  logFile: string;
  /** Run the operator in a memory cgroup with this limit (MiB). */
  memoryLimitMiB?: number;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

export function httpGet(url: string, timeoutMs = 10_000): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

export class OperatorProcess {
  /** Every operator process started and not yet exited (so the runner can stop them on Ctrl-C). */
  static readonly live = new Set<OperatorProcess>();
  readonly sampler: ProcSampler;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    private readonly healthPort: number,
    readonly startedAt: number,
    readonly logFile: string,
  ) {
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        OperatorProcess.live.delete(this);
        resolve((this.exitInfo = { code, signal }));
      }),
    );
    OperatorProcess.live.add(this);
    this.sampler = new ProcSampler(child.pid!).start();
  }

  static async start(options: OperatorStart): Promise<OperatorProcess> {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const withMetrics = options.command.includes('{metricsAddress}')
      ? options.command.replaceAll('{metricsAddress}', address)
      : `${options.command} --metrics-bind-address ${address}`;
    let healthPort = port;
    while (withMetrics.includes('{healthAddress}') && healthPort === port) healthPort = await freePort();
    const command = withMetrics.replaceAll('{healthAddress}', `127.0.0.1:${healthPort}`);
    const cgroup = options.memoryLimitMiB === undefined ? undefined : createMemoryCgroup(`iot-bench-${port}`, options.memoryLimitMiB);
    const fd = openSync(options.logFile, 'a');
    const startedAt = now();
    const child = spawn('/bin/sh', ['-c', cgroup ? enterCommand(cgroup, command) : `exec ${command}`], {
      cwd: repoRoot,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    if (!child.pid) {
      cgroup?.remove();
      throw new Error(`could not start the operator: ${command}`);
    }
    if (cgroup) child.once('exit', () => cgroup.remove());
    return new OperatorProcess(child, port, healthPort, startedAt, options.logFile);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  logTail(lines = 20): string {
    try {
      return readFileSync(this.logFile, 'utf8').trim().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  /** Resolves with the monotonic time /readyz first answered 200. */
  async waitReady(timeoutMs = 180_000, intervalMs = 50): Promise<number> {
    const deadline = now() + timeoutMs;
    while (now() < deadline) {
      if (!this.running) throw new Error(`the operator exited (${JSON.stringify(this.exitInfo)}) before it was ready; log:\n${this.logTail()}`);
      try {
        const r = await httpGet(`http://127.0.0.1:${this.healthPort}/readyz`, 2000);
        if (r.code === 200) return now();
      } catch {
        // not listening yet
      }
      await sleep(intervalMs);
    }
    throw new Error(`the operator was not ready within ${timeoutMs / 1000} s; log:\n${this.logTail()}`);
  }

  async metrics(names?: readonly string[]): Promise<Sample[]> {
    const r = await httpGet(`${this.url}/metrics`);
    if (r.code !== 200) throw new Error(`GET /metrics answered ${r.code}`);
    return parseMetrics(r.body, names);
  }

  signal(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  async stop(graceMs = 20_000): Promise<void> {
    this.sampler.stop();
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  async kill9(): Promise<void> {
    this.sampler.stop();
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}
