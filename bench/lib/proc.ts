/**
 * Process and host resource figures from Linux /proc: resident memory, peak resident memory and
 * CPU seconds of a process; busy CPU seconds of the host; CPU seconds of the local control
 * plane's components (from kwokctl's pid files).
 *
 * Guarantees: the `parse*` functions are pure and tolerate a process name containing spaces or
 * parentheses (/proc/<pid>/stat is split after the last ')'); readers return undefined for a
 * process that has gone rather than throwing. `ProcSampler` polls a process every `intervalMs`
 * and keeps the highest resident size seen (VmHWM and VmRSS both count, so a peak between two
 * polls is not lost), the first and last RSS, and the last CPU figure read.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

export const MiB = 1024 * 1024;

let clockTicks: number | undefined;
/** Clock ticks per second (CLK_TCK); 100 on almost every Linux. */
export function clkTck(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** VmRSS and VmHWM in bytes from the text of /proc/<pid>/status. */
export function parseProcStatus(text: string): { rssBytes: number; hwmBytes: number } {
  const kb = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : 0;
  };
  return { rssBytes: kb('VmRSS'), hwmBytes: kb('VmHWM') };
}

/** utime + stime in clock ticks from the text of /proc/<pid>/stat. */
export function parseProcStatTicks(text: string): number {
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).trim().split(/\s+/);
  // After the name: field 3 (state) is index 0, so utime (14) and stime (15) are 11 and 12.
  return Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
}

/** Busy and total jiffies of all CPUs from the first line of /proc/stat. */
export function parseHostCpu(text: string): { busy: number; total: number } {
  const line = text.split('\n').find((l) => l.startsWith('cpu ')) ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const totalTicks = v.slice(0, 8).reduce((s, x) => s + (x || 0), 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: totalTicks - idle, total: totalTicks };
}

/** The parent pid and the name (comm) from the text of /proc/<pid>/stat. */
export function parseProcStatParent(text: string): { ppid: number; name: string } {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).trim().split(/\s+/);
  return { ppid: Number(fields[1] ?? 0), name: text.slice(open + 1, close) };
}

/** pid → its parent and name, for every process of the machine now. */
function processTable(): Map<number, { ppid: number; name: string }> {
  const table = new Map<number, { ppid: number; name: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      table.set(Number(entry), parseProcStatParent(readFileSync(`/proc/${entry}/stat`, 'utf8')));
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

/** The children of `ppid` named `name` (e.g. the nats-server a process started). */
export function childPids(ppid: number, name: string): number[] {
  return [...processTable()].filter(([, p]) => p.ppid === ppid && p.name === name).map(([pid]) => pid);
}

/** CPU seconds of `pid` and of all its descendants alive now; undefined when `pid` has gone. */
export function readTreeCpuSeconds(pid: number): number | undefined {
  const own = readCpuSeconds(pid);
  if (own === undefined) return undefined;
  const table = processTable();
  const tree = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [child, p] of table) {
      if (!tree.has(child) && tree.has(p.ppid)) {
        tree.add(child);
        grew = true;
      }
    }
  }
  tree.delete(pid);
  return [...tree].reduce((sum, child) => sum + (readCpuSeconds(child) ?? 0), own);
}

export function readMemory(pid: number): { rssBytes: number; hwmBytes: number } | undefined {
  try {
    return parseProcStatus(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return undefined;
  }
}

export function readCpuSeconds(pid: number): number | undefined {
  try {
    return parseProcStatTicks(readFileSync(`/proc/${pid}/stat`, 'utf8')) / clkTck();
  } catch {
    return undefined;
  }
}

/** Host CPU as seconds of busy and total CPU time (summed over cores). */
export function readHostCpu(): { busyS: number; totalS: number } {
  const { busy, total } = parseHostCpu(readFileSync('/proc/stat', 'utf8'));
  return { busyS: busy / clkTck(), totalS: total / clkTck() };
}

/** CPU seconds of each control-plane component with a pid file under `<clusterDir>/pids`. */
export function readComponentsCpu(clusterDir: string): Record<string, number> {
  const out: Record<string, number> = {};
  let files: string[] = [];
  try {
    files = readdirSync(path.join(clusterDir, 'pids'));
  } catch {
    return out;
  }
  for (const file of files) {
    if (!file.endsWith('.pid')) continue;
    const pid = Number(readFileSync(path.join(clusterDir, 'pids', file), 'utf8').trim());
    const cpu = Number.isInteger(pid) ? readCpuSeconds(pid) : undefined;
    if (cpu !== undefined) out[file.slice(0, -4)] = cpu;
  }
  return out;
}

/** The value of `--<flag>=` on the command line of the component with a pid file under `<clusterDir>/pids`. */
export function componentFlag(clusterDir: string, component: string, flag: string): string | undefined {
  try {
    const pid = Number(readFileSync(path.join(clusterDir, 'pids', `${component}.pid`), 'utf8').trim());
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const arg = args.find((a) => a.startsWith(`--${flag}=`));
    return arg?.slice(flag.length + 3);
  } catch {
    return undefined;
  }
}

/** How many kube-apiserver processes run on this machine (other clusters add noise). */
export function countApiservers(): number {
  let n = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.split('\0')[0]?.endsWith('kube-apiserver')) n++;
    } catch {
      // gone meanwhile
    }
  }
  return n;
}

export class ProcSampler {
  peakRssBytes = 0;
  firstRssBytes: number | undefined;
  lastRssBytes: number | undefined;
  lastCpuS: number | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly pid: number,
    private readonly intervalMs = 200,
  ) {}

  start(): this {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
    return this;
  }

  sample(): void {
    const mem = readMemory(this.pid);
    if (mem) {
      this.peakRssBytes = Math.max(this.peakRssBytes, mem.hwmBytes, mem.rssBytes);
      this.firstRssBytes ??= mem.rssBytes;
      this.lastRssBytes = mem.rssBytes;
    }
    const cpu = readCpuSeconds(this.pid);
    if (cpu !== undefined) this.lastCpuS = cpu;
  }

  stop(): void {
    this.sample();
    clearInterval(this.timer);
  }
}
