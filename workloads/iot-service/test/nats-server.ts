/**
 * A real NATS Server with JetStream on 127.0.0.1 for the data plane's tests: the binary the
 * broker image carries, built from the module cluster/engines/nats-server pins (cluster/engines/build.sh,
 * cached after the first build), run with the configuration the broker image's entry point
 * (image/broker.sh) writes — its users and their permissions as they are — with only its
 * addresses and store moved into the test's reach, and one user added for the tests alone.
 *
 * Guarantees: `brokerConfig` runs broker.sh with the given environment (and a stand-in for
 * nats-server that only records its arguments), returning the configuration it wrote and the
 * arguments it would have started nats-server with. `startNatsServer` starts one server on a
 * free port from broker.sh's configuration for one broker with the users gateway, processing and
 * core (passwords BROKER_PASSWORDS) and, for the tests alone, user `admin` (ADMIN_PASSWORD) allowed
 * everything; its JetStream store in a fresh temporary directory; monitoring off. It resolves
 * once the server says it is ready, on a port no other process holds. `pause`/`resume` stop and continue the process
 * (SIGSTOP/SIGCONT: it holds every acknowledgement meanwhile); `kill` SIGKILLs it, and `start`
 * starts it again on the same port and store, as a restarted pod would. `close` kills it and
 * removes the store. Nothing dials or listens on any other address.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BROKER_SCRIPT = path.join(repositoryRoot, 'workloads/iot-service/image/broker.sh');
let binary: string | undefined;

/** The password of each component's broker user in tests. */
export const BROKER_PASSWORDS = { gateway: 'test-gateway-password', processing: 'test-processing-password', core: 'test-core-password' } as const;
/** The tests' own user, allowed everything (no such user exists in the image). */
export const ADMIN_USER = 'admin';
export const ADMIN_PASSWORD = 'test-admin-password';

export function natsServerBinary(): string {
  if (binary) return binary;
  const built = spawnSync('bash', [path.join(repositoryRoot, 'cluster/engines/build.sh'), 'nats-server'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const last = built.stdout.trim().split('\n').at(-1);
  if (built.status !== 0 || !last) throw new Error('cluster/engines/build.sh nats-server failed (see above)');
  binary = last;
  return binary;
}

/**
 * What broker.sh writes with `env` (beside PATH and IOT_BROKER_CONFIG_DIR, which this sets): its
 * exit status, stderr, the configuration and the arguments it passed to nats-server.
 */
export function brokerConfig(env: Record<string, string>): { status: number | null; stderr: string; config: string; args: string[] } {
  const dir = mkdtempSync(path.join(tmpdir(), 'broker-sh-'));
  try {
    const stub = path.join(dir, 'nats-server');
    writeFileSync(stub, `#!/bin/sh\nprintf '%s\\n' "$@" >"${dir}/args"\n`);
    chmodSync(stub, 0o755);
    const run = spawnSync('sh', [BROKER_SCRIPT], { encoding: 'utf8', env: { PATH: `${dir}:${process.env.PATH ?? ''}`, IOT_BROKER_CONFIG_DIR: path.join(dir, 'config'), ...env } });
    const read = (file: string) => {
      try {
        return readFileSync(file, 'utf8');
      } catch {
        return '';
      }
    };
    return { status: run.status, stderr: run.stderr, config: read(path.join(dir, 'config', 'nats.conf')), args: read(path.join(dir, 'args')).split('\n').filter(Boolean) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `text` with `pattern` replaced once; throws when broker.sh's configuration no longer has it. */
function replaceOnce(text: string, pattern: RegExp, replacement: string): string {
  if (!pattern.test(text)) throw new Error(`broker.sh's configuration has no ${pattern}: the test broker needs updating`);
  return text.replace(pattern, replacement);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Resolves once `child` says it is ready — its own word, not a connection to its port, which
 * another test process's server may hold after both were given the same free port — and rejects
 * when it exits first or stays silent `timeoutMs`. It keeps reading the child's log meanwhile.
 */
function ready(child: ChildProcess, timeoutMs: number): Promise<void> {
  let log = '';
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`nats-server was not ready within ${timeoutMs} ms: ${log.slice(-2000)}`)), timeoutMs);
    child.stderr!.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-8192);
      if (log.includes('Server is ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`nats-server exited (${signal ?? `code ${code}`}) before it was ready: ${log.slice(-2000)}`));
    });
  });
}

export interface NatsServer {
  port: number;
  start(): Promise<void>;
  pause(): void;
  resume(): void;
  kill(): Promise<void>;
  close(): Promise<void>;
}

export async function startNatsServer(options: { maxStoreBytes?: number } = {}): Promise<NatsServer> {
  const executable = natsServerBinary();
  const dir = mkdtempSync(path.join(tmpdir(), 'nats-test-'));
  const written = brokerConfig({
    IOT_BROKER_GATEWAY_PASSWORD: BROKER_PASSWORDS.gateway,
    IOT_BROKER_PROCESSING_PASSWORD: BROKER_PASSWORDS.processing,
    IOT_BROKER_CORE_PASSWORD: BROKER_PASSWORDS.core,
  });
  if (written.status !== 0) throw new Error(`broker.sh failed: ${written.stderr}`);
  let text = replaceOnce(written.config, /^http: .*\n/m, '');
  text = replaceOnce(text, /^ {2}store_dir: .*$/m, `  store_dir: "${path.join(dir, 'store')}"${options.maxStoreBytes ? `\n  max_file_store: ${options.maxStoreBytes}` : ''}`);
  text = replaceOnce(text, /^ {2}users: \[$/m, `  users: [\n    { user: "${ADMIN_USER}", password: "${ADMIN_PASSWORD}" }`);
  const config = path.join(dir, 'nats.conf');
  let child: ChildProcess | undefined;
  const server: NatsServer = {
    port: 0,
    start: async () => {
      child = spawn(executable, ['--config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
      await ready(child, 10_000);
    },
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
    kill: async () => {
      const running = child;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await exited;
    },
    close: async () => {
      await server.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  // A free port may be taken by another process before the server binds it: then another port.
  for (let attempt = 1; ; attempt++) {
    server.port = await freePort();
    writeFileSync(config, replaceOnce(text, /^listen: .*$/m, `listen: "127.0.0.1:${server.port}"`));
    try {
      await server.start();
      return server;
    } catch (error) {
      if (attempt >= 3 || !/address already in use/.test(String(error))) {
        rmSync(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }
}
