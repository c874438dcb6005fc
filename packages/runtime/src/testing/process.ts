/**
 * Test support: an operator run as a child process, the way it runs in a container.
 *
 * Guarantees: `spawnOperator(args, env)` runs `node <args>` from the current directory (or `cwd`) with the
 * test process's environment plus `env`; `output()` is everything the process has written to
 * stderr so far (stdout too with `{ output: 'all' }`; stdin is closed); `stop()` sends SIGTERM
 * and resolves with the exit code (null when a signal ended it) once the process has exited —
 * at once if it already had.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export type OperatorProcess = ChildProcess & {
  output(): string;
  stop(): Promise<number | null>;
};

export function spawnOperator(args: readonly string[], env: Record<string, string>, options: { output?: 'stderr' | 'all'; cwd?: string } = {}): OperatorProcess {
  const all = options.output === 'all';
  const child = spawn(process.execPath, [...args], {
    cwd: options.cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', all ? 'pipe' : 'ignore', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => (output += chunk.toString());
  if (all) child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
  return Object.assign(child, {
    output: () => output,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  });
}
