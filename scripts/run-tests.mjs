// Runs the project's tests with node's test runner, one process per file: `unit` (no cluster; two
// files at a time, after those marked EXCLUSIVE, alone) or `e2e` (real local cluster). Node 20's
// runner does not expand globs, so the files are collected here.
//
// End-to-end files run on the one shared cluster:
// - first, alone, the files marked EXCLUSIVE: they stop or change a part every other file uses
//   (the API server restarted; the registry stopped, its password rotated);
// - then one lane of the files of ALONGSIDE (the Armada, Memcached and Ptemplate operators, the
//   runtime, the SDK and the cluster parts no other file stops: their own CRDs, namespaces and
//   fault proxies; all files of one operator in one lane, as some delete their operator's CRD),
//   beside the IoT files: first those marked ALONE_AMONG_IOT, one by one (those that point the
//   IoTService CRD's conversion elsewhere while they run, that load the control plane with bursts
//   of instances other IoT files would wait behind, or that bound pauses and lags another
//   instance's load on the node would stretch), then every other file (the IoT operator's, each
//   serving a landscape of its own, and the cluster parts they share) IOT_SLOTS at a time. The
//   IoT files share the IoTService CRD, whose conversion one server started here serves for the
//   whole run.
// So two files run at once while the control plane is loaded hardest (the 2-core machines CI
// runs on were saturated then), three shared IoT files later (two kept the cores about two-thirds
// busy), and one more while the ALONGSIDE lane's last short files overlap them.
// Within a queue (the unit files are one), files run longest first as the last run on this
// machine measured them. Each file's output is printed whole when it ends. At the end: the failed
// files, the ten slowest and the wall time. `E2E_LANES=1` runs every file one after the other.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
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

/** What a file says when it stops or changes something every other file uses (a part of the cluster, a package.json; a comment saying why follows). */
const EXCLUSIVE = '// run-tests: alone, before every other file';
/** What an IoT file's text says when it runs with no other IoT file beside it (a comment saying why follows). */
const ALONE_AMONG_IOT = '// run-tests: alone among the IoT files';
/** How many unit files run at once. */
const UNIT_SLOTS = 2;
/** How many IoT files run at once. */
const IOT_SLOTS = 3;
/** The folders (and files) of the lane beside the IoT files. */
const ALONGSIDE = [
  'operators/armada/test/',
  'operators/memcached/test/',
  'operators/ptemplate/test/',
  'packages/runtime/test/',
  'packages/sdk/test/',
  'cluster/test/cluster-dns.',
  'cluster/test/helm.',
  'cluster/test/olm.',
  'cluster/test/network-policy.',
  'cluster/test/real-node.',
  'cluster/test/sharder.',
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
const testArgs = (file) => ['--import', 'tsx', '--test', '--test-concurrency=1', file];

/** Seconds each file took in the last run on this machine (longest first within a queue). */
const durationsFile = path.join(process.env.IOT_OPERATOR_CACHE_DIR || path.join(os.homedir(), '.cache', 'iot-operator'), `${kind}-seconds.json`);
const lastSeconds = (() => {
  try {
    return JSON.parse(readFileSync(durationsFile, 'utf8'));
  } catch {
    return {};
  }
})();
const longestFirst = (list) => [...list].sort((a, b) => (lastSeconds[b] ?? 0) - (lastSeconds[a] ?? 0));

const started = Date.now();
const results = [];
/** Runs one file; its output is printed once it ends. */
function runFile(file, env = {}) {
  return new Promise((resolve) => {
    const begun = Date.now();
    const child = spawn(process.execPath, testArgs(file), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    const output = [];
    child.stdout.on('data', (chunk) => output.push(chunk));
    child.stderr.on('data', (chunk) => output.push(chunk));
    child.on('close', (code, signal) => {
      const seconds = (Date.now() - begun) / 1000;
      const text = Buffer.concat(output).toString();
      process.stdout.write(`# file ${file}: ${code === 0 ? 'passed' : `FAILED (${signal ?? `exit ${code}`})`} in ${seconds.toFixed(0)} s\n`);
      process.stdout.write(text);
      const count = (what) => Number(text.match(new RegExp(`^# ${what} (\\d+)$`, 'm'))?.[1] ?? 0);
      results.push({ file, seconds, passed: code === 0, tests: count('tests'), failedTests: count('fail') });
      resolve();
    });
  });
}
/** Runs the files of `queue` in `lanes` lanes, each lane taking the next file when its last one ends. */
async function runQueue(queue, lanes, env) {
  const next = longestFirst(queue);
  await Promise.all(Array.from({ length: lanes }, async () => {
    for (let file = next.shift(); file; file = next.shift()) await runFile(file, env);
  }));
}

let summary;
if (kind === 'unit') {
  // Two unit files at a time, longest first: one at a time kept one of the two cores busy (CPU time
  // about equal to the wall time); in file order, the last minute ran a few long files on one core.
  const exclusive = files.filter((file) => readFileSync(file, 'utf8').includes(EXCLUSIVE));
  for (const file of exclusive) await runFile(file);
  await runQueue(files.filter((file) => !exclusive.includes(file)), UNIT_SLOTS);
  summary = `# unit: ${results.length} files, ${results.reduce((n, r) => n + r.tests, 0)} tests (${results.reduce((n, r) => n + r.failedTests, 0)} failed), ${UNIT_SLOTS} files at a time`;
} else {
  const textOf = (file) => readFileSync(file, 'utf8');
  const serial = process.env.E2E_LANES === '1';
  const exclusive = files.filter((file) => serial || textOf(file).includes(EXCLUSIVE));
  const rest = files.filter((file) => !exclusive.includes(file));
  const alongside = rest.filter((file) => ALONGSIDE.some((prefix) => file.startsWith(prefix)));
  const iotAlone = rest.filter((file) => !alongside.includes(file) && textOf(file).includes(ALONE_AMONG_IOT));
  const iotShared = rest.filter((file) => !alongside.includes(file) && !iotAlone.includes(file));
  const conversion = iotShared.length + iotAlone.length > 0 ? await startConversionServer() : undefined;
  for (const file of exclusive) await runFile(file, conversion?.env);
  const alongsideDone = runQueue(alongside, 1, conversion?.env);
  await runQueue(iotAlone, 1, conversion?.env);
  await runQueue(iotShared, IOT_SLOTS, conversion?.env);
  await alongsideDone;
  conversion?.stop();
  summary = `# e2e: ${results.length} files (${exclusive.length} alone; ${alongside.length} in a lane beside ${iotAlone.length} IoT files one by one, then ${iotShared.length}, ${IOT_SLOTS} at a time)`;
}
mkdirSync(path.dirname(durationsFile), { recursive: true });
writeFileSync(durationsFile, JSON.stringify({ ...lastSeconds, ...Object.fromEntries(results.map((r) => [r.file, Math.round(r.seconds)])) }, null, 1));

const failed = results.filter((r) => !r.passed);
const slowest = [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 10);
console.log(`\n${summary} in ${((Date.now() - started) / 60000).toFixed(1)} min`);
console.log('# slowest ten files:');
for (const r of slowest) console.log(`#   ${r.seconds.toFixed(0).padStart(5)} s  ${r.file}`);
if (failed.length > 0) console.log(`# FAILED: ${failed.length} files: ${failed.map((r) => r.file).join(', ')}`);
if (kind === 'e2e') reportRealNode(files);
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

// The IoTService conversion webhook for the whole run (operators/iot/testing/conversion-server.ts
// as a program): its address and CA, as the environment the test files read them from.
async function startConversionServer() {
  const server = spawn(process.execPath, ['--import', 'tsx', 'operators/iot/testing/conversion-server.ts'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const firstLine = await new Promise((resolve, reject) => {
    let text = '';
    server.stdout.on('data', (chunk) => {
      text += chunk;
      if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
    });
    server.on('exit', (code) => reject(new Error(`the IoTService conversion server exited (${code}) before it served`)));
  });
  const { url, ca } = JSON.parse(firstLine);
  return { env: { IOT_CONVERSION_URL: url, IOT_CONVERSION_CA: ca }, stop: () => server.kill() };
}
