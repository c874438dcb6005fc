/**
 * Result files and console tables.
 *
 * Guarantees: one run writes one JSON file `bench/results/<scenario>-<UTC timestamp>.json`
 * holding the scenario, its options, versions (Node.js, Kubernetes, git commit and whether the
 * tree had local changes, the operator command), the machine (cores, memory, CPU model, load
 * average at start and end, how many API servers ran on the machine) and every figure, plus raw
 * per-instance samples. `formatTable` is pure: aligned columns, numbers as given.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './kube.ts';
import { countApiservers } from './proc.ts';

/** `versions.kubernetes` of a run that used no cluster (the fleet scenario). */
export const NO_CLUSTER = 'none (no cluster)';

export interface Versions {
  node: string;
  /** The cluster's version, or NO_CLUSTER. */
  kubernetes: string;
  gitCommit: string;
  gitDirty: boolean;
  operatorCommand?: string;
}

export interface Machine {
  cores: number;
  memoryGiB: number;
  cpuModel: string;
  loadavgStart: number[];
  loadavgEnd?: number[];
  kubeApiserversRunning: number;
}

export interface BenchResult {
  scenario: string;
  startedAt: string;
  finishedAt?: string;
  ok: boolean;
  error?: string;
  options: Record<string, unknown>;
  versions: Versions;
  machine: Machine;
  figures: Record<string, unknown>;
  samples: Record<string, number[]>;
}

export function gitInfo(): { commit: string; dirty: boolean } {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'packages', 'operators/iot', 'operators/memcached'], { cwd: repoRoot, encoding: 'utf8' }).trim() !== '';
    return { commit, dirty };
  } catch {
    return { commit: 'unknown', dirty: false };
  }
}

export function machineInfo(): Machine {
  return {
    cores: os.cpus().length,
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    loadavgStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
    kubeApiserversRunning: countApiservers(),
  };
}

export function timestamp(d = new Date()): string {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

export function writeResult(dir: string, result: BenchResult): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${result.scenario}-${timestamp(new Date(result.startedAt))}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  return file;
}

/** Left-aligned first column, right-aligned others. */
export function formatTable(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const cells = [header, ...rows].map((r) => r.map((c) => (typeof c === 'number' ? formatNumber(c) : c)));
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(cells[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

export function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Number.isInteger(n)) return String(n);
  const abs = Math.abs(n);
  if (abs >= 100) return n.toFixed(0);
  if (abs >= 10) return n.toFixed(1);
  if (abs >= 1) return n.toFixed(2);
  return abs >= 0.01 ? n.toFixed(3) : String(Number(n.toPrecision(2)));
}

/** Flattens nested figures into `a.b.c = value` rows for printing. */
export function flatten(obj: unknown, prefix = ''): [string, string | number][] {
  if (obj === null || obj === undefined) return [];
  if (typeof obj === 'number' || typeof obj === 'string' || typeof obj === 'boolean') return [[prefix, typeof obj === 'boolean' ? String(obj) : obj]];
  if (Array.isArray(obj)) return [[prefix, obj.join(' ')]];
  return Object.entries(obj as Record<string, unknown>).flatMap(([k, v]) => flatten(v, prefix ? `${prefix}.${k}` : k));
}
