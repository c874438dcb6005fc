/**
 * Where a process's CPU time went, from a V8 `.cpuprofile` (written by `node --cpu-prof`).
 *
 * Guarantees: pure. Self time of a profile node is the sum of the sampling intervals
 * (`timeDeltas`) attributed to it — the exact figure DevTools shows, not hit count × nominal
 * interval. `summarizeProfile` aggregates self time by function (name, file and line) and by
 * area: a package under node_modules, one of our source files (relative to the repository),
 * Node.js internals, or V8's own pseudo-frames such as "(garbage collector)", "(program)" and
 * "(idle)". Both lists are sorted by self time, largest first; percentages are of the total
 * non-idle time.
 */

export interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface ProfileEntry {
  name: string;
  selfMs: number;
  percent: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  functions: ProfileEntry[];
  areas: ProfileEntry[];
}

/** The area a script URL belongs to; `root` is stripped from our own files. */
export function areaOf(url: string, functionName: string, root = ''): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const path = url.replace(/^file:\/\//, '');
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = path.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (path.startsWith('node:')) return 'node internals';
  if (root && path.startsWith(root)) return path.slice(root.length).replace(/^\//, '');
  return path;
}

export function summarizeProfile(profile: CpuProfile, root = '', top = 25): ProfileSummary {
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  // timeDeltas[i] is the time since the previous sample; the interval belongs to sample i.
  for (let i = 0; i < samples.length; i++) selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + Math.max(0, deltas[i] ?? 0));
  const byFunction = new Map<string, number>();
  const byArea = new Map<string, number>();
  let idleUs = 0;
  let totalUs = 0;
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0;
    if (us === 0) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    totalUs += us;
    const area = areaOf(url, functionName, root);
    const fn = url === '' ? functionName || '(anonymous)' : `${functionName || '(anonymous)'} ${area}:${lineNumber + 1}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
    byArea.set(area, (byArea.get(area) ?? 0) + us);
  }
  const list = (m: Map<string, number>): ProfileEntry[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .slice(0, top)
      .map(([name, us]) => ({ name, selfMs: Math.round(us / 100) / 10, percent: totalUs > 0 ? Math.round((us / totalUs) * 1000) / 10 : 0 }));
  return { totalMs: Math.round(totalUs / 100) / 10, idleMs: Math.round(idleUs / 100) / 10, functions: list(byFunction), areas: list(byArea) };
}
