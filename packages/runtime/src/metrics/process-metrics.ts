/**
 * The process metrics of an operator, computed when `/metrics` is scraped and at no other time:
 * CPU (`process_cpu_seconds_total` and its user/system parts), memory
 * (`process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_heap_bytes`, the
 * V8 heap's `nodejs_heap_size_total_bytes` / `nodejs_heap_size_used_bytes` /
 * `nodejs_external_memory_bytes`), file descriptors (`process_open_fds`, `process_max_fds`),
 * `process_start_time_seconds` and `nodejs_version_info` — the names prom-client's default
 * metrics and client_golang's process collector use.
 *
 * Guarantees: nothing runs between scrapes — no event-loop-delay timer and no observer of
 * garbage collections, which prom-client's defaults keep running (a 10 ms timer, and a callback
 * per collection: measured at about 5 ms of CPU per second of an idle operator) — so an idle
 * operator stays idle. Values the platform cannot give (no /proc) are left out, never reported
 * as 0.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Counter, Gauge, type Registry } from './prom-client.ts';

/** `VmRSS`, `VmSize` and `VmData` of /proc/self/status, in bytes; undefined without /proc. */
export function procStatusMemory(status: string): { rss?: number; virtual?: number; data?: number } {
  const kib = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  };
  return { rss: kib('VmRSS'), virtual: kib('VmSize'), data: kib('VmData') };
}

/** The soft limit of "Max open files" in /proc/self/limits; undefined when unlimited or absent. */
export function maxOpenFiles(limits: string): number | undefined {
  const match = /^Max open files\s+(\d+)/m.exec(limits);
  return match ? Number(match[1]) : undefined;
}

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

export function registerProcessMetrics(registry: Registry): void {
  const registers = [registry];
  const startedAt = Math.round(Date.now() / 1000 - process.uptime());
  const cpu = (name: string, help: string, of: (usage: NodeJS.CpuUsage) => number) => {
    let counted = 0;
    new Counter({ name, help, registers, collect() {
      const now = of(process.cpuUsage());
      this.inc((now - counted) / 1e6);
      counted = now;
    } });
  };
  cpu('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', (u) => u.user);
  cpu('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.', (u) => u.system);
  cpu('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', (u) => u.user + u.system);

  new Gauge({ name: 'process_start_time_seconds', help: 'Start time of the process since unix epoch in seconds.', registers, collect() {
    this.set(startedAt);
  } });
  // /proc/self/status is read once per scrape: the resident size's gauge, registered (and so
  // collected) before the other two, sets them as well, as prom-client's own collector does.
  new Gauge({ name: 'process_resident_memory_bytes', help: 'Resident memory size in bytes.', registers, collect() {
    const status = readProc('/proc/self/status');
    if (status === undefined) return this.set(process.memoryUsage.rss());
    const sizes = procStatusMemory(status);
    if (sizes.rss !== undefined) this.set(sizes.rss);
    if (sizes.virtual !== undefined) virtualMemory.set(sizes.virtual);
    if (sizes.data !== undefined) dataMemory.set(sizes.data);
  } });
  const virtualMemory = new Gauge({ name: 'process_virtual_memory_bytes', help: 'Virtual memory size in bytes.', registers });
  const dataMemory = new Gauge({ name: 'process_heap_bytes', help: 'Process heap size in bytes.', registers });
  new Gauge({ name: 'process_open_fds', help: 'Number of open file descriptors.', registers, collect() {
    try {
      this.set(readdirSync('/proc/self/fd').length - 1); // less the descriptor of the listing itself
    } catch {
      // no /proc: left out
    }
  } });
  new Gauge({ name: 'process_max_fds', help: 'Maximum number of open file descriptors.', registers, collect() {
    const limits = readProc('/proc/self/limits');
    const max = limits === undefined ? undefined : maxOpenFiles(limits);
    if (max !== undefined) this.set(max);
  } });

  // One process.memoryUsage() per scrape, likewise.
  new Gauge({ name: 'nodejs_heap_size_total_bytes', help: 'Process heap size from Node.js in bytes.', registers, collect() {
    const usage = process.memoryUsage();
    this.set(usage.heapTotal);
    heapUsed.set(usage.heapUsed);
    external.set(usage.external);
  } });
  const heapUsed = new Gauge({ name: 'nodejs_heap_size_used_bytes', help: 'Process heap size used from Node.js in bytes.', registers });
  const external = new Gauge({ name: 'nodejs_external_memory_bytes', help: 'Node.js external memory size in bytes.', registers });
  const [major, minor, patch] = process.versions.node.split('.').map(Number);
  new Gauge({ name: 'nodejs_version_info', help: 'Node.js version info.', labelNames: ['version', 'major', 'minor', 'patch'], registers })
    .labels({ version: process.version, major: String(major), minor: String(minor), patch: String(patch) })
    .set(1);
}
