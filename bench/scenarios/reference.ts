/**
 * `reference`: the reference IoT service (workloads/iot-service) on the cluster's real node, as a
 * user runs it — figures for docs/in-cluster.md. Needs the cluster with the real node
 * (`--kubeconfig`); the bench cluster has none.
 *
 * What it does, in order:
 * 1. Builds and pushes the five images (`scripts/iot-service-images.ts --version 2.4.1`) and
 *    records each image's size twice: compressed, as pushed (the registry's manifest: config plus
 *    gzip layers), and uncompressed (buildah's local manifest: config plus tar layers).
 * 2. Runs the IoT operator as the other scenarios do (its own process, the bundle as the image
 *    runs it, `--default-registry` the local registry's `iot` prefix, the real node's taint and
 *    label allowed by `--allowed-toleration-keys` and `--allowed-node-label-keys`) for a landscape of its own
 *    (`bench-ref-<random>`, with the registry's credentials as its image-pull-secret), and creates
 *    ONE IoTService with every component on the real node: gateway 2 (MQTT and HTTP, devices
 *    admitted from the node's own address), core 2, processing 1, broker 1 and database 1 (1Gi
 *    each) — seven pods. From the create request on, a device keeps trying — find core and the API
 *    token, register, publish one MQTT message at a gateway, read it back from core — until its
 *    first message is read back: apply → first stored message. Apply → Available is the
 *    IoTService's status (watched).
 * 3. After `--settle` idle seconds, the working set of each of the seven pods (the kubelet's
 *    /stats/summary through the API server's node proxy, the first whose samples all postdate the
 *    settling; and each pod's memory cgroup read directly).
 * 4. Throughput, per protocol (`--protocols`, default mqtt,http) and step (`--devices`, default
 *    1,4,16,64, then ×4 up to 256 while the acknowledged rate still grows): K devices registered,
 *    then K of the simulator's continuous devices (`startContinuousDevice`: one message at a time,
 *    the next as soon as the last is acknowledged — MQTT QoS 1 PUBACKs over one kept connection,
 *    HTTP 202s over keep-alive — each message under its own id, sent again until acknowledged),
 *    spread over the two gateway pods by their IPs as a Service would. Once every device has had
 *    a message acknowledged, 3 s of warm-up, then a window of `--window` seconds (default 30):
 *    messages acknowledged in it per second, and rows the database stored in it per second
 *    (counted in the database once the backlog drained: `stored_at` within the window), each also
 *    counted per whole second of the window (median, lowest, highest second); each pod's CPU over
 *    the window (its cgroup's cpuacct.usage on the real node, throttled time from cpu.stat), the
 *    host's CPU, this process's (the simulator's) and the rest (`otherCores`: control plane, node
 *    agents, anything else on the machine); the pods' largest working set /stats/summary reported
 *    within the window, and each pod's memory cgroup's at its end. Saturation: the step from which
 *    the median second's rate stops growing by 10 % (lib/reference.ts), for the acknowledged and
 *    for the stored rate, with what that step's CPU figures point at (a pod at ≥ 90 % of its CPU
 *    limit, else the host when ≥ 90 % busy, else no CPU).
 * 5. Latency, per protocol, after its throughput steps: one more step, paced (lib/reference.ts
 *    `latencyPace`): `--latency-share` (default 0.8) of the highest median second's stored rate
 *    among the protocol's steps, offered by as many devices as the step that reached it, each
 *    pausing `intervalMs` after every acknowledgement so that that step's ack time (devices /
 *    acknowledged rate) plus the pause gives it its part of the rate; its devices have ids of their
 *    own (`<protocol>-paced-k<K>-`). The same warm-up, window, CPU and memory figures as a
 *    throughput step, the offered rate achieved being its acknowledged rate; once the backlog
 *    drained, from the database, over the rows of its devices received within the window:
 *    `stored_at - received_at` in ms (received: by the gateway, just before it acknowledged;
 *    stored: the inserting transaction's now()), p50, p90, p99 (percentile_cont) and max. It takes
 *    no part in finding the saturation.
 * 6. Deletes the IoTService and waits until its namespace is gone; then the landscape goes.
 *
 * Guarantees: the landscape is torn down whether the run succeeds or fails (lib/teardown.ts);
 * nothing outside the landscape and its instance namespace is created or deleted on the shared
 * cluster (besides the images pushed to its registry under the reference tags the e2e test pushes
 * too).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Kinds, RuntimeMetrics, isNotFound, type KubeObject } from '@iot-operator/runtime';
import { TestEnv } from '@iot-operator/runtime/testing';
import { localRegistry, onRealNode, REAL_NODE_LABEL, registryPullSecret, type LocalRegistry } from '@iot-operator/local-cluster';
import {
  HttpStatusError,
  publishMqtt,
  readTelemetry,
  registerDevice,
  startContinuousDevice,
  type ContinuousDevice,
  type DeviceCredentials,
} from '@iot-operator/iot-service/simulator';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { AvailabilityTracker, DEFAULT_VERSION, IOT_DEFAULT_COMMAND, IoTServiceV1alpha1Type, iotService, startIoTOperator, teardownLandscape } from '../lib/iot.ts';
import { createNamespace, log, mapLimit, now, repoRoot, sleep, uniqueName } from '../lib/kube.ts';
import type { OperatorProcess } from '../lib/operator.ts';
import { MiB, readHostCpu } from '../lib/proc.ts';
import {
  latencyPace,
  latencySql,
  latestWorkingSet,
  limitedBy,
  limitingPod,
  manifestBytes,
  maxWorkingSetWithin,
  nextDevices,
  parseCpuStat,
  parseLatency,
  parsePerSecond,
  parseStoredCount,
  perSecondCounts,
  parseSummaryPods,
  podCpuLimit,
  podKeys,
  saturation,
  storedCountSql,
  storedPerSecondSql,
  workingSetBytes,
  type Latency,
  type PodStats,
} from '../lib/reference.ts';
import { median, round } from '../lib/stats.ts';
import { withTeardown } from '../lib/teardown.ts';

const run = promisify(execFile);
const REAL_NODE = 'real-node-0';
const NAME = 'ref';
const COMPONENTS = ['gateway', 'core', 'processing', 'broker', 'database'] as const;
export const REFERENCE_DEFAULT_DEVICES = [1, 4, 16, 64];
const DEFAULT_LATENCY_SHARE = 0.8;
const WARMUP_MS = 3_000;
const SUMMARY_EVERY_MS = 3_000;
const KUBEPODS = '/sys/fs/cgroup/%s/iot-operator-real-node/kubepods';

type Pod = KubeObject & {
  spec?: { nodeName?: string; containers?: { name: string; resources?: { limits?: Record<string, string> } }[] };
  status?: { podIP?: string; phase?: string };
};

export interface InstancePod {
  name: string;
  key: string;
  component: string;
  uid: string;
  ip: string;
  limitCores?: number;
}

const mib = (bytes: number) => round(bytes / MiB, 1);
const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);

// ---------------------------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------------------------

async function buildImages(version: string): Promise<{ registry: string; buildPushS: Record<string, number>; wallS: number }> {
  const t = now();
  const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'scripts/iot-service-images.ts', '--version', version], {
    cwd: repoRoot,
    maxBuffer: 64 * 1024 * 1024,
    timeout: 60 * 60 * 1000,
  });
  const buildPushS: Record<string, number> = {};
  for (const m of stderr.matchAll(/pushed \S+\/iot-(\w+):\S+ \(\S+\) in (\d+) s/g)) buildPushS[m[1]!] = Number(m[2]);
  return { registry: stdout.trim().split('\n').at(-1)!, buildPushS, wallS: round((now() - t) / 1000) };
}

const MANIFEST_TYPES = ['application/vnd.oci.image.manifest.v1+json', 'application/vnd.docker.distribution.manifest.v2+json'];

/** The manifest the registry serves for `image` (a tag in the cluster's registry). */
function registryManifest(registry: LocalRegistry, image: string): Promise<unknown> {
  const name = image.slice(registry.address.length + 1);
  const repository = name.slice(0, name.lastIndexOf(':'));
  const tag = name.slice(name.lastIndexOf(':') + 1);
  const [host, port] = registry.address.split(':');
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        method: 'GET', host, port: Number(port), path: `/v2/${repository}/manifests/${tag}`,
        ca: readFileSync(path.join(registry.certDir, 'ca.crt')), auth: `${registry.user}:${registry.password}`,
        headers: { Accept: MANIFEST_TYPES.join(', ') }, timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          if (res.statusCode === 200) resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          else reject(new Error(`the registry answered ${res.statusCode} for ${image}'s manifest`));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`the registry did not answer for ${image} within 10 s`))).on('error', reject).end();
  });
}

async function imageSizes(registry: LocalRegistry, prefix: string, version: string): Promise<Record<string, { compressedMiB: number; uncompressedMiB: number }>> {
  const out: Record<string, { compressedMiB: number; uncompressedMiB: number }> = {};
  for (const component of COMPONENTS) {
    const image = `${prefix}/iot-${component}:${version}`;
    const compressed = manifestBytes(await registryManifest(registry, image));
    const local = await run('buildah', ['inspect', '--type', 'image', '--format', '{{.Manifest}}', image], { maxBuffer: 16 * 1024 * 1024 });
    out[component] = { compressedMiB: mib(compressed), uncompressedMiB: mib(manifestBytes(JSON.parse(local.stdout))) };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The instance's pods: addresses, stats, cgroups, database
// ---------------------------------------------------------------------------------------------

async function podsOf(ctx: BenchContext, namespace: string, component?: string): Promise<Pod[]> {
  const { items } = await ctx.client.list<Pod>(Kinds.Pod, { namespace, ...(component ? { labelSelector: `app.kubernetes.io/component=${component}` } : {}) });
  return items.filter((p) => !p.metadata.deletionTimestamp);
}

async function instancePods(ctx: BenchContext, namespace: string): Promise<InstancePod[]> {
  const pods = (await podsOf(ctx, namespace)).filter((p) => p.status?.phase === 'Running' && p.status.podIP);
  const named = pods.map((p) => ({ pod: p, name: p.metadata.name!, component: p.metadata.labels?.['app.kubernetes.io/component'] ?? 'unknown' }));
  const keys = podKeys(named);
  const off = pods.filter((p) => p.spec?.nodeName !== REAL_NODE).map((p) => p.metadata.name);
  if (off.length > 0) throw new Error(`pods not on ${REAL_NODE}: ${off.join(', ')}`);
  return named
    .map(({ pod, name, component }) => ({ name, component, key: keys.get(name)!, uid: pod.metadata.uid!, ip: pod.status!.podIP!, limitCores: podCpuLimit(pod) }))
    .sort((a, b) => a.key.localeCompare(b.key));
}

async function apiToken(ctx: BenchContext, namespace: string): Promise<string> {
  const secret = (await ctx.client.get(Kinds.Secret, 'iot-credentials', namespace)) as KubeObject & { data?: Record<string, string> };
  const token = Buffer.from(secret.data?.['api-token'] ?? '', 'base64').toString('utf8');
  if (!token) throw new Error(`no api-token in ${namespace}/iot-credentials yet`);
  return token;
}

async function summary(ctx: BenchContext, namespace: string): Promise<PodStats[]> {
  return parseSummaryPods(await ctx.client.raw<unknown>({ method: 'GET', path: `/api/v1/nodes/${REAL_NODE}/proxy/stats/summary` }), namespace);
}

/** A pod's cgroup directory on the real node for `controller` (its QoS class decides where). */
function podCgroupFile(controller: string, uid: string, file: string): string {
  const root = KUBEPODS.replace('%s', controller);
  for (const qos of ['', 'burstable', 'besteffort']) {
    const candidate = path.join(root, qos, `pod${uid}`, file);
    try {
      readFileSync(candidate);
      return candidate;
    } catch {
      // not in this QoS class
    }
  }
  throw new Error(`no ${controller} cgroup for pod ${uid} under ${root}`);
}

export interface CpuReading {
  at: number;
  usageNs: Map<string, number>;
  throttledNs: Map<string, number>;
}

export function readPodCpu(pods: readonly InstancePod[]): CpuReading {
  const usageNs = new Map<string, number>();
  const throttledNs = new Map<string, number>();
  for (const p of pods) {
    usageNs.set(p.key, Number(readFileSync(podCgroupFile('cpuacct', p.uid, 'cpuacct.usage'), 'utf8').trim()));
    throttledNs.set(p.key, parseCpuStat(readFileSync(podCgroupFile('cpu', p.uid, 'cpu.stat'), 'utf8')).throttledNs);
  }
  return { at: now(), usageNs, throttledNs };
}

/** Runs `sql` with psql of the database image's PostgreSQL, over its socket in /tmp (local connections are trusted); its unaligned output. */
async function psql(ctx: BenchContext, database: InstancePod, namespace: string, sql: string): Promise<string> {
  const { stdout } = await run(
    'kubectl',
    ['--kubeconfig', ctx.kubeconfig, 'exec', '-n', namespace, database.name, '--', 'sh', '-c', 'exec $(echo /usr/lib/postgresql/*/bin/psql) -h /tmp -U iot -d iot -At -F, -c "$0"', sql],
    { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
  );
  return stdout;
}

async function storedCount(ctx: BenchContext, database: InstancePod, namespace: string, prefix: string, from: number, to: number): Promise<ReturnType<typeof parseStoredCount>> {
  return parseStoredCount(await psql(ctx, database, namespace, storedCountSql(prefix, from, to)));
}

// ---------------------------------------------------------------------------------------------
// Apply → first stored message: a device that keeps trying from the moment of the create
// ---------------------------------------------------------------------------------------------

interface FirstStored {
  registeredS: number;
  ackedS: number;
  storedS: number;
  attempts: number;
}

async function anyPodIp(ctx: BenchContext, namespace: string, component: string, attempt: number): Promise<string> {
  const ips = (await podsOf(ctx, namespace, component)).map((p) => p.status?.podIP).filter((ip): ip is string => !!ip).sort();
  if (ips.length === 0) throw new Error(`no ${component} pod with an address yet`);
  return ips[attempt % ips.length]!;
}

async function firstStoredMessage(ctx: BenchContext, namespace: string, t0: number, deadline: number, signal: AbortSignal): Promise<FirstStored> {
  let attempts = 0;
  const retry = async <T>(what: () => Promise<T>, pauseMs: number): Promise<T> => {
    for (;;) {
      if (signal.aborted) throw new Error('first stored message: given up');
      if (now() > deadline) throw new Error(`first stored message: not within ${ctx.options.timeoutS} s`);
      attempts++;
      try {
        return await what();
      } catch {
        await sleep(pauseMs);
      }
    }
  };
  let id = 'first-device';
  let token = '';
  const core = async () => ({ coreUrl: `http://${await anyPodIp(ctx, namespace, 'core', attempts)}:8080`, apiToken: (token ||= await apiToken(ctx, namespace)) });
  const device: DeviceCredentials = await retry(async () => {
    try {
      return await registerDevice(await core(), id);
    } catch (err) {
      if (err instanceof HttpStatusError && err.status === 409) id = `first-device-${attempts}`; // registered by an attempt whose answer was lost
      throw err;
    }
  }, 200);
  const registeredS = round((now() - t0) / 1000);
  await retry(async () => publishMqtt(`mqtt://${await anyPodIp(ctx, namespace, 'gateway', attempts)}:1883`, device, [{ first: true, at: new Date().toISOString() }]), 200);
  const ackedS = round((now() - t0) / 1000);
  await retry(async () => {
    if ((await readTelemetry(await core(), device.id, 1)).length === 0) throw new Error('not stored yet');
  }, 100);
  return { registeredS, ackedS, storedS: round((now() - t0) / 1000), attempts };
}

// ---------------------------------------------------------------------------------------------
// Throughput steps
// ---------------------------------------------------------------------------------------------

type Protocol = 'mqtt' | 'http';

interface Step {
  protocol: Protocol;
  devices: number;
  windowS: number;
  /** Messages acknowledged (stored) in the window / its length. */
  ackedPerS: number;
  storedPerS: number;
  /** The window's whole seconds, each one's count: median, lowest and highest. */
  ackedPerSecond: { p50: number; min: number; max: number };
  storedPerSecond: { p50: number; min: number; max: number };
  acked: number;
  stored: number;
  /** Seconds from the window's end to the last message of the step stored. */
  drainS: number;
  /** Little's law: devices / acknowledged per second. */
  meanAckMs: number;
  /** Seconds from starting the devices until every one had a message acknowledged (before the warm-up). */
  admittedS: number;
  /** Attempts that failed within the window (each message is sent again until acknowledged). */
  failedAttempts: number;
  failedAttemptsBeforeWindow?: number;
  firstFailure?: string;
  podCores: Record<string, number>;
  podThrottledS: Record<string, number>;
  /** The largest working set /stats/summary reported within the window. */
  workingSetMiB: Record<string, number>;
  /** The working set read from the pod's memory cgroup at the window's end. */
  cgroupWorkingSetMiB: Record<string, number>;
  hostUtilisation: number;
  simulatorCores: number;
  /** Host CPU (cores) used by neither the seven pods nor the simulator: the control plane, the node's agents, other work on the machine. */
  otherCores: number;
  /** The latency step only: each device's pause after an acknowledgement. */
  intervalMs?: number;
  /** The latency step only: receipt → stored of the messages its devices sent in the window, once the backlog drained. */
  latencyMs?: Latency;
}

interface Service {
  namespace: string;
  pods: InstancePod[];
  token: string;
}

function readPodWorkingSets(pods: readonly InstancePod[]): Record<string, number> {
  return Object.fromEntries(
    pods.map((p) => {
      const usage = Number(readFileSync(podCgroupFile('memory', p.uid, 'memory.usage_in_bytes'), 'utf8').trim());
      return [p.key, mib(workingSetBytes(usage, readFileSync(podCgroupFile('memory', p.uid, 'memory.stat'), 'utf8')))];
    }),
  );
}

/**
 * One step: `devices` continuous devices of `protocol` measured over a window. Given
 * `intervalMs`, the latency step: each device pauses that long after every acknowledgement, its
 * devices are registered under ids of their own, and the step also reports the messages' latency.
 */
async function runStep(ctx: BenchContext, s: Service, protocol: Protocol, devices: number, windowS: number, intervalMs?: number): Promise<Step> {
  const paced = intervalMs !== undefined;
  const prefix = `${protocol}-${paced ? 'paced-' : ''}k${devices}-`;
  const cores = s.pods.filter((p) => p.component === 'core');
  const gateways = s.pods.filter((p) => p.component === 'gateway');
  const database = s.pods.find((p) => p.component === 'database')!;
  const credentials = await mapLimit(Array.from({ length: devices }, (_, i) => i), 8, (i) =>
    registerDevice({ coreUrl: `http://${cores[i % cores.length]!.ip}:8080`, apiToken: s.token }, `${prefix}${i}`),
  );
  // One continuous device per registered one (the simulator's startContinuousDevice: one message
  // at a time, the next as soon as the last is acknowledged, or `intervalMs` after it, each sent
  // again until it is), on the gateway pods in turn. They start 8 at a time, each wave once the
  // last had a message acknowledged, as a fleet ramps up: started all at once, a few hundred
  // devices' first connections each make the gateway ask core (an scrypt check each), and the
  // checks that wait past the gateway's 3 s refuse the devices, which come back 250 ms later with
  // more of them.
  const senders: ContinuousDevice[] = [];
  let stopped = false;
  const stopAll = async (timeoutMs: number) => {
    stopped = true;
    await Promise.all(senders.map((d) => d.stop(timeoutMs)));
  };
  const ackedWithin = (from: number, to: number) => senders.reduce((sum, d) => sum + d.messages.filter((m) => m.ackedAt !== undefined && m.ackedAt >= from && m.ackedAt < to).length, 0);
  const summaries: PodStats[][] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      summaries.push(await summary(ctx, s.namespace).catch(() => []));
      await sleep(SUMMARY_EVERY_MS);
    }
  })();
  try {
    const admitted = now();
    await mapLimit(credentials, 8, async (device, i) => {
      if (stopped) return;
      const gateway = gateways[i % gateways.length]!.ip;
      const d = startContinuousDevice({ gatewayMqttUrl: `mqtt://${gateway}:1883`, gatewayHttpUrl: `http://${gateway}:8080` }, device, { protocols: [protocol], intervalMs });
      d.done.catch(() => undefined); // a refusal is reported by stop()
      senders.push(d);
      while (!d.messages.some((m) => m.ackedAt !== undefined)) {
        if (stopped) return;
        if (now() - admitted > 300_000) throw new Error(`${protocol} ${devices} devices: device ${device.id} had no message acknowledged within 300 s of the first start (${d.failures.length} failed attempts, the last: ${d.failures.at(-1)?.error})`);
        await sleep(50);
      }
    });
    const admittedS = round((now() - admitted) / 1000);
    await sleep(WARMUP_MS);
    const start = { wall: Date.now(), cpu: readPodCpu(s.pods), host: readHostCpu(), self: process.cpuUsage() };
    await sleep(windowS * 1000);
    const end = { wall: Date.now(), cpu: readPodCpu(s.pods), host: readHostCpu(), self: process.cpuUsage(start.self), memory: readPodWorkingSets(s.pods) };
    await stopAll(120_000);
    polling = false;
    await poller;
    const seconds = (end.cpu.at - start.cpu.at) / 1000;
    const windowed = ackedWithin(start.wall, end.wall);
    const total = senders.reduce((sum, d) => sum + d.messages.length, 0);
    const failures = senders.flatMap((d) => d.failures);
    const failuresInWindow = failures.filter((f) => f.at >= start.wall && f.at < end.wall);
    // The backlog drains into the database: wait until every acknowledged message is stored (or no progress for 30 s).
    let count = await storedCount(ctx, database, s.namespace, prefix, start.wall, end.wall);
    let progressAt = now();
    while (count.total < total && now() - progressAt < 30_000) {
      await sleep(1000);
      const again = await storedCount(ctx, database, s.namespace, prefix, start.wall, end.wall);
      if (again.total > count.total) progressAt = now();
      count = again;
    }
    const wholeSeconds = Math.floor((end.wall - start.wall) / 1000);
    const ackedSeconds = perSecondCounts(
      senders.flatMap((d) => d.messages.map((m) => m.ackedAt).filter((at): at is number => at !== undefined)),
      start.wall,
      wholeSeconds,
    );
    const storedSeconds = parsePerSecond(await psql(ctx, database, s.namespace, storedPerSecondSql(prefix, start.wall, wholeSeconds)), wholeSeconds);
    const latencyMs = paced ? parseLatency(await psql(ctx, database, s.namespace, latencySql(prefix, start.wall, end.wall))) : undefined;
    const spread = (counts: number[]) => ({ p50: median(counts), min: Math.min(...counts), max: Math.max(...counts) });
    const podCores: Record<string, number> = {};
    const podThrottledS: Record<string, number> = {};
    for (const p of s.pods) {
      podCores[p.key] = round((end.cpu.usageNs.get(p.key)! - start.cpu.usageNs.get(p.key)!) / 1e9 / seconds);
      podThrottledS[p.key] = round((end.cpu.throttledNs.get(p.key)! - start.cpu.throttledNs.get(p.key)!) / 1e9);
    }
    const memory = maxWorkingSetWithin(summaries, start.wall, end.wall);
    const workingSetMiB = Object.fromEntries(s.pods.filter((p) => memory.has(p.name)).map((p) => [p.key, mib(memory.get(p.name)!)]));
    const windowWallS = (end.wall - start.wall) / 1000;
    const ackedPerS = round(windowed / windowWallS, 1);
    const hostUtilisation = round((end.host.busyS - start.host.busyS) / (end.host.totalS - start.host.totalS));
    const simulatorCores = round((end.self.user + end.self.system) / 1e6 / windowWallS);
    const podsCores = Object.values(podCores).reduce((sum, c) => sum + c, 0);
    const step: Step = {
      protocol,
      devices,
      windowS: round(windowWallS),
      ackedPerS,
      storedPerS: round(count.inWindow / windowWallS, 1),
      ackedPerSecond: spread(ackedSeconds),
      storedPerSecond: spread(storedSeconds),
      acked: total,
      stored: count.total,
      drainS: round(Math.max(0, count.lastStoredAt - end.wall) / 1000),
      meanAckMs: ackedPerS > 0 ? round((1000 * devices) / ackedPerS, 1) : Number.NaN,
      admittedS,
      failedAttempts: failuresInWindow.length,
      ...(failures.length > 0 ? { firstFailure: failures[0]!.error.slice(0, 300), failedAttemptsBeforeWindow: failures.filter((f) => f.at < start.wall).length } : {}),
      podCores,
      podThrottledS,
      workingSetMiB,
      cgroupWorkingSetMiB: end.memory,
      hostUtilisation,
      simulatorCores,
      otherCores: round(Math.max(0, hostUtilisation * os.cpus().length - podsCores - simulatorCores)),
      ...(paced ? { intervalMs, latencyMs } : {}),
    };
    log(
      `reference: ${protocol} ${devices} devices${paced ? ` pausing ${intervalMs} ms` : ''}: ${step.ackedPerS} acknowledged/s (median second ${step.ackedPerSecond.p50}), ` +
        `${step.storedPerS} stored/s (median second ${step.storedPerSecond.p50}), ` +
        `drained ${step.drainS} s after the window; host ${Math.round(hostUtilisation * 100)} % busy: simulator ${simulatorCores} cores, ` +
        `pods ${Object.entries(podCores).map(([k, v]) => `${k} ${v}`).join(', ')}, others ${step.otherCores}` +
        `${failures.length ? `; ${failures.length} failed attempts (${failuresInWindow.length} in the window), the first: ${failures[0]!.error.slice(0, 160)}` : ''}` +
        `${latencyMs ? `; receipt → stored of ${latencyMs.rows} messages: p50 ${latencyMs.p50Ms} ms, p90 ${latencyMs.p90Ms} ms, p99 ${latencyMs.p99Ms} ms, max ${latencyMs.maxMs} ms` : ''}`,
    );
    return step;
  } finally {
    polling = false;
    await poller;
    if (!stopped) await stopAll(30_000).catch((err: unknown) => log(`reference: stopping the devices: ${errorText(err)}`));
  }
}

const byDevices = <T>(steps: readonly Step[], pick: (s: Step) => T): Record<string, T> =>
  Object.fromEntries(steps.map((s) => [`k${String(s.devices).padStart(3, '0')}`, pick(s)]));

/** Where `rate` stops growing, and what the CPU figures of that step (or of the last, if it never stops) point at. */
function saturationFigures(steps: readonly Step[], rate: (s: Step) => number, machineCores: number, pods: readonly InstancePod[]): Record<string, unknown> {
  const sat = saturation(steps.map((s) => ({ devices: s.devices, perS: rate(s) })));
  const at = steps[sat?.index ?? steps.length - 1];
  if (!at) return {};
  const podCpu = pods.map((p) => ({ key: p.key, cores: at.podCores[p.key] ?? 0, limitCores: p.limitCores }));
  const top = limitingPod(podCpu, machineCores);
  return {
    devices: sat?.devices ?? null,
    ...(sat ? { previousDevices: sat.previousDevices, peakPerS: sat.peakPerS, peakDevices: sat.peakDevices } : { note: 'the rate still grew at the last step; CPU figures of the last step' }),
    limitedBy: limitedBy(podCpu, machineCores, at.hostUtilisation),
    busiestPod: top?.key,
    busiestPodCores: top?.cores,
    busiestPodCpuLimit: top?.limitCores ?? null,
    podCores: at.podCores,
    hostUtilisation: at.hostUtilisation,
    simulatorCores: at.simulatorCores,
    otherCores: at.otherCores,
  };
}

/** The latency step of a protocol with how it was paced: `share` of the highest stored rate of its throughput steps. */
interface LatencyStep extends Step {
  share: number;
  /** The highest median second's stored rate among the throughput steps, and the rate aimed at. */
  peakStoredPerS: number;
  targetPerS: number;
  /** devices / acknowledged rate of the step that reached it: how long an acknowledgement took there. */
  peakAckMs: number;
}

/** After a protocol's throughput steps, its latency step (undefined, with a log line, when no step stored anything). */
async function runLatencyStep(ctx: BenchContext, s: Service, protocol: Protocol, steps: readonly Step[], windowS: number, share: number): Promise<LatencyStep | undefined> {
  const pace = latencyPace(steps.map((st) => ({ devices: st.devices, ackedPerS: st.ackedPerSecond.p50, storedPerS: st.storedPerSecond.p50 })), share);
  if (!pace) {
    log(`reference: ${protocol}: no step stored messages, no latency step`);
    return undefined;
  }
  log(
    `reference: ${protocol} latency step: ${Math.round(share * 100)} % of ${pace.peakStoredPerS} stored/s = ${round(pace.targetPerS, 1)} messages/s ` +
      `from ${pace.devices} devices, each pausing ${pace.intervalMs} ms after an acknowledgement (${round(pace.ackMs, 1)} ms at the peak)`,
  );
  const step = await runStep(ctx, s, protocol, pace.devices, windowS, pace.intervalMs);
  return { share, peakStoredPerS: pace.peakStoredPerS, targetPerS: round(pace.targetPerS, 1), peakAckMs: round(pace.ackMs, 1), ...step };
}

function protocolFigures(steps: readonly Step[], latency: LatencyStep | undefined, machineCores: number, pods: readonly InstancePod[]): Record<string, unknown> {
  return {
    ackedPerSecondMedian: byDevices(steps, (s) => s.ackedPerSecond.p50),
    storedPerSecondMedian: byDevices(steps, (s) => s.storedPerSecond.p50),
    ackedPerS: byDevices(steps, (s) => s.ackedPerS),
    storedPerS: byDevices(steps, (s) => s.storedPerS),
    saturation: saturationFigures(steps, (s) => s.ackedPerSecond.p50, machineCores, pods),
    storedSaturation: saturationFigures(steps, (s) => s.storedPerSecond.p50, machineCores, pods),
    steps: byDevices(steps, (s) => s),
    ...(latency ? { latency } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------------------------

/** ONE reference IoTService on the real node, just created (`withReferenceInstance`). */
export interface ReferenceInstance {
  landscape: string;
  namespace: string;
  /** The real node's address, from which the scenario's devices and applications come. */
  hostAddress: string;
  /** The images' registry prefix, and how long their build and push took. */
  built: Awaited<ReturnType<typeof buildImages>>;
  env: TestEnv;
  /** When the create was sent; when the run gives up; aborted when the run ends. */
  t0: number;
  deadline: number;
  signal: AbortSignal;
  /** Resolves, once the IoTService is Available, with the seconds from the create. */
  available(): Promise<number>;
  /** Its seven running pods (once Available). */
  pods(): Promise<InstancePod[]>;
  apiToken(): Promise<string>;
}

/**
 * Builds and pushes the reference images, runs the operator for a landscape of its own (`prefix`
 * and a random suffix), creates ONE IoTService of seven pods on the real node (see the module
 * comment) and hands it to `body` at once; then deletes it and waits until its namespace is gone.
 * The landscape is torn down whether `body` succeeds or fails.
 */
export async function withReferenceInstance<T>(
  ctx: BenchContext,
  prefix: string,
  body: (instance: ReferenceInstance) => Promise<T>,
): Promise<{ result: T; deleteToNamespaceGoneS: number; operatorCommand: string }> {
  if (ctx.benchCluster) throw new Error(`${prefix} needs the cluster with the real node: --kubeconfig <its kubeconfig> (the bench cluster '${ctx.benchCluster}' has none)`);
  const version = DEFAULT_VERSION;
  const node = (await ctx.client.get(Kinds.Node, REAL_NODE).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)))) as
    | (KubeObject & { status?: { conditions?: { type: string; status: string }[]; addresses?: { type: string; address: string }[] } })
    | undefined;
  if (node?.status?.conditions?.find((c) => c.type === 'Ready')?.status !== 'True') throw new Error(`the cluster has no Ready ${REAL_NODE}`);
  const hostAddress = node.status.addresses?.find((a) => a.type === 'InternalIP')?.address;
  if (!hostAddress) throw new Error(`${REAL_NODE} reports no InternalIP`);

  log(`${prefix}: building and pushing the reference images ${version} (scripts/iot-service-images.ts)`);
  const built = await buildImages(version);
  const env = new TestEnv(ctx.kubeconfig, ctx.client, new RuntimeMetrics());

  const landscape = uniqueName(`bench-${prefix}`);
  const namespace = `${landscape}-${NAME}`;
  // The instance's pods tolerate the real node's taint and select it by its label: the operator must allow both.
  const command = `${ctx.options.operatorCmd ?? IOT_DEFAULT_COMMAND} --default-registry ${built.registry} --allowed-toleration-keys ${REAL_NODE_LABEL} --allowed-node-label-keys ${REAL_NODE_LABEL}`;
  const tracker = new AvailabilityTracker(ctx.client, landscape);
  const giveUp = new AbortController();
  let operator: OperatorProcess | undefined;
  await createNamespace(ctx.client, landscape);

  return withTeardown(
    async () => {
      await registryPullSecret(env, landscape, 'image-pull-secret');
      operator = await startIoTOperator({ command, kubeconfig: ctx.kubeconfig, landscape, workers: ctx.options.workers, logFile: path.join(ctx.logDir, `operator-${landscape}.log`) });
      await operator.waitReady();
      await tracker.start();
      tracker.expect(NAME, 1);
      const spec = {
        gateway: { ...onRealNode, replicas: 2, protocols: ['mqtt', 'http'], deviceSources: [`${hostAddress}/32`] },
        core: { ...onRealNode, replicas: 2 },
        processing: { ...onRealNode, replicas: 1 },
        broker: { ...onRealNode, replicas: 1, storage: '1Gi' },
        database: { ...onRealNode, replicas: 1, storage: '1Gi' },
      };
      const deadline = now() + ctx.options.timeoutS * 1000;
      log(`${prefix}: creating IoTService ${landscape}/${NAME} (seven pods on ${REAL_NODE})`);
      const t0 = now();
      await ctx.client.create(IoTServiceV1alpha1Type, iotService(NAME, landscape, version, spec));
      const available = async () => {
        while (!tracker.availableAt.has(NAME)) {
          if (now() > deadline) throw new Error(`${prefix}: not Available after ${ctx.options.timeoutS} s`);
          await sleep(50);
        }
        const applyToAvailableS = round((tracker.availableAt.get(NAME)! - t0) / 1000);
        log(`${prefix}: Available ${applyToAvailableS} s after the create`);
        return applyToAvailableS;
      };
      const pods = async () => {
        const running = await instancePods(ctx, namespace);
        if (running.length !== 7) throw new Error(`expected 7 running pods in ${namespace}, found ${running.map((p) => p.key).join(', ')}`);
        return running;
      };
      const result = await body({ landscape, namespace, hostAddress, built, env, t0, deadline, signal: giveUp.signal, available, pods, apiToken: () => apiToken(ctx, namespace) });

      log(`${prefix}: deleting IoTService ${landscape}/${NAME}`);
      const td = now();
      await ctx.client.delete(IoTServiceV1alpha1Type, NAME, landscape);
      for (;;) {
        const ns = await ctx.client.get(Kinds.Namespace, namespace).catch((e: unknown) => (isNotFound(e) ? undefined : Promise.reject(e)));
        if (!ns) break;
        if (now() - td > ctx.options.timeoutS * 1000) throw new Error(`${prefix}: namespace ${namespace} not gone ${ctx.options.timeoutS} s after the delete`);
        await sleep(250);
      }
      const deleteToNamespaceGoneS = round((now() - td) / 1000);
      log(`${prefix}: namespace ${namespace} gone ${deleteToNamespaceGoneS} s after the delete`);
      return { result, deleteToNamespaceGoneS, operatorCommand: command };
    },
    async () => {
      giveUp.abort();
      await tracker.stop();
      await teardownLandscape(ctx.client, landscape, operator, ctx.options.timeoutS * 1000);
    },
    log,
  );
}

export async function runReference(ctx: BenchContext): Promise<ScenarioOutput> {
  const plan = ctx.options.devices ?? REFERENCE_DEFAULT_DEVICES;
  const windowS = ctx.options.windowS ?? 30;
  const protocols = (ctx.options.protocols ?? ['mqtt', 'http']) as Protocol[];
  const latencyShare = ctx.options.latencyShare ?? DEFAULT_LATENCY_SHARE;
  const machineCores = os.cpus().length;

  const { result, deleteToNamespaceGoneS, operatorCommand } = await withReferenceInstance(ctx, 'reference', async (instance) => {
    const { built, namespace } = instance;
    const images = await imageSizes(localRegistry(instance.env), built.registry, DEFAULT_VERSION);
    log(`reference: images built and pushed in ${built.wallS} s: ${Object.entries(images).map(([c, s]) => `${c} ${s.compressedMiB} MiB`).join(', ')}`);
    const first = firstStoredMessage(ctx, namespace, instance.t0, instance.deadline, instance.signal);
    first.catch(() => undefined);
    const applyToAvailableS = await instance.available();
    const firstStored = await first;
    log(`reference: first message stored ${firstStored.storedS} s after the create (registered at ${firstStored.registeredS} s, acknowledged at ${firstStored.ackedS} s)`);

    const pods = await instance.pods();
    const service: Service = { namespace, pods, token: await instance.apiToken() };

    // Idle: `--settle` seconds, then the first /stats/summary in which every pod's working set
    // was sampled after them (the kubelet refreshes its figures every 10–20 s).
    log(`reference: ${ctx.options.settleS} s idle, then the pods' working sets`);
    const idleFrom = Date.now() + ctx.options.settleS * 1000;
    await sleep(ctx.options.settleS * 1000);
    let idle = latestWorkingSet([await summary(ctx, namespace)]);
    while (pods.some((p) => (idle.get(p.name)?.at ?? 0) < idleFrom) && Date.now() - idleFrom < 60_000) {
      await sleep(2000);
      idle = latestWorkingSet([await summary(ctx, namespace)]);
    }
    const idleCgroupMiB = readPodWorkingSets(pods);
    const idleMiB = Object.fromEntries(pods.filter((p) => idle.has(p.name)).map((p) => [p.key, mib(idle.get(p.name)!.bytes)]));

    const results: Record<string, unknown> = {};
    const all: Step[] = [];
    let saturationMemory: { summaryMiB: Record<string, number>; cgroupMiB: Record<string, number>; devices: number } | undefined;
    for (const protocol of protocols) {
      const steps: Step[] = [];
      const rates = () => steps.map((st) => ({ devices: st.devices, perS: st.ackedPerSecond.p50 }));
      for (let devices = nextDevices(plan, rates()); devices !== undefined; devices = nextDevices(plan, rates())) {
        steps.push(await runStep(ctx, service, protocol, devices, windowS));
      }
      all.push(...steps);
      results[protocol] = protocolFigures(steps, await runLatencyStep(ctx, service, protocol, steps, windowS, latencyShare), machineCores, pods);
      const at = steps[saturation(rates())?.index ?? steps.length - 1];
      if (protocol === 'mqtt' && at) saturationMemory = { summaryMiB: at.workingSetMiB, cgroupMiB: at.cgroupWorkingSetMiB, devices: at.devices };
    }
    return {
      figures: {
        version: DEFAULT_VERSION,
        registry: built.registry,
        machineCores,
        imageSizesMiB: images,
        imageCompressedMiB: Object.fromEntries(Object.entries(images).map(([c, s]) => [c, s.compressedMiB])),
        imagesBuildPushS: { wall: built.wallS, ...built.buildPushS },
        applyToAvailableS,
        applyToFirstStoredS: firstStored.storedS,
        firstStored,
        pods: Object.fromEntries(pods.map((p) => [p.key, { cpuLimitCores: p.limitCores ?? null }])),
        memory: {
          idleMiB,
          idleCgroupMiB,
          idleSettleS: ctx.options.settleS,
          ...(saturationMemory ? { mqttSaturationMiB: saturationMemory.summaryMiB, mqttSaturationCgroupMiB: saturationMemory.cgroupMiB, mqttSaturationDevices: saturationMemory.devices } : {}),
        },
        ...results,
      },
      samples: {
        mqttAckedPerS: all.filter((s) => s.protocol === 'mqtt').map((s) => s.ackedPerS),
        httpAckedPerS: all.filter((s) => s.protocol === 'http').map((s) => s.ackedPerS),
      },
    };
  });
  return { figures: { ...result.figures, deleteToNamespaceGoneS }, samples: result.samples, operatorCommand };
}
