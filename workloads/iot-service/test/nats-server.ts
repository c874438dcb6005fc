/**
 * A real NATS Server with JetStream on 127.0.0.1 for the data plane's tests: the binary the
 * broker image carries, built from the module cluster/engines/nats-server pins (cluster/engines/build.sh,
 * cached after the first build).
 *
 * Guarantees: `startNatsServer` starts one server on a free port with user `iot` and the given
 * password, its JetStream store in a fresh temporary directory, and resolves once it accepts
 * connections. `pause`/`resume` stop and continue the process (SIGSTOP/SIGCONT: it holds every
 * acknowledgement meanwhile); `kill` SIGKILLs it, and `start` starts it again on the same port
 * and store, as a restarted pod would. `close` kills it and removes the store. Nothing dials any
 * other address.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tcpReachable } from '../src/shared/net.ts';

const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
let binary: string | undefined;

export function natsServerBinary(): string {
  if (binary) return binary;
  const built = spawnSync('bash', [path.join(repositoryRoot, 'cluster/engines/build.sh'), 'nats-server'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const last = built.stdout.trim().split('\n').at(-1);
  if (built.status !== 0 || !last) throw new Error('cluster/engines/build.sh nats-server failed (see above)');
  binary = last;
  return binary;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function accepting(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await tcpReachable({ host: '127.0.0.1', port }, 1_000).then(() => true, () => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nats-server did not accept connections on ${port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export interface NatsServer {
  port: number;
  start(): Promise<void>;
  pause(): void;
  resume(): void;
  kill(): Promise<void>;
  close(): Promise<void>;
}

export async function startNatsServer(password: string, options: { maxStoreBytes?: number } = {}): Promise<NatsServer> {
  const executable = natsServerBinary();
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'nats-test-'));
  const config = path.join(dir, 'nats.conf');
  writeFileSync(
    config,
    [
      `listen: "127.0.0.1:${port}"`,
      `authorization { users: [ { user: "iot", password: "${password}" } ] }`,
      `jetstream { store_dir: "${path.join(dir, 'store')}"${options.maxStoreBytes ? `, max_file_store: ${options.maxStoreBytes}` : ''} }`,
    ].join('\n'),
  );
  let child: ChildProcess | undefined;
  const server: NatsServer = {
    port,
    start: async () => {
      child = spawn(executable, ['--config', config], { stdio: 'ignore' });
      await accepting(port, 10_000);
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
  await server.start();
  return server;
}
