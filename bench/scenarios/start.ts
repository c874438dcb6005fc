/**
 * `start`: the warm quick start. `npm start -- --local --exit-when-available` (the README's first
 * command, told to exit once the example is Available) on an embedded cluster of its own
 * (`iot-bench-start`) whose binaries are already cached: first with that cluster absent (created
 * from the cached binaries), then again with it running — so `npm start` twice in a row is
 * measured too.
 *
 * Figures: seconds from the command's start to its exit, for each phase; a non-zero exit fails
 * the run. The bench cluster is not used; the start cluster is removed at the
 * end.
 */
import { execFile, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { log, now, repoRoot } from '../lib/kube.ts';
import { round } from '../lib/stats.ts';

const START_CLUSTER = 'iot-bench-start';
const run = promisify(execFile);

/** Runs the quick start once and returns its seconds to exit. */
async function timedStart(ctx: BenchContext, phase: string): Promise<number> {
  const logFile = path.join(ctx.logDir, `start-${phase}.log`);
  const out = createWriteStream(logFile);
  const env: NodeJS.ProcessEnv = { ...process.env, CLUSTER_NAME: START_CLUSTER };
  delete env.KUBECONFIG;
  const t0 = now();
  const child = spawn('npm', ['start', '--silent', '--', '--local', '--exit-when-available'], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  const timer = setTimeout(() => child.kill('SIGTERM'), ctx.options.timeoutS * 1000);
  const exitCode = await new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? 1)));
  clearTimeout(timer);
  const seconds = round((now() - t0) / 1000, 2);
  log(`start/${phase}: exit ${exitCode} after ${seconds} s (log: ${logFile})`);
  if (exitCode !== 0) throw new Error(`npm start (${phase}) exited ${exitCode}; see ${logFile}`);
  return seconds;
}

async function removeStartCluster(): Promise<void> {
  await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cluster/cli/cluster.ts'), 'down'], { env: { ...process.env, CLUSTER_NAME: START_CLUSTER } });
}

export async function runStart(ctx: BenchContext): Promise<ScenarioOutput> {
  await removeStartCluster();
  try {
    const absent = await timedStart(ctx, 'cluster-absent');
    const running = await timedStart(ctx, 'cluster-running');
    return {
      figures: { clusterAbsentS: absent, clusterRunningS: running },
      samples: {},
    };
  } finally {
    await removeStartCluster();
  }
}
