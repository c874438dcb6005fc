/**
 * The end-to-end test environment of this repository: the runtime's TestEnv on the local cluster.
 *
 * Guarantees:
 * - `localTestEnv()` starts or reuses the local cluster once per test process (`cli/cluster.ts up`
 *   beside this package, which builds nothing when its binaries are cached) unless `KUBECONFIG` names a
 *   cluster and `IOT_TEST_USE_KUBECONFIG=1` asks for it; every call returns the same env.
 * - `clusterDir` is the directory of the local cluster's scripts (cli/, engines/, parts/);
 *   `repoRoot` is the repository's root.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { TestEnv } from '@iot-operator/runtime/testing';

const run = promisify(execFile);
export const clusterDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = path.dirname(clusterDir);

/** Starts or reuses the local cluster and returns the path of its kubeconfig. */
async function ensureLocalCluster(): Promise<string> {
  if (process.env.IOT_TEST_USE_KUBECONFIG === '1' && process.env.KUBECONFIG) return process.env.KUBECONFIG;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(clusterDir, 'cli/cluster.ts'), 'up'], { maxBuffer: 16 * 1024 * 1024, timeout: 60 * 60 * 1000 });
  const last = stdout.trim().split('\n').at(-1) ?? '';
  if (!last.startsWith('KUBECONFIG=')) throw new Error(`cluster up did not print KUBECONFIG=...; its output ended with: ${last}`);
  return last.slice('KUBECONFIG='.length);
}

let shared: Promise<TestEnv> | undefined;

/** The process-wide test environment on the local cluster (started once). */
export function localTestEnv(): Promise<TestEnv> {
  shared ??= ensureLocalCluster().then((kubeconfigPath) => TestEnv.connect(kubeconfigPath));
  return shared;
}
