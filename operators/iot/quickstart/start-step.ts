/**
 * A long step of the quick start run as a child process that Ctrl-C can stop: the embedded
 * control plane's `cluster up` (which builds the pinned binaries on the first run, minutes on 2
 * cores) and the reference IoT service's image build (buildah).
 *
 * Guarantees:
 * - The step's progress (its stderr) reaches this process's stderr as it is printed, not when the
 *   step ends; its result is the last line of its stdout.
 * - The step runs in a process group of its own, which holds every process it starts (cluster up's
 *   scripts, `go` and the compilers and linker it runs; buildah), as they stay in their parent's
 *   group. So a terminal's Ctrl-C reaches this process only, and `stop()` ends them all: SIGTERM
 *   to the group, SIGKILL to whatever of it is left after `graceMs`; it resolves once none is left
 *   (at most `graceMs` + 1 s). build.sh builds in a temporary directory and publishes only a
 *   complete, verified build, so a stopped build leaves nothing half-built and no lock held: the
 *   next start builds again.
 * - The cluster's components are not in that group (kwokctl starts each in a session of its own):
 *   a cluster that is already up keeps running.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export interface StartStep {
  /** The last line the step printed on stdout, once it has exited 0; rejects when it fails or is stopped. */
  readonly result: Promise<string>;
  /** Stops the step and every process it started; resolves at once when it has already ended. */
  stop(graceMs?: number): Promise<void>;
}

/** Sends a signal to every process of the group; false when none is left (0 only asks). */
function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * True while a process of the group runs. An ended process counts for kill() until init reaps it,
 * which some inits do only every few seconds; where /proc tells, those are not waited for.
 */
function groupRunning(pgid: number): boolean {
  if (!signalGroup(pgid, 0)) return false;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return true;
  }
  return pids.some((pid) => {
    try {
      // Fields after the command name's closing parenthesis: state, ppid, pgrp, ...
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return Number(pgrp) === pgid && state !== 'Z';
    } catch {
      return false; // ended meanwhile
    }
  });
}

async function groupGone(pgid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (groupRunning(pgid)) {
    if (Date.now() >= deadline) return false;
    await sleep(50);
  }
  return true;
}

/** Runs `command` (`what` names it in errors) in a process group of its own, from `cwd`, with `env` (default: this process's). */
export function startStep(what: string, command: string, args: readonly string[], cwd?: string, env?: NodeJS.ProcessEnv): StartStep {
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const result = new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) resolve(stdout.trim().split('\n').at(-1) ?? '');
      else reject(new Error(`${what} ${signal ? `was stopped by ${signal}` : `exited with status ${code}`}; its output above says why`));
    });
  });

  return {
    result,
    async stop(graceMs = 3000) {
      const pgid = child.pid;
      if (pgid === undefined || !signalGroup(pgid, 'SIGTERM')) return;
      if (!(await groupGone(pgid, graceMs)) && signalGroup(pgid, 'SIGKILL')) await groupGone(pgid, 1000);
    },
  };
}

/** `cluster up` with `args`; resolves with the kubeconfig path it prints last as `KUBECONFIG=<path>`. */
export function startLocalCluster(cli: string, args: readonly string[] = []): StartStep {
  const step = startStep('cluster up', process.execPath, ['--import', 'tsx', cli, 'up', ...args]);
  const result = step.result.then((last) => {
    if (last.startsWith('KUBECONFIG=')) return last.slice('KUBECONFIG='.length);
    throw new Error(`cluster up printed no KUBECONFIG line (last line: '${last}')`);
  });
  return { result, stop: step.stop };
}
