/**
 * The Helm engine: the real Helm v3 CLI, run as a child process.
 *
 * Guarantees:
 * - The operator never renders or applies chart templates itself: every release operation is a
 *   `helm` command (install, upgrade, rollback, uninstall, test, status, history, get manifest),
 *   and release state stays where Helm keeps it (Secrets in the release namespace).
 * - Every call has a deadline (the Helm `--timeout` plus a margin, or a fixed one for reads);
 *   a call that overruns it is killed and fails with `HelmTimeoutError`.
 * - Every failure is a `HelmError` carrying the command and Helm's own message (its last
 *   `Error:` line, without the prefix); `ReleaseNotFoundError` when Helm says the release does
 *   not exist; `HelmNotFoundError` when the binary cannot be run.
 * - Values are handed over in a private temporary file (mode 0600) removed after the call.
 * - Helm's cache/config/data directories live in a private temporary directory, so the CLI
 *   works on a read-only root filesystem and never reads a user's repositories or plugins;
 *   `dispose()` removes it.
 * - `as(user)` is the same Helm acting with the authority of `user` (`--kube-as-user`, e.g. a
 *   ServiceAccount's `system:serviceaccount:<namespace>:<name>`): the API server authorizes every
 *   request of such a call as that user, never as the operator.
 * - `cancelledBy(signal)` is the same Helm whose calls are cancellable: when `signal` aborts (the
 *   operator stops), a running helm is sent SIGTERM (SIGKILL 5 s later) and the call fails with a
 *   `HelmCancelledError`; a call started after the abort does not run.
 * - `check()` runs `helm version` and fails with a `HelmNotFoundError` saying which binary could
 *   not be run and how to name another.
 * - `findHelmBinary` resolves `--helm-binary`, else `$HELM_BINARY`, else the project's build
 *   (`cluster/engines/build.sh helm`, cached), else `helm` on PATH.
 */

import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** A release as `helm install|upgrade|status -o json` prints it (the fields the operator reads). */
export interface HelmRelease {
  name: string;
  namespace: string;
  version: number;
  info: { status: string; description?: string; first_deployed?: string; last_deployed?: string; notes?: string };
  chart?: { metadata?: { name?: string; version?: string; appVersion?: string } };
  hooks?: Array<{ name: string; kind: string; events?: string[] }>;
}

/** One entry of `helm history -o json`. */
export interface HelmRevision {
  revision: number;
  updated: string;
  status: string;
  chart: string;
  app_version?: string;
  description: string;
}

export class HelmError extends Error {
  override name = 'HelmError';
  constructor(
    readonly command: string,
    /** Helm's own message (its `Error:` line without the prefix), or the process failure. */
    readonly helmMessage: string,
    readonly exitCode: number | null,
  ) {
    super(`${command}: ${helmMessage}`);
  }
}

export class ReleaseNotFoundError extends HelmError {
  override name = 'ReleaseNotFoundError';
}

export class HelmTimeoutError extends HelmError {
  override name = 'HelmTimeoutError';
}

export class HelmNotFoundError extends HelmError {
  override name = 'HelmNotFoundError';
}

export class HelmCancelledError extends HelmError {
  override name = 'HelmCancelledError';
}

export interface HelmOptions {
  binary: string;
  /** Kubeconfig passed to every call; undefined = Helm's own resolution ($KUBECONFIG, in-cluster). */
  kubeconfig?: string;
  /** Extra seconds a call may run beyond its Helm timeout before it is killed (default 30). */
  marginSeconds?: number;
  /** The user every call acts as (`--kube-as-user`); undefined = the kubeconfig's own identity. */
  impersonate?: string;
  /** Aborting it cancels running calls (and refuses new ones). */
  signal?: AbortSignal;
}

export interface ReleaseInputs {
  release: string;
  namespace: string;
  /** A chart directory, a .tgz file or a .tgz URL. */
  chart: string;
  values: Record<string, unknown>;
  /** Labels recorded on the release (Helm's --labels; stored on its Secrets). */
  labels: Record<string, string>;
  wait: boolean;
  timeoutSeconds: number;
}

export interface UpgradeOptions {
  noHooks?: boolean;
  force?: boolean;
}

const readTimeoutSeconds = 60;

/** The Helm CLI bound to one binary and kubeconfig. */
export class Helm {
  private homeDir: Promise<string> | undefined;

  constructor(private readonly options: HelmOptions) {}

  get binary(): string {
    return this.options.binary;
  }

  /** This Helm acting as `user` (same binary, kubeconfig and private directories). */
  as(user: string): Helm {
    return this.with({ impersonate: user });
  }

  /** This Helm with calls cancelled when `signal` aborts. */
  cancelledBy(signal: AbortSignal): Helm {
    return this.with({ signal });
  }

  private with(options: Partial<HelmOptions>): Helm {
    const other = new Helm({ ...this.options, ...options });
    other.homeDir = this.home();
    return other;
  }

  /** Removes the private directories (once no call is running: the operator has stopped). */
  async dispose(): Promise<void> {
    if (this.homeDir) await rm(await this.homeDir, { recursive: true, force: true });
  }

  /** Fails with a clear error when the binary cannot run (checked once at the operator's start). */
  async check(): Promise<string> {
    try {
      return (await this.run(['version', '--short'], readTimeoutSeconds)).trim();
    } catch (err) {
      const why = err instanceof HelmError ? err.helmMessage : String(err);
      throw new HelmNotFoundError('helm version', `the helm binary ${this.options.binary} does not run (${why}): install Helm v3 or name it with --helm-binary / $HELM_BINARY`, null);
    }
  }

  async install(inputs: ReleaseInputs): Promise<HelmRelease> {
    return this.withValues(inputs.values, async (valuesFile) =>
      JSON.parse(await this.run(['install', inputs.release, inputs.chart, ...releaseArgs(inputs, valuesFile), '--output', 'json'], inputs.timeoutSeconds)) as HelmRelease,
    );
  }

  async upgrade(inputs: ReleaseInputs, options: UpgradeOptions = {}): Promise<HelmRelease> {
    const extra = [...(options.noHooks ? ['--no-hooks'] : []), ...(options.force ? ['--force'] : [])];
    return this.withValues(inputs.values, async (valuesFile) =>
      // --reset-values: the release gets exactly the spec's values over the chart's defaults (Helm
      // would otherwise reuse the last release's values when the spec's are empty).
      JSON.parse(await this.run(['upgrade', inputs.release, inputs.chart, ...releaseArgs(inputs, valuesFile), '--reset-values', ...extra, '--output', 'json'], inputs.timeoutSeconds)) as HelmRelease,
    );
  }

  async rollback(release: string, namespace: string, revision: number, timeoutSeconds: number, wait: boolean): Promise<void> {
    await this.run(['rollback', release, String(revision), '--namespace', namespace, '--timeout', `${timeoutSeconds}s`, ...(wait ? ['--wait'] : [])], timeoutSeconds);
  }

  async uninstall(release: string, namespace: string, timeoutSeconds: number): Promise<void> {
    await this.run(['uninstall', release, '--namespace', namespace, '--timeout', `${timeoutSeconds}s`, '--wait'], timeoutSeconds);
  }

  async test(release: string, namespace: string, timeoutSeconds: number): Promise<void> {
    await this.run(['test', release, '--namespace', namespace, '--timeout', `${timeoutSeconds}s`], timeoutSeconds);
  }

  async status(release: string, namespace: string): Promise<HelmRelease> {
    return JSON.parse(await this.run(['status', release, '--namespace', namespace, '--output', 'json'], readTimeoutSeconds)) as HelmRelease;
  }

  async history(release: string, namespace: string): Promise<HelmRevision[]> {
    return JSON.parse(await this.run(['history', release, '--namespace', namespace, '--max', '256', '--output', 'json'], readTimeoutSeconds)) as HelmRevision[];
  }

  async manifest(release: string, namespace: string, revision?: number): Promise<string> {
    return this.run(['get', 'manifest', release, '--namespace', namespace, ...(revision ? ['--revision', String(revision)] : [])], readTimeoutSeconds);
  }

  /** Runs `helm <args>` and returns its stdout; throws a HelmError on any failure. */
  private async run(args: string[], timeoutSeconds: number): Promise<string> {
    const home = await this.home();
    const fullArgs = [
      ...args,
      ...(this.options.kubeconfig ? ['--kubeconfig', this.options.kubeconfig] : []),
      ...(this.options.impersonate ? ['--kube-as-user', this.options.impersonate] : []),
    ];
    const command = `helm ${args.slice(0, 2).join(' ')}`;
    const deadlineMs = (timeoutSeconds + (this.options.marginSeconds ?? 30)) * 1000;
    const signal = this.options.signal;
    if (signal?.aborted) throw new HelmCancelledError(command, 'cancelled before it started: the operator is stopping', null);
    return new Promise<string>((resolve, reject) => {
      const child = spawn(this.options.binary, fullArgs, {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          HELM_CACHE_HOME: path.join(home, 'cache'),
          HELM_CONFIG_HOME: path.join(home, 'config'),
          HELM_DATA_HOME: path.join(home, 'data'),
        },
      });
      let stdout = '';
      let stderr = '';
      let timedOut = false;
      let cancelled = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, deadlineMs);
      const cancel = () => {
        cancelled = true;
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
      };
      signal?.addEventListener('abort', cancel, { once: true });
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', (err) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', cancel);
        reject(new HelmNotFoundError(command, `cannot run ${this.options.binary}: ${err.message}`, null));
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', cancel);
        if (cancelled) return reject(new HelmCancelledError(command, 'cancelled: the operator is stopping', code));
        if (timedOut) return reject(new HelmTimeoutError(command, `killed after ${deadlineMs / 1000} s without an answer`, code));
        if (code === 0) return resolve(stdout);
        const message = helmErrorMessage(stderr) || `exited with code ${code}`;
        reject(/release: not found|release not found/i.test(message) ? new ReleaseNotFoundError(command, message, code) : new HelmError(command, message, code));
      });
    });
  }

  private async withValues<T>(values: Record<string, unknown>, use: (file: string) => Promise<T>): Promise<T> {
    const dir = await mkdtemp(path.join(await this.home(), 'values-'));
    const file = path.join(dir, 'values.json');
    try {
      await writeFile(file, JSON.stringify(values), { mode: 0o600 });
      return await use(file);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private home(): Promise<string> {
    this.homeDir ??= mkdtemp(path.join(os.tmpdir(), 'armada-helm-'));
    return this.homeDir;
  }
}

function releaseArgs(inputs: ReleaseInputs, valuesFile: string): string[] {
  const labels = Object.entries(inputs.labels).map(([k, v]) => `${k}=${v}`);
  return [
    '--namespace', inputs.namespace,
    '--values', valuesFile,
    ...(labels.length > 0 ? ['--labels', labels.join(',')] : []),
    '--timeout', `${inputs.timeoutSeconds}s`,
    ...(inputs.wait ? ['--wait'] : []),
  ];
}

/** Helm's message: the text after the last `Error: ` of its stderr, else the last non-empty line. */
export function helmErrorMessage(stderr: string): string {
  const at = stderr.lastIndexOf('Error: ');
  if (at >= 0) return stderr.slice(at + 'Error: '.length).trim();
  return stderr.trim().split('\n').filter(Boolean).at(-1)?.trim() ?? '';
}

const run = promisify(execFile);
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

/**
 * The helm binary: `explicit` (the flag), else $HELM_BINARY, else the project's build (built
 * from Go modules by cluster/engines/build.sh helm when the repository is at hand), else `helm` on PATH.
 */
export async function findHelmBinary(explicit?: string): Promise<string> {
  if (explicit) return explicit;
  if (process.env.HELM_BINARY) return process.env.HELM_BINARY;
  const script = path.join(repoRoot, 'cluster/engines/build.sh');
  if (existsSync(script)) {
    const { stdout } = await run('bash', [script, 'helm'], { timeout: 900_000, maxBuffer: 16 * 1024 * 1024 });
    const built = stdout.trim().split('\n').at(-1);
    if (built && existsSync(built)) return built;
  }
  return 'helm';
}
