/**
 * The pure parts of the `reference` scenario (scenarios/reference.ts): the step plan, where
 * throughput saturates and how the latency step is paced, the kubelet's stats/summary and the real
 * node's cgroup files read into per-pod figures, image sizes from manifests, and the database's
 * count of stored messages and their time from receipt to storage.
 *
 * Guarantees: no I/O; inputs are never mutated. Times are milliseconds since the epoch (the
 * kubelet's and PostgreSQL's clocks are this machine's).
 * - `saturation` finds the step from which the rate stops growing for good: the first step such
 *   that neither it nor any later step beats the best rate before it by `growth` (default 10 %).
 *   So a single dip that later steps grow past is not taken for it (a shared machine's noise).
 *   The peak is the best step of all. No such step (the last step still grew): undefined.
 * - `nextDevices` walks the planned device counts in order, then, only while no saturation has
 *   been found, keeps multiplying the last count by `factor` up to `max`.
 * - `limitingPod` is the pod using the largest share of its CPU limit (of the machine's cores when
 *   it has none); `limitedBy` says what a step's CPU figures point at: that pod when it used at
 *   least `near` (default 90 %) of its limit, else the host's CPU when the host was at least that
 *   busy, else no CPU at all (the rate is bound by waiting, not computing).
 * - `workingSetBytes` is the kubelet's (cadvisor's) working set of a cgroup v1 memory controller:
 *   usage minus inactive file pages, never below 0.
 * - `latencyPace` plans the paced latency step: a share of the highest stored rate among a
 *   protocol's steps, offered by as many devices as the step that reached it, each pausing so
 *   long after an acknowledgement that ack time plus pause gives it its part of that rate.
 * - The SQL built here names devices only by a prefix of lowercase letters, digits and '-'
 *   (checked: no LIKE wildcard, no quote), and times as ISO timestamps.
 */

export interface StepRate {
  devices: number;
  /** Messages per second (acknowledged, or stored). */
  perS: number;
}

export interface Saturation {
  /** Devices of the first step from which no step beat the best before it by `growth`. */
  devices: number;
  /** Devices of the step before it (the last that still grew). */
  previousDevices: number;
  /** Index of that step in the list given. */
  index: number;
  peakPerS: number;
  peakDevices: number;
}

export function saturation(steps: readonly StepRate[], growth = 0.1): Saturation | undefined {
  let best = steps[0]?.perS ?? 0;
  for (let i = 1; i < steps.length; i++) {
    if (steps.slice(i).every((s) => s.perS < best * (1 + growth))) {
      const peak = steps.reduce((top, s) => (s.perS > top.perS ? s : top), steps[0]!);
      return { devices: steps[i]!.devices, previousDevices: steps[i - 1]!.devices, index: i, peakPerS: peak.perS, peakDevices: peak.devices };
    }
    best = Math.max(best, steps[i]!.perS);
  }
  return undefined;
}

/** The device count of the next step, or undefined when the plan (and its extension while unsaturated) is done. */
export function nextDevices(plan: readonly number[], done: readonly StepRate[], o: { factor?: number; max?: number; growth?: number } = {}): number | undefined {
  if (done.length < plan.length) return plan[done.length];
  if (done.length === 0 || saturation(done, o.growth) !== undefined) return undefined;
  const next = done.at(-1)!.devices * (o.factor ?? 4);
  return next <= (o.max ?? 256) ? next : undefined;
}

/** A throughput step's device count and median seconds' rates, as `latencyPace` reads them. */
export interface StepRates {
  devices: number;
  ackedPerS: number;
  storedPerS: number;
}

export interface Pace {
  /** Devices of the step with the highest stored rate (the first of equals). */
  devices: number;
  /** That step's stored rate. */
  peakStoredPerS: number;
  /** share × peakStoredPerS: the rate the paced devices are meant to offer together. */
  targetPerS: number;
  /** That step's time from sending a message to its acknowledgement (devices / acknowledged rate, Little's law). */
  ackMs: number;
  /** Pause after each acknowledgement, whole ms: devices / targetPerS − ackMs, never below 0. */
  intervalMs: number;
}

/** How the latency step paces its devices (see the module comment); undefined without a step that stored and acknowledged anything. */
export function latencyPace(steps: readonly StepRates[], share: number): Pace | undefined {
  const peak = steps.reduce<StepRates | undefined>((top, s) => (!top || s.storedPerS > top.storedPerS ? s : top), undefined);
  if (!peak || !(peak.storedPerS > 0) || !(peak.ackedPerS > 0)) return undefined;
  const targetPerS = share * peak.storedPerS;
  const ackMs = (1000 * peak.devices) / peak.ackedPerS;
  return { devices: peak.devices, peakStoredPerS: peak.storedPerS, targetPerS, ackMs, intervalMs: Math.max(0, Math.round((1000 * peak.devices) / targetPerS - ackMs)) };
}

/** A pod as the kubelet's /stats/summary reports it, reduced to what the scenario uses. */
export interface PodStats {
  name: string;
  namespace: string;
  uid: string;
  cpu?: { at: number; coreNanoSeconds: number };
  memory?: { at: number; workingSetBytes: number };
}

interface SummaryPod {
  podRef?: { name?: string; namespace?: string; uid?: string };
  cpu?: { time?: string; usageCoreNanoSeconds?: number };
  memory?: { time?: string; workingSetBytes?: number };
}

/** The pods of `namespace` in a /stats/summary answer (all pods when `namespace` is undefined). */
export function parseSummaryPods(summary: unknown, namespace?: string): PodStats[] {
  const pods = (summary as { pods?: SummaryPod[] } | undefined)?.pods ?? [];
  const out: PodStats[] = [];
  for (const p of pods) {
    const ref = p.podRef;
    if (!ref?.name || !ref.uid || (namespace !== undefined && ref.namespace !== namespace)) continue;
    const stats: PodStats = { name: ref.name, namespace: ref.namespace ?? '', uid: ref.uid };
    const cpuAt = Date.parse(p.cpu?.time ?? '');
    if (Number.isFinite(cpuAt) && typeof p.cpu?.usageCoreNanoSeconds === 'number') stats.cpu = { at: cpuAt, coreNanoSeconds: p.cpu.usageCoreNanoSeconds };
    const memAt = Date.parse(p.memory?.time ?? '');
    if (Number.isFinite(memAt) && typeof p.memory?.workingSetBytes === 'number') stats.memory = { at: memAt, workingSetBytes: p.memory.workingSetBytes };
    out.push(stats);
  }
  return out;
}

/** Per pod name, the largest working set among samples taken within [from, to] (none there: the pod is absent). */
export function maxWorkingSetWithin(samples: readonly (readonly PodStats[])[], from: number, to: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const sample of samples) {
    for (const p of sample) {
      if (!p.memory || p.memory.at < from || p.memory.at > to) continue;
      out.set(p.name, Math.max(out.get(p.name) ?? 0, p.memory.workingSetBytes));
    }
  }
  return out;
}

/** Per pod name, the latest working set sample (and when it was taken). */
export function latestWorkingSet(samples: readonly (readonly PodStats[])[]): Map<string, { at: number; bytes: number }> {
  const out = new Map<string, { at: number; bytes: number }>();
  for (const sample of samples) {
    for (const p of sample) {
      if (!p.memory) continue;
      const seen = out.get(p.name);
      if (!seen || p.memory.at > seen.at) out.set(p.name, { at: p.memory.at, bytes: p.memory.workingSetBytes });
    }
  }
  return out;
}

/** A CPU quantity ("1", "500m", "1.5", 2) in cores; undefined for none or one that is not a CPU quantity. */
export function cpuCores(quantity: string | number | undefined): number | undefined {
  if (quantity === undefined) return undefined;
  if (typeof quantity === 'number') return Number.isFinite(quantity) && quantity >= 0 ? quantity : undefined;
  const m = /^([0-9]+(?:\.[0-9]+)?|\.[0-9]+)(m?)$/.exec(quantity.trim());
  if (!m) return undefined;
  return Number(m[1]) / (m[2] === 'm' ? 1000 : 1);
}

/** The CPU limit of a pod: the sum of its containers' limits, undefined when any container has none. */
export function podCpuLimit(pod: { spec?: { containers?: { resources?: { limits?: Record<string, string | number> } }[] } }): number | undefined {
  const containers = pod.spec?.containers ?? [];
  if (containers.length === 0) return undefined;
  let sum = 0;
  for (const c of containers) {
    const cores = cpuCores(c.resources?.limits?.cpu);
    if (cores === undefined) return undefined;
    sum += cores;
  }
  return sum;
}

/** `cpu.stat` of a cgroup v1 cpu controller: periods throttled and the nanoseconds throttled. */
export function parseCpuStat(text: string): { throttledPeriods: number; throttledNs: number } {
  const value = (key: string) => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  return { throttledPeriods: value('nr_throttled'), throttledNs: value('throttled_time') };
}

/** Stable keys for pods: `<component>-<i>`, i counting the component's pods in name order. */
export function podKeys(pods: readonly { name: string; component: string }[]): Map<string, string> {
  const out = new Map<string, string>();
  const byComponent = new Map<string, string[]>();
  for (const p of pods) byComponent.set(p.component, [...(byComponent.get(p.component) ?? []), p.name]);
  for (const [component, names] of byComponent) [...names].sort().forEach((name, i) => out.set(name, `${component}-${i}`));
  return out;
}

export interface PodCpu {
  key: string;
  cores: number;
  limitCores?: number;
}

/** The pod using the largest share of its CPU limit (of `machineCores` without one), with that share. */
export function limitingPod(pods: readonly PodCpu[], machineCores: number): (PodCpu & { share: number }) | undefined {
  let best: (PodCpu & { share: number }) | undefined;
  for (const p of pods) {
    const share = p.cores / (p.limitCores ?? machineCores);
    if (!best || share > best.share) best = { ...p, share };
  }
  return best;
}

export type Limiter = { kind: 'pod'; pod: string; share: number } | { kind: 'host'; utilisation: number } | { kind: 'none'; busiestPod?: string; share?: number; utilisation: number };

/** What a step's CPU figures point at as its limit (see the module comment). */
export function limitedBy(pods: readonly PodCpu[], machineCores: number, hostUtilisation: number, near = 0.9): Limiter {
  const top = limitingPod(pods, machineCores);
  if (top && top.share >= near) return { kind: 'pod', pod: top.key, share: top.share };
  if (hostUtilisation >= near) return { kind: 'host', utilisation: hostUtilisation };
  return { kind: 'none', ...(top ? { busiestPod: top.key, share: top.share } : {}), utilisation: hostUtilisation };
}

/** The working set of a cgroup v1 memory controller from its memory.usage_in_bytes and memory.stat. */
export function workingSetBytes(usageBytes: number, memoryStat: string): number {
  const inactiveFile = Number(/^total_inactive_file (\d+)$/m.exec(memoryStat)?.[1] ?? 0);
  return Math.max(0, usageBytes - inactiveFile);
}

/** Bytes of an image manifest's config and layers (compressed sizes when the manifest is a registry's). */
export function manifestBytes(manifest: unknown): number {
  const m = manifest as { config?: { size?: number }; layers?: { size?: number }[]; manifests?: unknown };
  if (m.manifests !== undefined || !Array.isArray(m.layers)) throw new Error('not a single-image manifest (an index, or no layers)');
  return (m.config?.size ?? 0) + m.layers.reduce((sum, l) => sum + (l.size ?? 0), 0);
}

const PREFIX = /^[a-z0-9][a-z0-9-]*$/;

/** `prefix` as a LIKE pattern of the device ids starting with it (see the module comment). */
function devicesLike(prefix: string): string {
  if (!PREFIX.test(prefix)) throw new Error(`device id prefix must be lowercase letters, digits and '-', got "${prefix}"`);
  return `device_id LIKE '${prefix}%'`;
}

const timestamp = (ms: number) => `'${new Date(ms).toISOString()}'::timestamptz`;

/**
 * SQL counting the telemetry rows of devices whose ids start with `prefix`: all of them, those
 * stored within [from, to), and when the last was stored (ms since the epoch).
 */
export function storedCountSql(prefix: string, from: number, to: number): string {
  const like = devicesLike(prefix);
  return (
    `SELECT count(*), count(*) FILTER (WHERE stored_at >= ${timestamp(from)} AND stored_at < ${timestamp(to)}), ` +
    `coalesce(floor(extract(epoch FROM max(stored_at)) * 1000), 0)::bigint FROM telemetry WHERE ${like}`
  );
}

/**
 * SQL counting, per whole second of [from, from + seconds × 1000), the telemetry rows of devices
 * whose ids start with `prefix` stored in it: rows `<second>,<count>` (seconds with none absent).
 */
export function storedPerSecondSql(prefix: string, from: number, seconds: number): string {
  const like = devicesLike(prefix);
  return (
    `SELECT floor(extract(epoch FROM stored_at - ${timestamp(from)}))::int AS s, count(*) FROM telemetry ` +
    `WHERE ${like} AND stored_at >= ${timestamp(from)} AND stored_at < ${timestamp(from + seconds * 1000)} GROUP BY s ORDER BY s`
  );
}

/**
 * SQL of the time from receipt to storage (`stored_at - received_at`, in ms) of the telemetry rows
 * of devices whose ids start with `prefix` received within [from, to): one row `<rows>,<p50>,<p90>,
 * <p99>,<max>` (percentiles interpolated by percentile_cont; all but the count empty for no rows).
 */
export function latencySql(prefix: string, from: number, to: number): string {
  const like = devicesLike(prefix);
  return (
    'SELECT n, p[1], p[2], p[3], top FROM (' +
    'SELECT count(*) AS n, percentile_cont(ARRAY[0.5,0.9,0.99]) WITHIN GROUP (ORDER BY ms) AS p, max(ms) AS top FROM (' +
    `SELECT (extract(epoch FROM stored_at - received_at) * 1000)::float8 AS ms FROM telemetry ` +
    `WHERE ${like} AND received_at >= ${timestamp(from)} AND received_at < ${timestamp(to)}` +
    ') AS latency) AS q'
  );
}

export interface Latency {
  rows: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** The row `psql -At -F,` prints for `latencySql`, times rounded to 0.1 ms; NaN times when no row was counted. */
export function parseLatency(output: string): Latency {
  const line = output.trim().split('\n').at(-1) ?? '';
  const parts = line.split(',');
  const rows = Number(parts[0]);
  const times = parts.slice(1).map((v) => (v === '' ? Number.NaN : Math.round(Number(v) * 10) / 10));
  const expected = rows === 0 ? times.every((t) => Number.isNaN(t)) : times.every((t) => Number.isFinite(t));
  if (parts.length !== 5 || parts[0] === '' || !Number.isInteger(rows) || !expected) throw new Error(`unexpected psql output: ${output.slice(0, 200)}`);
  const [p50Ms, p90Ms, p99Ms, maxMs] = times as [number, number, number, number];
  return { rows, p50Ms, p90Ms, p99Ms, maxMs };
}

/** The counts of `seconds` seconds from `psql -At -F,` rows `<second>,<count>`; a second without a row counted 0. */
export function parsePerSecond(output: string, seconds: number): number[] {
  const counts = new Array<number>(seconds).fill(0);
  for (const line of output.trim().split('\n')) {
    if (line === '') continue;
    const [second, count] = line.split(',').map(Number);
    if (!Number.isInteger(second) || !Number.isFinite(count)) throw new Error(`unexpected psql output: ${line.slice(0, 200)}`);
    if (second! >= 0 && second! < seconds) counts[second!] = count!;
  }
  return counts;
}

/** How many of `times` (ms) fall in each whole second of [from, from + seconds × 1000). */
export function perSecondCounts(times: Iterable<number>, from: number, seconds: number): number[] {
  const counts = new Array<number>(seconds).fill(0);
  for (const t of times) {
    const second = Math.floor((t - from) / 1000);
    if (second >= 0 && second < seconds) counts[second]!++;
  }
  return counts;
}

/** The row `psql -At -F,` prints for `storedCountSql`. */
export function parseStoredCount(output: string): { total: number; inWindow: number; lastStoredAt: number } {
  const line = output.trim().split('\n').at(-1) ?? '';
  const parts = line.split(',').map((v) => Number(v));
  if (parts.length !== 3 || parts.some((v) => !Number.isFinite(v))) throw new Error(`unexpected psql output: ${output.slice(0, 200)}`);
  return { total: parts[0]!, inWindow: parts[1]!, lastStoredAt: parts[2]! };
}
