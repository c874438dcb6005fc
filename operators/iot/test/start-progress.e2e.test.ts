/**
 * `npm start` on a machine where the control plane is not built yet (an empty
 * IOT_OPERATOR_CACHE_DIR): the build's progress reaches the terminal while it runs, and SIGINT
 * (Ctrl-C) or SIGTERM sent to the node process alone stops it within 5 s with every process of
 * the build (go, its compilers and linker), leaving no lock held and nothing half-built, so that
 * the next start builds again from a clean state.
 *
 * Cheap: each build is stopped as soon as a compiler or linker of it runs (seconds in, with the
 * Go module cache the suite's own cluster filled); the processes of a run are found by the cache
 * directory in their environment, which only they have.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { waitFor } from '@iot-operator/runtime/testing';
import { repoRoot } from '@iot-operator/local-cluster';

const run = promisify(execFile);
const tmp = mkdtempSync(path.join(os.tmpdir(), 'iot-start-progress-'));
const cacheDir = path.join(tmp, 'cache');
const marker = `IOT_OPERATOR_CACHE_DIR=${cacheDir}`;

interface BuildProcess {
  pid: number;
  comm: string;
}

/** The running (not ended) processes that have this test's cache directory in their environment. */
function buildProcesses(): BuildProcess[] {
  const found: BuildProcess[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (!readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(marker)) continue;
      found.push({ pid: Number(pid), comm: readFileSync(`/proc/${pid}/comm`, 'utf8').trim() });
    } catch {
      // ended meanwhile, or not ours to read
    }
  }
  return found;
}

after(() => {
  for (const p of buildProcesses()) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

/** Starts the quick start as a user would, with the cache at `cacheDir`; `output` is what the terminal shows. */
function startQuickStart() {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/quickstart/start.ts'), '--local'], {
    cwd: repoRoot,
    env: { ...process.env, IOT_OPERATOR_CACHE_DIR: cacheDir, KWOK_WORKDIR: path.join(tmp, 'kwok'), CLUSTER_NAME: 'start-progress' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })));
  return { child, exited, output: () => output };
}

async function interruptBuild(signal: 'SIGINT' | 'SIGTERM', exitCode: number): Promise<{ output: string; exitMs: number }> {
  const start = startQuickStart();
  try {
    await waitFor('the first build step on the terminal', async () => ({ done: /==> control-plane step 1\/6: /.test(start.output()), value: undefined }));
    await waitFor(
      'a compiler or linker of the build',
      async () => {
        const seen = buildProcesses().map((p) => p.comm);
        return { done: seen.includes('compile') || seen.includes('link'), value: undefined, seen };
      },
      { timeoutMs: 180_000, intervalMs: 100 },
    );
  } catch (err) {
    start.child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}; output so far:\n${start.output()}`);
  }
  const running = buildProcesses().map((p) => p.comm);
  const shownBeforeSignal = start.output();
  const sentAt = Date.now();
  process.kill(start.child.pid!, signal);
  const { code, at } = await Promise.race([
    start.exited,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still running 15 s after ${signal}:\n${start.output()}`)), 15_000).unref()),
  ]).catch((err: unknown) => {
    start.child.kill('SIGKILL');
    throw err;
  });
  const output = start.output();

  assert.match(shownBeforeSignal, /step \d\/6/, 'progress lines are on the terminal while the build runs');
  assert.ok(running.includes('go'), `go was running when the signal came (saw: ${running.join(', ')})`);
  assert.ok(at - sentAt < 5000, `exited ${at - sentAt} ms after ${signal}; output:\n${output}`);
  assert.equal(code, exitCode, output);
  assert.match(output, new RegExp(`${signal}: stopping cluster up and its build`));
  // The quick start stops its build's process group with SIGTERM, whatever signal it got.
  assert.match(output, /build of the control plane .*interrupted by SIGTERM in step \d\/6/);
  const left = buildProcesses();
  assert.deepEqual(left, [], `processes of the build still running after the quick start exited: ${left.map((p) => `${p.pid} ${p.comm}`).join(', ')}`);

  const entries = readdirSync(cacheDir);
  assert.deepEqual(entries.filter((name) => name.startsWith('.build-')), [], `nothing half-built left in ${cacheDir}: ${entries.join(', ')}`);
  for (const versionSet of entries.filter((name) => name.startsWith('k8s-'))) {
    assert.ok(!existsSync(path.join(cacheDir, versionSet, 'bin')), `no control plane published in ${versionSet}`);
  }
  await run('flock', ['--nonblock', path.join(cacheDir, '.control-plane-build-lock'), 'true']); // fails while the lock is held
  return { output, exitMs: at - sentAt };
}

describe('npm start on a machine without the control plane built', () => {
  it('shows the build progress, and SIGINT (Ctrl-C) stops the build and all of its processes within 5 s', async (t) => {
    const { exitMs } = await interruptBuild('SIGINT', 130);
    t.diagnostic(`exited ${exitMs} ms after SIGINT`);
  });

  it('started again, builds from a clean state; SIGTERM stops it the same way', async (t) => {
    const { output, exitMs } = await interruptBuild('SIGTERM', 143);
    assert.doesNotMatch(output, /another build .* is running/);
    t.diagnostic(`exited ${exitMs} ms after SIGTERM`);
  });
});
