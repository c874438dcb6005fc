/**
 * The fault suite alone: `npm run faults` runs the end-to-end fault tests
 * (packages/runtime/test/faults/*.e2e.test.ts) on the local cluster and writes their figures.
 *
 * Guarantees: every row a fault test reports (fault, injection, behaviour, time to recover,
 * objects lost, test) lands in bench/results/faults/faults-<UTC time>.json, and the same rows as
 * the Markdown table of docs/reliability.md in bench/results/faults/faults-<UTC time>.md, which
 * is also printed; the exit code is the tests' (a failed test still writes the rows it reported).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FAULT_REPORT_FILE, readFaultRows } from '../packages/runtime/test/faults/fault-report.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dir = path.join(root, 'bench/results/faults');
mkdirSync(dir, { recursive: true });
const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
const rowsFile = path.join(dir, `faults-${stamp}.jsonl`);
writeFileSync(rowsFile, '');

const result = spawnSync(process.execPath, [path.join(root, 'scripts/run-tests.mjs'), 'e2e', 'packages/runtime/test/faults/'], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, [FAULT_REPORT_FILE]: rowsFile },
});

const rows = readFaultRows(rowsFile);
rmSync(rowsFile);
const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const table = [
  '| fault | how it is injected | what the operator did | time to recover | objects lost | test |',
  '| --- | --- | --- | --- | --- | --- |',
  ...rows.map((r) => `| ${cell(r.fault)} | ${cell(r.injection)} | ${cell(r.behaviour)} | ${(r.recoveryMs / 1000).toFixed(1)} s | ${r.objectsLost} | \`${r.test}\` |`),
].join('\n');
writeFileSync(path.join(dir, `faults-${stamp}.json`), `${JSON.stringify({ at: new Date().toISOString(), exitCode: result.status, rows }, null, 2)}\n`);
writeFileSync(path.join(dir, `faults-${stamp}.md`), `${table}\n`);
console.log(`\n${table}\n\nfigures: ${path.relative(root, path.join(dir, `faults-${stamp}.json`))}`);
process.exit(result.status ?? 1);
