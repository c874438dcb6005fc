// Runs the project's tests with node's test runner: `unit` (no cluster) or `e2e` (real local
// cluster). Node 20's runner does not expand globs, so the files are collected here.
//
// End-to-end files run one per process on the one shared cluster:
// - first, alone, the files that stop a part every other file uses (the API server restarted, the
//   registry stopped: EXCLUSIVE);
// - then two lanes side by side, each one file at a time: the files of ALONGSIDE (the Armada,
//   Memcached and Ptemplate operators, the runtime, the SDK and the cluster parts no other file
//   stops: their own CRDs, namespaces and fault proxies; all files of one operator in one lane, as
//   some delete their operator's CRD), and every other file (the IoT operator's, which share the
//   IoTService CRD and its conversion, the sharder, CoreDNS).
// Each file's output is printed whole when it ends. At the end: the failed files, the ten slowest
// and the wall time. `E2E_LANES=1` runs every file one after the other.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const kind = process.argv[2];
if (kind !== 'unit' && kind !== 'e2e') {
  console.error('usage: node scripts/run-tests.mjs unit|e2e [file filter]');
  process.exit(2);
}
const filter = process.argv[3];
const roots = ['cluster/test', 'packages', 'operators', 'workloads', 'bench', 'scripts', 'images'];
const suffix = `.${kind}.test.ts`;

/** What a file's text shows when it stops a part of the cluster every other file uses. */
const EXCLUSIVE = ['restart-apiserver', 'restartApiServer', 'registry_stop'];
/** The folders (and files) of the second lane. */
const ALONGSIDE = [
  'operators/armada/test/',
  'operators/memcached/test/',
  'operators/ptemplate/test/',
  'packages/runtime/test/',
  'packages/sdk/test/',
  'cluster/test/helm.',
  'cluster/test/olm.',
  'cluster/test/network-policy.',
  'cluster/test/real-node.',
  'cluster/test/volumes.',
];

function collect(dir, out) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const entry of entries) {
    if (entry === 'node_modules') continue;
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) collect(full, out);
    else if (entry.endsWith(suffix) && (!filter || full.includes(filter))) out.push(full);
  }
  return out;
}

const files = roots.flatMap((root) => collect(root, [])).sort();
if (files.length === 0) {
  console.error(`no ${kind} test files found`);
  process.exit(1);
}
// Not --test-force-exit: with it, node 20 once reported a file's tests only up to its middle, as passed.
const testArgs = (list) => ['--import', 'tsx', '--test', '--test-concurrency=1', ...list];
if (kind === 'unit') {
  const result = spawnSync(process.execPath, testArgs(files), { stdio: 'inherit' });
  process.exit(result.status ?? 1);
}

const exclusive = files.filter((file) => EXCLUSIVE.some((marker) => readFileSync(file, 'utf8').includes(marker)));
const shared = files.filter((file) => !exclusive.includes(file));
const alongside = (file) => process.env.E2E_LANES !== '1' && ALONGSIDE.some((prefix) => file.startsWith(prefix));
const lanes = [shared.filter((f) => !alongside(f)), shared.filter(alongside)].filter((lane) => lane.length > 0);

const started = Date.now();
const results = [];
/** Runs one file; its output is printed once it ends. */
function runFile(file) {
  return new Promise((resolve) => {
    const begun = Date.now();
    const child = spawn(process.execPath, testArgs([file]), { stdio: ['ignore', 'pipe', 'pipe'] });
    const output = [];
    child.stdout.on('data', (chunk) => output.push(chunk));
    child.stderr.on('data', (chunk) => output.push(chunk));
    child.on('close', (code, signal) => {
      const seconds = (Date.now() - begun) / 1000;
      process.stdout.write(`# file ${file}: ${code === 0 ? 'passed' : `FAILED (${signal ?? `exit ${code}`})`} in ${seconds.toFixed(0)} s\n`);
      process.stdout.write(Buffer.concat(output));
      results.push({ file, seconds, passed: code === 0 });
      resolve();
    });
  });
}
for (const file of exclusive) await runFile(file);
await Promise.all(lanes.map(async (lane) => {
  for (const file of lane) await runFile(file);
}));

const failed = results.filter((r) => !r.passed);
const slowest = [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 10);
console.log(`\n# e2e: ${results.length} files (${exclusive.length} alone, then ${lanes.map((l) => l.length).join(' beside ')}) in ${((Date.now() - started) / 60000).toFixed(1)} min`);
console.log('# slowest ten files:');
for (const r of slowest) console.log(`#   ${r.seconds.toFixed(0).padStart(5)} s  ${r.file}`);
if (failed.length > 0) console.log(`# FAILED: ${failed.length} files: ${failed.map((r) => r.file).join(', ')}`);
reportRealNode(files);
process.exit(failed.length > 0 ? 1 : 0);

// Tests of operators in real pods (files that ask `realNode(...)`) skip where the cluster has no
// real node: say so, and why, on the last lines, so that nobody takes them for passed.
function reportRealNode(files) {
  const clusterDir = path.join(process.env.KWOK_WORKDIR || path.join(os.homedir(), '.kwok'), 'clusters', process.env.CLUSTER_NAME || 'iot-operator');
  const unavailable = path.join(clusterDir, 'real-node-unavailable');
  let reason;
  if (existsSync(unavailable)) reason = `no real node on this machine: ${readFileSync(unavailable, 'utf8').trim()}`;
  else if (!existsSync(path.join(clusterDir, 'real-node', 'enabled'))) reason = 'the cluster was started without a real node (npm run cluster:up -- --real-node, or npm test)';
  if (!reason) return;
  const needing = files.filter((f) => readFileSync(f, 'utf8').includes('realNode('));
  if (needing.length === 0) return;
  console.log(`\nNOT RUN: the tests of operators in real pods in ${needing.length} files (${needing.join(', ')}): ${reason}`);
}
