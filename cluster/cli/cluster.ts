/**
 * The local cluster's commands, looping over its parts (cluster/parts/<part>/part.sh, run through
 * cluster/parts/run.sh) in order:
 *
 *   node --import tsx cluster/cli/cluster.ts up [--olm] [--real-node] [--sharder] [--cert-manager]
 *   node --import tsx cluster/cli/cluster.ts down | status | restart-apiserver [DOWN_SECONDS]
 *
 * Guarantees:
 * - `up` starts or reuses the cluster: the control plane, then the real node and the parts it
 *   hosts (their engines built while the control plane is), then OLM, the sharder and
 *   cert-manager (the engines of those asked for built before the cluster's lock is taken). A part is ensured when asked for (flags; CLUSTER_REAL_NODE, CLUSTER_OLM,
 *   CLUSTER_SHARDER, CLUSTER_CERT_MANAGER) and restored when the cluster has it from before (a
 *   cluster keeps its real node, OLM, sharder and cert-manager, across a recreation too). Progress
 *   goes to stderr; the last stdout line is `KUBECONFIG=<absolute path>`. CLUSTER_REAL_NODE=auto runs a real node where one
 *   can run (under CI=true it must, as with 1), else records why not in
 *   <workdir>/real-node-unavailable; with 1 it fails before anything starts where none can run.
 * - `down` stops every part in reverse order; the control plane's stop removes the cluster's
 *   state. No error when there is no cluster.
 * - `status` prints each part's lines; exit 0 healthy, 1 exists but unhealthy, 3 absent.
 * - `restart-apiserver` restarts the API server on its data (and the built-in controllers unless
 *   RESTART_CONTROLLERS=0); last stdout line `kube-apiserver restarted (pid OLD -> NEW), ...`.
 * - up, down and restart-apiserver of one cluster are serialised by a lock in
 *   $KWOK_WORKDIR/iot-operator-locks/<cluster>.lock, held by a `flock` child of this process that
 *   no cluster process inherits and that ends with this process.
 * - No dependency but Node.js and tsx: the SDK ships this folder with the scripts.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const clusterDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const runSh = path.join(clusterDir, 'parts', 'run.sh');

/** The parts `up` starts, in order; `down` stops them in reverse. */
const PARTS: readonly { name: string; role: 'always' | 'node' | 'on-node' | 'optional'; flag?: string; env?: string }[] = [
  { name: 'control-plane', role: 'always' },
  { name: 'node', role: 'node', flag: '--real-node', env: 'CLUSTER_REAL_NODE' },
  { name: 'network-policy', role: 'on-node' },
  { name: 'registry', role: 'on-node' },
  { name: 'dns', role: 'on-node' },
  { name: 'volumes', role: 'on-node' },
  { name: 'olm', role: 'optional', flag: '--olm', env: 'CLUSTER_OLM' },
  { name: 'sharder', role: 'optional', flag: '--sharder', env: 'CLUSTER_SHARDER' },
  { name: 'cert-manager', role: 'optional', flag: '--cert-manager', env: 'CLUSTER_CERT_MANAGER' },
];

const clusterName = process.env.CLUSTER_NAME || 'iot-operator';
const kwokWorkdir = process.env.KWOK_WORKDIR || path.join(homedir(), '.kwok');
const workdir = path.join(kwokWorkdir, 'clusters', clusterName);
const partEnv = { ...process.env, CLUSTER_NAME: clusterName, KWOK_WORKDIR: kwokWorkdir, CLUSTER_PARTS: PARTS.map((p) => p.name).join(' ') };

function log(message: string): void {
  process.stderr.write(`[cluster ${new Date().toTimeString().slice(0, 8)}] ${message}\n`);
}

class Failure extends Error {}

/** Runs one command of one part; stdout goes to `stdout` ('inherit' or our stderr), or is returned with 'pipe'. */
function part(name: string, command: string, args: readonly string[] = [], stdout: 'inherit' | 'stderr' | 'pipe' = 'stderr'): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [runSh, name, command, ...args], {
      env: partEnv,
      stdio: ['ignore', stdout === 'inherit' ? 'inherit' : stdout === 'stderr' ? process.stderr : 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), out }));
  });
}

async function must(name: string, command: string, args: readonly string[] = [], stdout: 'inherit' | 'stderr' = 'stderr'): Promise<void> {
  const { code } = await part(name, command, args, stdout);
  if (code !== 0) throw new Failure(`${name} ${command} failed (exit ${code}; see above)`);
}

const recorded = async (name: string) => (await part(name, 'recorded', [], 'pipe')).code === 0;

/** Holds the cluster's lock until this process exits; waits for it at most `seconds`. */
async function lockCluster(seconds = 300): Promise<void> {
  const dir = path.join(kwokWorkdir, 'iot-operator-locks');
  const file = path.join(dir, `${clusterName}.lock`);
  mkdirSync(dir, { recursive: true });
  const holder = spawn('flock', ['-w', String(seconds), file, '-c', 'echo locked; exec cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  holder.unref();
  const waiting = setTimeout(() => log(`waiting for another cluster command working on '${clusterName}'`), 1000);
  const locked = await new Promise<boolean>((resolve, reject) => {
    holder.once('error', reject);
    holder.stdout.once('data', () => resolve(true));
    holder.once('exit', () => resolve(false));
  });
  clearTimeout(waiting);
  if (!locked) throw new Failure(`cluster lock ${file} still held after ${seconds}s by: ${lockHolders(file, holder.pid) || 'unknown'}`);
  for (const stream of [holder.stdin, holder.stdout]) (stream as unknown as { unref?: () => void }).unref?.();
}

/** The processes with `file` open, as "pid(command line)". */
function lockHolders(file: string, except?: number): string {
  const holders: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== except && Number(p) !== process.pid)) {
    try {
      if (readdirSync(`/proc/${pid}/fd`).some((fd) => readlinkSync(`/proc/${pid}/fd/${fd}`) === file)) {
        holders.push(`${pid}(${readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').slice(0, 60)})`);
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return holders.join(' ');
}

/** A 0/1 switch from the environment, on when `flag` is among the arguments. */
function optionOf(env: string, flag: string, args: readonly string[], values = ['0', '1']): string {
  const value = args.includes(flag) ? '1' : process.env[env] || '0';
  if (!values.includes(value)) throw new Failure(`${env} must be ${values.join(', ')}, got '${value}'`);
  return value;
}

/**
 * Builds the parts' engines one after another, beside what runs meanwhile: the real node's parts
 * share little with the control plane's build (other modules), so they use the CPU its long
 * single-package compiles and links leave idle, and their downloads overlap it. A failure is left
 * to the part's ensure, which builds again (one lock per engine) and says why.
 */
async function buildOneAfterAnother(names: readonly string[]): Promise<void> {
  for (const name of names) await part(name, 'build', [], 'pipe');
}

async function up(args: readonly string[]): Promise<void> {
  const known = PARTS.flatMap((p) => (p.flag ? [p.flag] : []));
  for (const arg of args) if (!known.includes(arg)) throw new Failure(`unknown argument '${arg}' (known: ${known.join(', ')})`);
  const asked = new Map<string, boolean>();
  for (const p of PARTS.filter((p) => p.role === 'optional')) asked.set(p.name, optionOf(p.env!, p.flag!, args) === '1');
  for (const name of ['CLUSTER_NODES', 'CLUSTER_NODE_PODS', 'CLUSTER_CONTROLLER_MANAGER_QPS', 'CLUSTER_SCHEDULER_QPS']) {
    const value = process.env[name];
    if (value && !/^\d+$/.test(value)) throw new Failure(`${name} must be a number, got '${value}'`);
  }
  let realNode = optionOf('CLUSTER_REAL_NODE', '--real-node', args, ['0', '1', 'auto']);
  if (realNode === 'auto' && process.env.CI === 'true') realNode = '1';
  let unavailable = '';
  if (realNode !== '0') {
    // Said before anything is built or started: the default cluster stays as it is.
    unavailable = (await part('node', 'missing', [], 'pipe')).out.trim().split('\n').filter(Boolean).join('; ');
    if (unavailable && realNode === '1') throw new Failure(`a real node cannot run here: ${unavailable}`);
    if (unavailable) log(`no real node: ${unavailable}`);
  }
  asked.set('node', realNode !== '0' && !unavailable);
  const start = Date.now();
  // The optional parts asked for are built before the lock is taken: a build of minutes (cert-manager's,
  // the sharder's, on a fresh machine) must not keep another up (a test file beside) waiting for it.
  for (const p of PARTS.filter((p) => p.role === 'optional' && asked.get(p.name))) await must(p.name, 'build');
  await lockCluster();

  // What the cluster has from before: it keeps it, also when the control plane makes it anew.
  const had = new Map<string, boolean>();
  for (const p of PARTS.filter((p) => p.role === 'node' || p.role === 'optional')) had.set(p.name, await recorded(p.name));
  const onNodeBuilt = (asked.get('node') || had.get('node')) && buildOneAfterAnother(PARTS.filter((p) => p.role === 'on-node').map((p) => p.name)).catch(() => undefined);
  await must('control-plane', 'ensure');
  await onNodeBuilt;
  let nodeRuns = false;
  for (const p of PARTS.filter((p) => p.role !== 'always')) {
    if (p.role === 'on-node') {
      if (nodeRuns) await must(p.name, 'ensure');
      continue;
    }
    const wanted = asked.get(p.name) || had.get(p.name);
    if (!wanted) continue;
    // A part the cluster had but lost with a recreated control plane is ensured, as if asked for.
    const command = asked.get(p.name) || !(await recorded(p.name)) ? 'ensure' : 'restore';
    await must(p.name, command);
    if (p.role === 'node') nodeRuns = true;
  }
  const unavailableFile = path.join(workdir, 'real-node-unavailable');
  if (unavailable) writeFileSync(unavailableFile, `${unavailable}\n`);
  else rmSync(unavailableFile, { force: true });
  log(`cluster '${clusterName}' is up (${Math.round((Date.now() - start) / 1000)}s)`);
  process.stdout.write(`KUBECONFIG=${path.join(workdir, 'kubeconfig.yaml')}\n`);
}

async function down(): Promise<void> {
  await lockCluster();
  for (const p of [...PARTS].reverse()) await must(p.name, 'stop');
}

async function status(): Promise<number> {
  const controlPlane = (await part('control-plane', 'status', [], 'inherit')).code;
  if (controlPlane === 3) return 3;
  let healthy = controlPlane === 0;
  for (const p of PARTS.slice(1)) if ((await part(p.name, 'status', [], 'inherit')).code !== 0) healthy = false;
  return healthy ? 0 : 1;
}

async function restartApiserver(args: readonly string[]): Promise<void> {
  await lockCluster();
  await must('control-plane', 'restart-apiserver', args, 'inherit');
}

async function main(): Promise<number> {
  const [command, ...args] = process.argv.slice(2);
  switch (command) {
    case 'up':
      await up(args);
      return 0;
    case 'down':
      await down();
      return 0;
    case 'status':
      return status();
    case 'restart-apiserver':
      await restartApiserver(args);
      return 0;
    default:
      throw new Failure(`unknown command '${command ?? ''}' (known: up, down, status, restart-apiserver)`);
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(`ERROR: ${error instanceof Failure ? error.message : error instanceof Error ? error.stack : String(error)}`);
    process.exit(1);
  },
);
