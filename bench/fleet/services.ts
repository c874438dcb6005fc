/**
 * The processes of the `fleet` scenario (scenarios/fleet.ts), each on its own on this machine:
 * the database, a NATS Server with JetStream, core, the gateway and the device processes.
 *
 * Guarantees:
 * - `startDatabase` runs the reference service's database image as scripts/iot-service-images.ts
 *   builds it (`--component database`, tagged `fleet-bench`; cached layers make a rebuild quick)
 *   with `buildah run` on this machine's network: its own entry point makes the data directory in
 *   a new volume, the schema and the component roles (iot_core …) with the given passwords, and
 *   PostgreSQL listens at a free port (PGPORT); it resolves once core's role reaches its tables
 *   there, and stops it again when that fails.
 *   Its processes are a process group of their own, so `stop` (SIGTERM to the group: the entry
 *   point's fast shutdown) and `killStarted` reach PostgreSQL too; `stop` then removes the
 *   container and the volume. `seedDevices` registers devices through the store's own
 *   `createDevice` as core's role, each with its own password hashed by core's `hashPassword`.
 * - `startBroker` is the data plane tests' NATS Server (test/nats-server.ts: the engine build's
 *   binary with the broker image's configuration, its users' passwords BROKER_PASSWORDS) with its pid.
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
 *   `killStarted` SIGKILLs every process (and process group) started here that has not exited
 *   (the runner's Ctrl-C).
 */
import { execFileSync, fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, createWriteStream, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { hashPassword } from '../../workloads/iot-service/src/core/passwords.ts';
import { DATABASE_ROLES } from '../../workloads/iot-service/src/shared/config.ts';
import { createLogger } from '../../workloads/iot-service/src/shared/log.ts';
import { tcpReachable } from '../../workloads/iot-service/src/shared/net.ts';
import { GATEWAY_MQTT_PORT, GATEWAY_MQTTS_PORT, HEALTH_PORT } from '../../workloads/iot-service/src/shared/ports.ts';
import { createPool, PostgresStore } from '../../workloads/iot-service/src/shared/store.ts';
import type { DeviceCredentials } from '../../workloads/iot-service/src/simulator/types.ts';
import { startNatsServer, type NatsServer } from '../../workloads/iot-service/test/nats-server.ts';
import { bundle } from '../../images/bundle.ts';
import { localImage } from '../../images/local-images.ts';
import { mapLimit, repoRoot, sleep } from '../lib/kube.ts';
import { freePort } from '../lib/operator.ts';
import { childPids } from '../lib/proc.ts';
import type { DeviceReply, DeviceRequest } from './devices.ts';

export const HOST = '127.0.0.1';

/** Processes started here and not yet exited; a negative number is a process group. */
const started = new Set<number>();

/** Tracks `child`, or with `group` the process group it leads (spawned `detached`). */
function track(child: ChildProcess, group = false): ChildProcess {
  if (child.pid === undefined) throw new Error(`could not start ${child.spawnfile}`);
  const id = group ? -child.pid : child.pid;
  started.add(id);
  child.once('exit', () => started.delete(id));
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

async function waitReachable(port: number, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await tcpReachable({ host: HOST, port }, 1_000).then(() => true, () => false))) {
    if (Date.now() > deadline) throw new Error(`${what} did not accept connections on ${HOST}:${port} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** Ends `child` (with `group`, the process group it leads): SIGTERM, SIGKILL after `graceMs`; resolves once it exited. */
async function stopChild(child: ChildProcess, graceMs = 10_000, group = false): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const signal = (name: NodeJS.Signals) => (group ? process.kill(-child.pid!, name) : child.kill(name));
  signal('SIGTERM');
  const timer = setTimeout(() => signal('SIGKILL'), graceMs);
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

export interface Database {
  port: number;
  /** The `buildah run` that leads the database's process group. */
  pid: number;
  /** PostgreSQL's version, as the image has it. */
  version: string;
  stop(): Promise<void>;
}

/** The database image's tag the scenario builds and runs. */
const DATABASE_VERSION = 'fleet-bench';

export async function startDatabase(logDir: string, passwords: { superuser: string; core: string; processing: string }): Promise<Database> {
  const logFile = path.join(logDir, 'fleet-database.log');
  const logFd = openSync(logFile, 'w');
  let child: ChildProcess;
  let container: string;
  let volume: string;
  let port: number;
  let version: string;
  try {
    const built = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/iot-service-images.ts', '--version', DATABASE_VERSION, '--component', 'database', '--build-only'], { cwd: repoRoot, stdio: ['ignore', logFd, logFd] });
    if (built.status !== 0) throw new Error(`building the database image failed (see ${logFile})`);
    container = execFileSync('buildah', ['from', '--pull-never', localImage('database', DATABASE_VERSION)], { encoding: 'utf8' }).trim();
    version = execFileSync('buildah', ['run', '--isolation', 'chroot', container, 'ls', '/usr/lib/postgresql'], { encoding: 'utf8' }).trim();
    volume = mkdtempSync(path.join(os.tmpdir(), 'fleet-database-'));
    chmodSync(volume, 0o777); // the image's user makes its data directory in it, as in the pod's volume
    port = await freePort();
    const env = { PGPORT: String(port), IOT_DATABASE_PASSWORD: passwords.superuser, IOT_DATABASE_CORE_PASSWORD: passwords.core, IOT_DATABASE_PROCESSING_PASSWORD: passwords.processing };
    const args = ['run', '--isolation', 'chroot', '--network', 'host', '--volume', `${volume}:/var/lib/iot`, ...Object.entries(env).flatMap(([key, value]) => ['--env', `${key}=${value}`]), container, '/usr/local/bin/iot-database'];
    child = track(spawn('buildah', args, { detached: true, stdio: ['ignore', logFd, logFd] }), true);
  } finally {
    closeSync(logFd);
  }
  const stop = async () => {
    await stopChild(child, 10_000, true);
    execFileSync('buildah', ['rm', container], { stdio: 'ignore' });
    rmSync(volume, { recursive: true, force: true });
  };
  const pool = createPool({ host: HOST, port }, DATABASE_ROLES.core, passwords.core, createLogger('database', () => undefined));
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await new PostgresStore(pool).reachesTables(['devices']);
        break;
      } catch (error) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the database did not let core's role reach its tables within 60 s (see ${logFile})`, { cause: error });
        await sleep(200);
      }
    }
  } catch (error) {
    await stop();
    throw error;
  } finally {
    await pool.end();
  }
  return { port, pid: child.pid!, version, stop };
}

/** Registers `devices` through the store as core's role, each with its password hashed by core's `hashPassword`. */
export async function seedDevices(port: number, corePassword: string, devices: readonly DeviceCredentials[]): Promise<void> {
  const pool = createPool({ host: HOST, port }, DATABASE_ROLES.core, corePassword, createLogger('seed', () => undefined));
  try {
    const store = new PostgresStore(pool);
    await mapLimit(devices, 5, async (device) => {
      if (!(await store.createDevice(device.id, await hashPassword(device.password)))) throw new Error(`device ${device.id} exists`);
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

export async function startBroker(): Promise<Broker> {
  const before = new Set(childPids(process.pid, 'nats-server'));
  const server = await startNatsServer();
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
