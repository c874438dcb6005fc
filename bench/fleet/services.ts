/**
 * The processes of the `fleet` scenario (scenarios/fleet.ts), each on its own on this machine:
 * PostgreSQL, a NATS Server with JetStream, core, the gateway and the device processes.
 *
 * Guarantees:
 * - `startPostgres` runs this machine's PostgreSQL (/usr/lib/postgresql/<version>/bin, as the
 *   database image does: role and database `iot`, scram-sha-256 over TCP) with its data in a new
 *   directory, on 127.0.0.1 at a free port; as root it runs as the `postgres` user, which
 *   PostgreSQL requires. `seedDevices` makes the schema and registers devices through the store's
 *   own `createDevice`, each with one of a few scrypt hashes made by core's `hashPassword`.
 * - `startBroker` is the data plane tests' NATS Server (test/nats-server.ts) with its pid.
 * - `startCore` runs bench/fleet/core.ts and resolves once its port accepts connections.
 * - `GatewayProcess` runs the gateway as its image does — the bundle images/bundle.ts makes,
 *   `node gateway.mjs`, with config.yml and its environment — serving mqtt and mqtts on its fixed
 *   ports 1883 and 8883 and /metrics on 8081; `start` resolves with the milliseconds from the
 *   spawn to /readyz answering 200; `metrics` waits up to a minute for /metrics, and
 *   `healthLatencyMs` times one GET /healthz. `portsFree` fails naming a fixed port another process holds.
 *   Its output goes through a pipe, as a container runtime takes it, into a log file.
 * - `DeviceProcess` forks bench/fleet/devices.ts and sends it requests, each answered once.
 * - `raiseOpenFiles` makes sure this process (and so every process it starts) may open `needed`
 *   files: it raises the soft limit to the hard one (prlimit) when the soft one is lower, and
 *   fails saying so when the hard one is lower too.
 * - Every log goes to `logDir`; `stop` of each ends its process (SIGTERM, then SIGKILL after 10 s).
 *   `killStarted` SIGKILLs every process started here that has not exited (the runner's Ctrl-C).
 */
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, createWriteStream, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { hashPassword } from '../../workloads/iot-service/src/core/passwords.ts';
import { createLogger } from '../../workloads/iot-service/src/shared/log.ts';
import { tcpReachable } from '../../workloads/iot-service/src/shared/net.ts';
import { GATEWAY_MQTT_PORT, GATEWAY_MQTTS_PORT, HEALTH_PORT } from '../../workloads/iot-service/src/shared/ports.ts';
import { createPool, ensureSchema, PostgresStore } from '../../workloads/iot-service/src/shared/store.ts';
import type { DeviceCredentials } from '../../workloads/iot-service/src/simulator/types.ts';
import { startNatsServer, type NatsServer } from '../../workloads/iot-service/test/nats-server.ts';
import { bundle } from '../../images/bundle.ts';
import { mapLimit, repoRoot, sleep } from '../lib/kube.ts';
import { childPids } from '../lib/proc.ts';
import type { DeviceReply, DeviceRequest } from './devices.ts';

export const HOST = '127.0.0.1';

/** Processes started here and not yet exited. */
const started = new Set<number>();

function track(child: ChildProcess): ChildProcess {
  if (child.pid === undefined) throw new Error(`could not start ${child.spawnfile}`);
  const pid = child.pid;
  started.add(pid);
  child.once('exit', () => started.delete(pid));
  return child;
}

export function killStarted(): void {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function waitReachable(port: number, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await tcpReachable({ host: HOST, port }, 1_000).then(() => true, () => false))) {
    if (Date.now() > deadline) throw new Error(`${what} did not accept connections on ${HOST}:${port} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** Ends `child`: SIGTERM, SIGKILL after `graceMs`; resolves once it exited. */
async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

function openFilesLimits(): { soft: number; hard: number } {
  const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files')) ?? '';
  const [soft, hard] = line.replace('Max open files', '').trim().split(/\s+/).map((v) => (v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v)));
  return { soft: soft ?? 0, hard: hard ?? 0 };
}

export function raiseOpenFiles(needed: number): { soft: number; hard: number; raised: boolean } {
  const before = openFilesLimits();
  if (before.soft >= needed) return { ...before, raised: false };
  if (before.hard < needed) throw new Error(`the fleet needs ${needed} open files in one process; the hard limit is ${before.hard} (raise it as root: ulimit -Hn ${needed})`);
  execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${before.hard}:${before.hard}`]);
  return { ...openFilesLimits(), raised: true };
}

export interface Postgres {
  port: number;
  pid: number;
  version: string;
  stop(): Promise<void>;
}

export async function startPostgres(logDir: string, password: string): Promise<Postgres> {
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error('no PostgreSQL in /usr/lib/postgresql/<version>/bin');
  const bin = `/usr/lib/postgresql/${versions[0]}/bin`;
  const root = mkdtempSync(path.join(os.tmpdir(), 'fleet-pg-'));
  const owner = process.getuid?.() === 0 ? { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) } : {};
  if (owner.uid !== undefined) chownSync(root, owner.uid, owner.gid!);
  const pwfile = path.join(root, 'pwfile');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (owner.uid !== undefined) chownSync(pwfile, owner.uid, owner.gid!);
  const data = path.join(root, 'data');
  execFileSync(`${bin}/initdb`, [`--pgdata=${data}`, '--username=iot', `--pwfile=${pwfile}`, '--auth-local=trust', '--auth-host=scram-sha-256', '--encoding=UTF8', '--locale=C.UTF-8'], { ...owner, stdio: ['ignore', 'ignore', 'pipe'] });
  const port = await freePort();
  const logFd = openSync(path.join(logDir, 'fleet-postgres.log'), 'w');
  const child = track(spawn(`${bin}/postgres`, ['-D', data, '-c', `listen_addresses=${HOST}`, '-c', `port=${port}`, '-c', `unix_socket_directories=${root}`], { ...owner, stdio: ['ignore', logFd, logFd] }));
  closeSync(logFd);
  await waitReachable(port, 'PostgreSQL');
  const admin = new pg.Client({ host: HOST, port, user: 'iot', password, database: 'postgres' });
  await admin.connect();
  await admin.query('CREATE DATABASE iot');
  await admin.end();
  return {
    port,
    pid: child.pid!,
    version: versions[0]!,
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT'); // fast shutdown
      await exited;
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Registers `devices` through the store; their passwords must be among `passwords`, each hashed once here. */
export async function seedDevices(port: number, password: string, devices: readonly DeviceCredentials[], passwords: readonly string[]): Promise<void> {
  const pool = createPool({ host: HOST, port }, password, createLogger('seed', () => undefined));
  try {
    await ensureSchema(pool);
    const store = new PostgresStore(pool);
    const hashes = new Map(await Promise.all(passwords.map(async (p) => [p, await hashPassword(p)] as const)));
    await mapLimit(devices, 5, async (device) => {
      const hash = hashes.get(device.password);
      if (hash === undefined) throw new Error(`device ${device.id}: its password is not one of those hashed`);
      if (!(await store.createDevice(device.id, hash))) throw new Error(`device ${device.id} exists`);
    });
  } finally {
    await pool.end();
  }
}

export interface Broker {
  server: NatsServer;
  pid: number;
  close(): Promise<void>;
}

export async function startBroker(password: string): Promise<Broker> {
  const before = new Set(childPids(process.pid, 'nats-server'));
  const server = await startNatsServer(password);
  const pid = childPids(process.pid, 'nats-server').find((p) => !before.has(p));
  if (pid === undefined) throw new Error('the nats-server just started is not a child of this process');
  started.add(pid);
  return {
    server,
    pid,
    close: async () => {
      await server.close();
      started.delete(pid);
    },
  };
}

export interface Core {
  pid: number;
  stop(): Promise<void>;
}

export async function startCore(env: NodeJS.ProcessEnv, port: number, logDir: string): Promise<Core> {
  const logFd = openSync(path.join(logDir, 'fleet-core.log'), 'w');
  const child = track(spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'bench/fleet/core.ts')], { cwd: repoRoot, env, stdio: ['ignore', logFd, logFd] }));
  closeSync(logFd);
  await waitReachable(port, 'core');
  return { pid: child.pid!, stop: () => stopChild(child) };
}

/** Fails naming a fixed port of the gateway that another process holds. */
export async function portsFree(): Promise<void> {
  for (const port of [GATEWAY_MQTT_PORT, GATEWAY_MQTTS_PORT, HEALTH_PORT]) {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error) => reject(new Error(`port ${port} is in use; the gateway listens on its fixed ports 1883, 8883 and 8081, as in its pod: ${error.message}`)));
      server.listen(port, '0.0.0.0', () => server.close(() => resolve()));
    });
  }
}

/** The bundled gateway (images/bundle.ts), written into `dir`. */
export async function bundleGateway(dir: string): Promise<string> {
  const entries = await bundle('iot-service', dir);
  const gateway = entries.find((file) => path.basename(file) === 'gateway.mjs');
  if (!gateway) throw new Error(`the iot-service bundle has no gateway.mjs: ${entries.join(', ')}`);
  return gateway;
}

export class GatewayProcess {
  private child: ChildProcess | undefined;
  private readonly log;

  constructor(
    private readonly entry: string,
    private readonly env: NodeJS.ProcessEnv,
    logDir: string,
  ) {
    this.log = createWriteStream(path.join(logDir, 'fleet-gateway.log'));
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Spawns the gateway; resolves with the milliseconds until /readyz answered 200. */
  async start(timeoutMs = 30_000): Promise<number> {
    const t0 = performance.now();
    const child = track(spawn(process.execPath, [this.entry], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] }));
    this.child = child;
    child.stdout!.pipe(this.log, { end: false });
    child.stderr!.pipe(this.log, { end: false });
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode} while starting (see its log)`);
      const ready = await fetch(`http://${HOST}:${HEALTH_PORT}/readyz`, { signal: AbortSignal.timeout(1_000) }).then((r) => r.status === 200, () => false);
      if (ready) return performance.now() - t0;
      if (performance.now() - t0 > timeoutMs) throw new Error(`the gateway was not ready within ${timeoutMs} ms (see its log)`);
      await sleep(20);
    }
  }

  /** Its /metrics text, waiting up to `timeoutMs` for it (an overloaded gateway answers late). */
  async metrics(timeoutMs = 60_000): Promise<string> {
    const response = await fetch(`http://${HOST}:${HEALTH_PORT}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
    return response.text();
  }

  /** Milliseconds until /healthz (the liveness probe's path) answered 200, or `timeoutMs` when it did not by then. */
  async healthLatencyMs(timeoutMs: number): Promise<number> {
    const t0 = performance.now();
    const ok = await fetch(`http://${HOST}:${HEALTH_PORT}/healthz`, { signal: AbortSignal.timeout(timeoutMs) }).then((r) => r.status === 200, () => false);
    return ok ? performance.now() - t0 : timeoutMs;
  }

  /** SIGKILL, as a node losing the pod would; resolves once it exited. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    if (this.child) await stopChild(this.child, 25_000);
    this.log.end();
  }
}

export class DeviceProcess {
  private readonly child: ChildProcess;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  /** Connected devices of each set, as last reported, and when they were counted. */
  readonly connected: Record<string, number> = {};
  reportedAt = 0;

  constructor(
    readonly name: string,
    logDir: string,
  ) {
    const logFd = openSync(path.join(logDir, `fleet-${name}.log`), 'w');
    this.child = track(fork(path.join(repoRoot, 'bench/fleet/devices.ts'), [], { cwd: repoRoot, execArgv: ['--import', 'tsx'], stdio: ['ignore', logFd, logFd, 'ipc'] }));
    closeSync(logFd);
    this.child.on('message', (reply: DeviceReply) => {
      if ('event' in reply) {
        Object.assign(this.connected, reply.connected);
        this.reportedAt = reply.at;
        return;
      }
      const waiting = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      if ('error' in reply) waiting?.reject(new Error(`${name}: ${reply.error}`));
      else waiting?.resolve(reply.result);
    });
    this.child.on('exit', (code, signal) => {
      for (const waiting of this.pending.values()) waiting.reject(new Error(`${name} exited (${code ?? signal}) before answering`));
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  request<T>(request: DeviceRequest): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.child.send({ id, request });
    });
  }

  stop(): Promise<void> {
    this.child.disconnect();
    return stopChild(this.child);
  }
}

/** A directory that is removed by `remove`. */
export function scratchDir(prefix: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
