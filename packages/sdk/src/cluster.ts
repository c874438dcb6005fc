/**
 * The local control plane of operator-ts: the repository's cluster/ scripts (etcd,
 * kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes built from pinned Go
 * modules), shipped inside the package.
 *
 * Guarantees:
 * - The scripts come from the package's own cluster/ copy (made when it is packed) and, in the
 *   repository, from the repository's cluster/; binaries live in the same cache
 *   (~/.cache/iot-operator, $IOT_OPERATOR_CACHE_DIR) and clusters in the same place
 *   ($KWOK_WORKDIR/clusters/$CLUSTER_NAME), so every project and this repository share them.
 * - `up` starts or reuses the cluster and returns its kubeconfig path; `down` and `status` pass
 *   the scripts' output and exit codes through.
 * - `exec` runs a command with KUBECONFIG naming the local cluster and IOT_TEST_USE_KUBECONFIG=1,
 *   so the runtime's testEnv() uses it as is; `run` also installs the project's CRDs first (and
 *   waits up to 60 s for them to be Established) and,
 *   when the project has webhooks, points their configurations at the operator on 127.0.0.1:9443
 *   (webhook/local.ts) until it exits — Ctrl-C or `kill %1` of a shell reach the operator with
 *   its whole process group (or, npm alone stopped, operator-ts stops it), and operator-ts waits
 *   for it to stop before deleting them.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readProject } from './project.ts';
import { startLocalWebhooks } from './webhook/local.ts';
import { WEBHOOK_PORT } from './webhook/manifests.ts';

const execFileAsync = promisify(execFile);

export function clusterScriptsDir(): string {
  for (const candidate of ['../cluster/', '../../../cluster/']) {
    const dir = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(path.join(dir, 'cli', 'cluster.ts'))) return dir;
  }
  throw new Error('the cluster scripts are missing from this installation of @iot-operator/sdk (expected cluster/cli/cluster.ts in the package)');
}

/** The cluster's command line (cluster/cli/cluster.ts, run with tsx) for `command`. */
function cli(command: string): string[] {
  return ['--import', 'tsx', path.join(clusterScriptsDir(), 'cli', 'cluster.ts'), command];
}

/** Runs a command with inherited stdio; resolves with its exit code. */
export function runInherited(command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env, cwd?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { stdio: 'inherit', env, cwd });
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

/** Starts or reuses the local cluster (progress on stderr); returns its kubeconfig path. */
export async function clusterUp(): Promise<string> {
  const output: string[] = [];
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, cli('up'), { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.once('error', reject);
    child.once('exit', (c) => resolve(c ?? 1));
  });
  const last = output.join('').trim().split('\n').at(-1) ?? '';
  if (code !== 0 || !last.startsWith('KUBECONFIG=')) throw new Error(`the local cluster did not start (cluster up exit code ${code}); its output ended with: ${last || '<nothing>'}`);
  return last.slice('KUBECONFIG='.length);
}

export function clusterDown(): Promise<number> {
  return runInherited(process.execPath, cli('down'));
}

export function clusterStatus(): Promise<number> {
  return runInherited(process.execPath, cli('status'));
}

export async function clusterExec(command: string, args: readonly string[]): Promise<number> {
  const kubeconfig = await clusterUp();
  return runInherited(command, args, { ...process.env, KUBECONFIG: kubeconfig, IOT_TEST_USE_KUBECONFIG: '1' });
}

/** The directory of kubectl and the other control-plane binaries (built when missing). */
async function binDir(): Promise<string> {
  const { stdout } = await execFileAsync('bash', [path.join(clusterScriptsDir(), 'engines', 'build.sh'), 'control-plane'], { maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim().split('\n').at(-1) ?? '';
}

/**
 * `kubectl wait --for=condition=Established` of the CRDs in `files` (`-f <file>` pairs), asked
 * again until `timeoutMs` has passed: on a CRD just applied, whose status has no conditions yet,
 * kubectl gives up at once (".status.conditions accessor error: <nil> is of the type <nil>")
 * instead of waiting. The last answer is the error at the deadline.
 */
export async function waitEstablished(kubectl: string, kubeconfig: string, files: readonly string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await execFileAsync(kubectl, ['--kubeconfig', kubeconfig, 'wait', '--for', 'condition=Established', '--timeout', '5s', ...files]);
      return;
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** `npm start` of a project: the local cluster, the project's CRDs, then the operator in the foreground. */
export async function runOperator(projectDir: string, operatorArgs: readonly string[]): Promise<number> {
  const kubeconfig = await clusterUp();
  const crdDir = path.join(projectDir, 'deploy/crds');
  const crds = existsSync(crdDir) ? readdirSync(crdDir).filter((f) => f.endsWith('_crd.yaml')).map((f) => path.join(crdDir, f)) : [];
  if (crds.length > 0) {
    const kubectl = path.join(await binDir(), 'kubectl');
    const files = crds.flatMap((f) => ['-f', f]);
    await execFileAsync(kubectl, ['--kubeconfig', kubeconfig, 'apply', '--server-side', '--force-conflicts', ...files]);
    await waitEstablished(kubectl, kubeconfig, files, 60_000);
    process.stderr.write(`installed ${crds.map((f) => path.relative(projectDir, f)).join(', ')}\n`);
  }
  const env = { ...process.env, KUBECONFIG: kubeconfig };
  const project = readProject(projectDir);
  if ((project.webhooks ?? []).length === 0) return runInherited(process.execPath, ['--import', 'tsx', 'src/main.ts', ...operatorArgs], env, projectDir);
  const webhooks = await startLocalWebhooks(projectDir, project.name, kubeconfig, WEBHOOK_PORT);
  // operator-ts outlives the operator to clean up. Ctrl-C (SIGINT) and an interactive shell's
  // `kill %1` (SIGTERM) reach the job's whole process group, the operator included; when only
  // the process that started operator-ts was stopped (npm killed alone), operator-ts stops the
  // operator itself, once.
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', ...webhooks.args, ...operatorArgs], { stdio: 'inherit', env, cwd: projectDir });
  let signalled = false;
  const note = () => void (signalled = true);
  process.on('SIGINT', note).on('SIGTERM', note);
  const parent = process.ppid;
  const orphaned = setInterval(() => {
    if (process.ppid === parent || signalled) return;
    signalled = true;
    child.kill('SIGTERM');
  }, 500);
  try {
    return await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
    });
  } finally {
    clearInterval(orphaned);
    await webhooks.stop();
    process.off('SIGINT', note).off('SIGTERM', note);
  }
}
