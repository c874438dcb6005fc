// Runs the project's tests with node's test runner: `unit` (no cluster) or `e2e` (real local
// cluster). Node 20's runner does not expand globs, so the files are collected here.
import { spawnSync } from 'node:child_process';
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
const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...files], { stdio: 'inherit' });
if (kind === 'e2e') reportRealNode(files);
process.exit(result.status ?? 1);

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
