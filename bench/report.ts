/**
 * `npm run bench -- report`: turns the result files into docs/performance.md (targets and headline
 * figures, short), bench/results/README.md (every figure of every scenario) and the chart
 * docs/burst-distribution.svg; the generator `performance-report` of `npm run generate` writes
 * the same three files, so `npm run generate -- --check` fails when a committed one is stale.
 *
 * Guarantees:
 * - `buildReport` is pure: the same results give the same Markdown and SVG, in a
 *   stable order (scenarios in a fixed order, sizes ascending, keys sorted).
 * - Figures are medians over the successful runs of one scenario at one size, shown with the
 *   min–max range and the number of runs; failed runs are listed, never averaged in.
 * - Targets are judged on the runs of the operator as shipped (no `--operator-cmd`), on a cluster
 *   with the controller-manager's default rate limit, at the size the target names (N = 100); a
 *   target with no such runs says "not measured" rather than guessing. Runs of other operator
 *   commands or cluster settings are reported in groups of their own. Ratios measured within one
 *   run (burst against the floor of the same run) are preferred over ratios of medians from
 *   separate runs.
 * - Hand-written findings stay in bench/analysis.md, which both pages link to; regenerating the
 *   report never touches it.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generatedNotice } from '@iot-operator/runtime';
import type { BenchResult } from './lib/results.ts';
import { formatNumber, NO_CLUSTER } from './lib/results.ts';
import { median } from './lib/stats.ts';
import { rssSlope } from './lib/throughput.ts';
import { cdfSvg, type Series } from './lib/svg.ts';
import { repoRoot } from './lib/kube.ts';

export const SCENARIO_ORDER = ['burst', 'floor', 'steady', 'latency', 'churn', 'restart', 'scale', 'memcached', 'throughput', 'armada', 'start', 'reference', 'applications', 'fleet'];

/** The reference scenario's latency step of one protocol (figures absent from results made before it existed, so no rows). */
const referenceLatencyFigures = (label: string, protocol: string): [string, string][] => [
  [`${label} latency step: share of the peak stored rate offered`, `${protocol}.latency.share`],
  [`${label} latency step: messages/s offered (planned)`, `${protocol}.latency.targetPerS`],
  [`${label} latency step: devices`, `${protocol}.latency.devices`],
  [`${label} latency step: pause after each acknowledgement (ms)`, `${protocol}.latency.intervalMs`],
  [`${label} latency step: messages acknowledged/s (offered, achieved)`, `${protocol}.latency.ackedPerS`],
  [`${label} latency step: messages stored/s`, `${protocol}.latency.storedPerS`],
  [`${label} latency step: acknowledgement → stored p50 (ms)`, `${protocol}.latency.latencyMs.p50Ms`],
  [`${label} latency step: acknowledgement → stored p90 (ms)`, `${protocol}.latency.latencyMs.p90Ms`],
  [`${label} latency step: acknowledgement → stored p99 (ms)`, `${protocol}.latency.latencyMs.p99Ms`],
  [`${label} latency step: acknowledgement → stored max (ms)`, `${protocol}.latency.latencyMs.maxMs`],
  [`${label} latency step: working set (MiB): `, `${protocol}.latency.workingSetMiB.*`],
];

/** Figures shown per scenario: [label, dotted path]; a path ending in `.*` expands to every key found. */
export const FIGURES: Record<string, [string, string][]> = {
  burst: [
    ['wall time to all Available (s)', 'wallS'],
    ['per-instance create → Available p50 (s)', 'available.p50S'],
    ['per-instance create → Available p95 (s)', 'available.p95S'],
    ['per-instance create → Available p99 (s)', 'available.p99S'],
    ['floor (same run): wall time to all workloads ready (s)', 'floor.wallS'],
    ['floor (same run): wall time to all pods Ready (s)', 'floor.wallPodsReadyS'],
    ['burst wall / floor wall (same run)', 'ratioWallToFloor'],
    ['operator requests', 'operator.requests.total'],
    ['operator requests by verb: ', 'operator.requests.byVerb.*'],
    ['operator writes', 'operator.requests.writes'],
    ['operator reconciles', 'operator.reconciles'],
    ['operator CPU (s)', 'operator.cpuS'],
    ['operator peak RSS (MiB)', 'operator.peakRssMiB'],
    ['beside it (--companion-cmd): CPU (s)', 'companion.cpuS'],
    ['beside it (--companion-cmd): peak RSS (MiB)', 'companion.peakRssMiB'],
    ['API server requests (all clients)', 'apiserver.total'],
    ['API server requests by verb: ', 'apiserver.byVerb.*'],
    ['CPU (s) of ', 'componentsCpuS.*'],
    ['controller-manager: requests', 'controlPlaneClients.kube-controller-manager.requests'],
    ['controller-manager: time its requests waited in its client-side rate limiter (s, summed)', 'controlPlaneClients.kube-controller-manager.rateLimiterWaitS'],
    ['scheduler: time waited in its client-side rate limiter (s, summed)', 'controlPlaneClients.kube-scheduler.rateLimiterWaitS'],
    ['floor (same run): controller-manager rate-limiter wait (s, summed)', 'floor.controlPlaneClients.kube-controller-manager.rateLimiterWaitS'],
    ['host CPU busy (s, all processes)', 'host.busyCpuS'],
    ['host CPU utilisation', 'host.utilisation'],
  ],
  floor: [
    ['wall time to all workloads ready (s)', 'wallS'],
    ['wall time to all pods Ready (s)', 'wallPodsReadyS'],
    ['time to send every create (s)', 'createsS'],
    ['per-instance ready p50 (s)', 'ready.p50S'],
    ['per-instance ready p99 (s)', 'ready.p99S'],
    ['sequential: create → ready p50 (s)', 'sequential.readyP50S'],
    ['sequential: create → ready p99 (s)', 'sequential.readyP99S'],
    ['API server requests (all clients)', 'apiserver.total'],
    ['CPU (s) of ', 'componentsCpuS.*'],
    ['controller-manager: time its requests waited in its client-side rate limiter (s, summed)', 'controlPlaneClients.kube-controller-manager.rateLimiterWaitS'],
    ['host CPU utilisation', 'host.utilisation'],
  ],
  steady: [
    ['idle minutes', 'idleMinutes'],
    ['idle: operator writes per minute', 'idle.writesPerMin'],
    ['idle: operator requests per minute', 'idle.requestsPerMin'],
    ['idle: requests by verb: ', 'idle.requestsByVerb.*'],
    ['idle: reconciles', 'idle.reconciles'],
    ['resync (SIGHUP): reconciles', 'resync.reconciles'],
    ['resync: time until all reconciled (s)', 'resync.allReconciledS'],
    ['resync: writes', 'resync.writes'],
    ['resync: requests', 'resync.requests'],
    ['RSS at idle start (MiB)', 'rss.idleStartMiB'],
    ['RSS at idle end (MiB)', 'rss.idleEndMiB'],
    ['RSS drift over idle (MiB)', 'rss.driftMiB'],
    ['RSS after resync (MiB)', 'rss.afterResyncMiB'],
  ],
  latency: [
    ['create → all children exist p50 (s)', 'childrenExistP50S'],
    ['create → all children exist p99 (s)', 'childrenExistP99S'],
    ['create → Available p50 (s)', 'availableP50S'],
    ['create → Available p99 (s)', 'availableP99S'],
    ['floor (same run): create → workloads ready p50 (s)', 'floor.readyP50S'],
    ['floor (same run): create → workloads ready p99 (s)', 'floor.readyP99S'],
    ['Available p99 − floor p99 (s)', 'availableP99MinusFloorS'],
    ['operator requests per instance', 'requestsPerInstance'],
    ['operator reconciles per instance', 'reconcilesPerInstance'],
  ],
  churn: [
    ['minutes of changes', 'minutes'],
    ['spec changes', 'changes'],
    ['change → Available p50 (s)', 'changeToAvailable.p50S'],
    ['change → Available p99 (s)', 'changeToAvailable.p99S'],
    ['change → operator applied (all workloads carry the new image) p50 (s)', 'changeToApplied.p50S'],
    ['change → operator applied p99 (s)', 'changeToApplied.p99S'],
    ['floor (same run, no operator): change → workloads ready p50 (s)', 'floor.changeToReady.p50S'],
    ['floor (same run, no operator): change → workloads ready p99 (s)', 'floor.changeToReady.p99S'],
    ['work queue wait p50 (s, from histogram)', 'queueDuration.p50S'],
    ['work queue wait p99 (s, from histogram)', 'queueDuration.p99S'],
    ['operator requests per minute', 'operator.requestsPerMin'],
    ['operator writes per change', 'operator.writesPerChange'],
    ['operator CPU (s)', 'operator.cpuS'],
    ['operator peak RSS (MiB)', 'operator.peakRssMiB'],
    ['controller-manager: time its requests waited in its client-side rate limiter (s, summed)', 'controlPlaneClients.kube-controller-manager.rateLimiterWaitS'],
    ['CPU (s) of ', 'componentsCpuS.*'],
  ],
  restart: [
    ['kill → caches synced (s)', 'killToReadyS'],
    ['process start → caches synced (s)', 'startToReadyS'],
    ['kill → every instance verified (s)', 'killToVerifiedS'],
    ['writes after restart', 'writes'],
    ['requests after restart', 'requests'],
    ['requests by verb and code: ', 'requestsByVerbCode.*'],
    ['reconciles', 'reconciles'],
    ['CPU of the new process (s)', 'cpuS'],
    ['peak RSS of the new process (MiB)', 'peakRssMiB'],
  ],
  memcached: [
    ['wall time: every Deployment ready (s)', 'wallS'],
    ['wall time: every status.nodes filled (s)', 'wallStatusS'],
    ['per-object Deployment ready p50 (s)', 'deploymentReady.p50S'],
    ['per-object Deployment ready p99 (s)', 'deploymentReady.p99S'],
    ['operator requests', 'operator.requests.total'],
    ['operator requests by verb: ', 'operator.requests.byVerb.*'],
    ['operator writes', 'operator.requests.writes'],
    ['operator CPU (s)', 'operator.cpuS'],
    ['operator peak RSS (MiB)', 'operator.peakRssMiB'],
    ['API server requests (all clients)', 'apiserver.total'],
    ['CPU (s) of ', 'componentsCpuS.*'],
    ['controller-manager: time its requests waited in its client-side rate limiter (s, summed)', 'controlPlaneClients.kube-controller-manager.rateLimiterWaitS'],
  ],
  throughput: [
    ['objects/s (N / wall time to the last Deployment)', 'objectsPerS'],
    ['objects/s between the 10th and 90th percentile Deployment', 'steadyObjectsPerS'],
    ['wall time: first create → last owned Deployment (s)', 'wallS'],
    ['wall time: first create → last status written (s)', 'wallStatusS'],
    ['time to send every create (s)', 'createsS'],
    ['per-object create → Deployment p50 (s)', 'deploymentCreated.p50S'],
    ['per-object create → Deployment p99 (s)', 'deploymentCreated.p99S'],
    ['operator requests', 'operator.requests.total'],
    ['operator requests by verb: ', 'operator.requests.byVerb.*'],
    ['operator writes', 'operator.requests.writes'],
    ['operator: time its requests waited in its client-side rate limiter (s, summed)', 'operatorClient.rateLimiterWaitS'],
    ['operator reconciles', 'operator.reconciles'],
    ['operator reconcile errors', 'reconcileErrors'],
    ['operator work-queue retries (the only adds its overall 10/s bucket holds)', 'queueRetries'],
    ['operator CPU (s)', 'operator.cpuS'],
    ['operator peak RSS during the burst (MiB)', 'operator.peakRssMiB'],
    ['operator RSS after the settle time (MiB)', 'idle.rssMiB'],
    ['controller-manager observed every Deployment after (s)', 'idle.controlPlaneObservedAllS'],
    ['API server requests (all clients)', 'apiserver.total'],
    ['CPU (s) of ', 'componentsCpuS.*'],
    ['host CPU utilisation', 'host.utilisation'],
  ],
  armada: [
    ['parallel Helm operations (operator workers = floor parallelism)', 'workers'],
    ['wall time: every ArmadaChart deployed (s)', 'wallS'],
    ['per-chart create → deployed p50 (s)', 'deployed.p50S'],
    ['per-chart create → deployed p99 (s)', 'deployed.p99S'],
    ['floor (same run): wall time of helm install --wait of the same releases (s)', 'floor.wallS'],
    ['floor (same run): per-release helm install p50 (s)', 'floor.perRelease.p50S'],
    ['operator wall / floor wall (same run)', 'ratioToFloor'],
    ['operator CPU (s)', 'operator.cpuS'],
    ['operator peak RSS (MiB)', 'operator.peakRssMiB'],
    ['CPU (s) of the helm processes the operator ran', 'helmCpuS'],
    ['floor: CPU (s) of the helm processes', 'floor.helmCpuS'],
    ['operator requests', 'operator.requests.total'],
    ['operator requests by verb: ', 'operator.requests.byVerb.*'],
    ['operator reconciles', 'operator.reconciles'],
    ['API server requests (all clients)', 'apiserver.total'],
    ['floor: API server requests (all clients)', 'floor.apiserver.total'],
    ['host CPU utilisation', 'host.utilisation'],
  ],
  sharded: [
    ['wall time to all Available (s)', 'wallS'],
    ['per-instance create → Available p99 (s)', 'availableP99S'],
    ['largest replica: peak RSS (MiB)', 'totals.maxPeakRssMiB'],
    ['all replicas: peak RSS (MiB)', 'totals.sumPeakRssMiB'],
    ['all replicas: CPU (s)', 'totals.cpuS'],
    ['all replicas: API requests', 'totals.requests'],
  ],
  scale: [
    ['burst: wall time to all Available (s)', 'burst.wallS'],
    ['floor (same run): wall time to all workloads ready (s)', 'floor.wallS'],
    ['burst wall / floor wall (same run)', 'ratioWallToFloor'],
    ['burst: per-instance create → Available p99 (s)', 'burst.available.p99S'],
    ['burst: operator requests per instance', 'perInstance.requests'],
    ['burst: operator writes per instance', 'perInstance.writes'],
    ['burst: operator reconciles per instance', 'perInstance.reconciles'],
    ['burst: operator CPU per instance (ms)', 'perInstance.cpuMs'],
    ['burst: operator CPU (s)', 'burst.operator.cpuS'],
    ['burst: operator peak RSS (MiB)', 'burst.operator.peakRssMiB'],
    ['burst: beside it (--companion-cmd): CPU (s)', 'burst.companion.cpuS'],
    ['burst: beside it (--companion-cmd): peak RSS (MiB)', 'burst.companion.peakRssMiB'],
    ['burst: controller-manager rate-limiter wait (s, summed)', 'burst.controlPlaneClients.kube-controller-manager.rateLimiterWaitS'],
    ['burst: scheduler rate-limiter wait (s, summed)', 'burst.controlPlaneClients.kube-scheduler.rateLimiterWaitS'],
    ['burst: host CPU utilisation', 'burst.host.utilisation'],
    ['steady: writes per minute (idle)', 'steady.idle.writesPerMin'],
    ['steady: requests per minute (idle)', 'steady.idle.requestsPerMin'],
    ['steady: RSS after the idle minutes (MiB)', 'steady.rss.idleEndMiB'],
    ['steady: forced resync: time to every instance reconciled (s)', 'steady.resync.allReconciledS'],
    ['steady: forced resync: requests', 'steady.resync.requests'],
    ['steady: forced resync: writes', 'steady.resync.writes'],
    ['steady: forced resync: operator CPU (s)', 'steady.resync.cpuS'],
    ['churn: changes', 'churn.changes'],
    ['churn: change → Available p99 (s)', 'churn.changeToAvailable.p99S'],
    ['churn floor (same run): change → ready p99 (s)', 'churnFloor.changeToReady.p99S'],
    ['churn: p99 − floor p99 (s)', 'churnP99OverFloorS'],
    ['churn: work queue wait p99 (s)', 'churn.queueDuration.p99S'],
    ['churn: operator writes per change', 'churn.operator.writesPerChange'],
    ['churn: operator peak RSS (MiB)', 'churn.operator.peakRssMiB'],
    ['restart: kill → caches synced (s)', 'restart.killToReadyS'],
    ['restart: kill → every instance re-checked (s)', 'restart.killToVerifiedS'],
    ['restart: kill → work queues empty (s)', 'restart.killToQuietS'],
    ['restart: writes after restart', 'restart.writes'],
    ['restart: requests after restart', 'restart.requests'],
    ['restart: CPU of the new process (s)', 'restart.cpuS'],
    ['restart: peak RSS of the new process (MiB)', 'restart.peakRssMiB'],
  ],
  start: [
    ['npm start → Available, cluster absent (created from cached binaries) (s)', 'clusterAbsentS'],
    ['npm start → Available, cluster running (the second start in a row) (s)', 'clusterRunningS'],
  ],
  reference: [
    ['image size, compressed as pushed (MiB): ', 'imageCompressedMiB.*'],
    ['create → Available (s)', 'applyToAvailableS'],
    ['create → first stored message (s)', 'applyToFirstStoredS'],
    ['MQTT messages acknowledged in the median second, devices ', 'mqtt.ackedPerSecondMedian.*'],
    ['MQTT messages stored in the median second, devices ', 'mqtt.storedPerSecondMedian.*'],
    ['MQTT acknowledged rate stops growing at devices', 'mqtt.saturation.devices'],
    ['MQTT peak acknowledged messages/s (median second)', 'mqtt.saturation.peakPerS'],
    ['MQTT peak stored messages/s (median second)', 'mqtt.storedSaturation.peakPerS'],
    ['HTTP messages acknowledged in the median second, devices ', 'http.ackedPerSecondMedian.*'],
    ['HTTP messages stored in the median second, devices ', 'http.storedPerSecondMedian.*'],
    ['HTTP acknowledged rate stops growing at devices', 'http.saturation.devices'],
    ['HTTP peak acknowledged messages/s (median second)', 'http.saturation.peakPerS'],
    ['CPU (cores) where MQTT stops growing: ', 'mqtt.saturation.podCores.*'],
    ['host CPU utilisation where MQTT stops growing', 'mqtt.saturation.hostUtilisation'],
    ['working set idle (MiB): ', 'memory.idleMiB.*'],
    ['working set where MQTT stops growing (MiB): ', 'memory.mqttSaturationMiB.*'],
    ...referenceLatencyFigures('MQTT', 'mqtt'),
    ...referenceLatencyFigures('HTTP', 'http'),
    ['delete → instance namespace gone (s)', 'deleteToNamespaceGoneS'],
  ],
  applications: [
    ['create → Available (s)', 'applyToAvailableS'],
    ['device → application: messages/s sent (MQTT QoS 1)', 'stream.sentPerS'],
    ['device → application p50 (ms)', 'stream.latencyMs.p50Ms'],
    ['device → application p95 (ms)', 'stream.latencyMs.p95Ms'],
    ['device → application p99 (ms; target ≤ 250)', 'stream.latencyMs.p99Ms'],
    ['device → application max (ms)', 'stream.latencyMs.maxMs'],
    ['device → application: messages that never reached the application', 'stream.missing'],
    ['device → application: host CPU utilisation', 'stream.hostUtilisation'],
    ['commands/s sent (request/response)', 'commands.sentPerS'],
    ['command delivery p50 (ms)', 'commands.deliveryMs.p50Ms'],
    ['command delivery p95 (ms; target ≤ 200)', 'commands.deliveryMs.p95Ms'],
    ['command delivery p99 (ms)', 'commands.deliveryMs.p99Ms'],
    ['command round trip p50 (ms)', 'commands.roundTripMs.p50Ms'],
    ['command round trip p95 (ms; target ≤ 500)', 'commands.roundTripMs.p95Ms'],
    ['command round trip p99 (ms)', 'commands.roundTripMs.p99Ms'],
    ['commands sent in the window', 'commands.sent'],
    ['of those, delivered to their device', 'commands.delivered'],
    ['commands answered 200 (the whole run)', 'commands.statuses.200'],
    ['commands answered 500 (the whole run)', 'commands.statuses.500'],
    ['commands: host CPU utilisation', 'commands.hostUtilisation'],
    ['CPU (cores) during the commands: ', 'commands.podCores.*'],
  ],
  fleet: [
    ['devices registered', 'setup.devicesRegistered'],
    ['throughput: devices publishing QoS 1', 'throughput.devices'],
    ['throughput: mqtts PUBACKs/s', 'throughput.mqtts.perS'],
    ['throughput: mqtt PUBACKs/s', 'throughput.mqtt.perS'],
    ['throughput: mqtts / mqtt', 'throughput.tlsToPlain'],
    ['throughput: gateway CPU per message, mqtts (µs)', 'throughput.mqtts.gatewayCpuUsPerMessage'],
    ['throughput: gateway CPU per message, mqtt (µs)', 'throughput.mqtt.gatewayCpuUsPerMessage'],
    ['logins/s uncached (one password check in core each), mqtts', 'logins.cold.mqtts.perS'],
    ['logins/s uncached, mqtt', 'logins.cold.mqtt.perS'],
    ['logins/s cached, mqtts', 'logins.warm.mqtts.perS'],
    ['logins/s cached, mqtt', 'logins.warm.mqtt.perS'],
    ['core CPU per uncached login (ms)', 'logins.cold.mqtt.cpuMsPerLogin.core'],
    ['gateway CPU per cached login, mqtts (ms)', 'logins.warm.mqtts.cpuMsPerLogin.gateway'],
    ['gateway CPU per cached login, mqtt (ms)', 'logins.warm.mqtt.cpuMsPerLogin.gateway'],
    ['uncached login p99 without a flood (ms)', 'flood.quiet.cold.p99Ms'],
    ['uncached login p99 during the flood (ms)', 'flood.flooded.cold.p99Ms'],
    ['cached login p99 without a flood (ms)', 'flood.quiet.warm.p99Ms'],
    ['cached login p99 during the flood (ms)', 'flood.flooded.warm.p99Ms'],
    ['flood: growth of the uncached login p99', 'flood.p99Growth.cold'],
    ['flood: growth of the cached login p99', 'flood.p99Growth.warm'],
    ['herd: devices', 'herd.devices'],
    ['herd: connected within the timeout', 'herd.connect.connected'],
    ['herd: all connected after (s)', 'herd.connect.allConnectedS'],
    ['herd: time to CONNACK p50 (s)', 'herd.connect.connackS.p50'],
    ['herd: time to CONNACK p99 (s)', 'herd.connect.connackS.p99'],
    ['herd: attempts per device', 'herd.connect.attempts.mean'],
    ['herd: refusals by reason: ', 'herd.connect.refusals.*'],
    ['herd: gateway /healthz answers slower than 1 s, longest stretch (s)', 'herd.connect.health.longestRunOverLimitS'],
    ['reconnect after SIGKILL: connected within the timeout', 'herd.reconnect.connected'],
    ['reconnect after SIGKILL: all connected after (s)', 'herd.reconnect.allConnectedS'],
    ['reconnect after SIGKILL: time to CONNACK p50 (s)', 'herd.reconnect.connackS.p50'],
    ['reconnect after SIGKILL: time to CONNACK p99 (s)', 'herd.reconnect.connackS.p99'],
    ['reconnect after SIGKILL: refusals by reason: ', 'herd.reconnect.refusals.*'],
    ['reconnect after SIGKILL: gateway /healthz slower than 1 s, longest stretch (s)', 'herd.reconnect.health.longestRunOverLimitS'],
    ['reconnect after SIGKILL: cores used by ', 'herd.reconnect.cores.*'],
  ],
};

export function get(obj: unknown, dotted: string): unknown {
  let cur = obj;
  for (const part of dotted.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function numbersAt(results: readonly BenchResult[], dotted: string): number[] {
  return results.map((r) => get(r.figures, dotted)).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
}

/** The options that define a scenario's size, as "n=100 m=5" (sharded: "n=2000 shards=3"), plus the operator command when it is not the default. */
export function sizeKey(r: BenchResult): string {
  const keys = ['n', 'k', 'm', 'shards'].filter((k) => r.options[k] !== undefined);
  const parts = keys.map((k) => `${k}=${String(r.options[k])}`);
  // churn's rate, when it is not the specified one (10 % every 10 s)
  if (r.options.fraction !== undefined && r.options.fraction !== 0.1) parts.push(`fraction=${String(r.options.fraction)}`);
  if (r.options.periodS !== undefined && r.options.periodS !== 10) parts.push(`period=${String(r.options.periodS)}s`);
  if (r.options.maxConcurrentReconciles !== undefined) parts.push(`concurrency=${String(r.options.maxConcurrentReconciles)}`);
  if (r.options.controllerManagerQps !== undefined) parts.push(`controller-manager QPS ${String(r.options.controllerManagerQps)}`);
  if (r.options.schedulerQps !== undefined) parts.push(`scheduler QPS ${String(r.options.schedulerQps)}`);
  if (r.options.operatorMemoryLimitMiB !== undefined) parts.push(`operator memory limit ${String(r.options.operatorMemoryLimitMiB)} MiB`);
  if (r.options.companionCmd !== undefined) parts.push(`beside: \`${String(r.options.companionCmd)}\``);
  const size = parts.join(' ');
  if (r.options.goSample !== undefined) return `${size}; operator: operator-sdk's Go sample`;
  return r.options.operatorCmd ? `${size}; operator: \`${String(r.options.operatorCmd)}\`` : size;
}

/** Runs of the operator as shipped: its default command, no --memory-limit, not another operator run beside it or instead of it. */
function shippedOperator(r: BenchResult): boolean {
  return r.options.operatorCmd === undefined && r.options.operatorMemoryLimitMiB === undefined && r.options.goSample === undefined && r.options.companionCmd === undefined;
}

/** Runs on a bench cluster with the control plane's default client limits. */
function defaultCluster(r: BenchResult): boolean {
  return r.options.controllerManagerQps === undefined && r.options.schedulerQps === undefined;
}

/** Runs of the operator as shipped on a default cluster: the ones targets are judged on. */
function asSpecified(r: BenchResult): boolean {
  return shippedOperator(r) && defaultCluster(r);
}

/** A Markdown table; `align` gives 'l' or 'r' per column (default: first left, the others right). */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[], align?: string): string {
  const esc = (c: string) => c.replace(/\|/g, '\\|');
  const rule = header.map((_, i) => ((align?.[i] ?? (i === 0 ? 'l' : 'r')) === 'r' ? '---:' : '---'));
  return [`| ${header.map(esc).join(' | ')} |`, `| ${rule.join(' | ')} |`, ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`)].join('\n');
}

const show = (n: number): string => (Number.isFinite(n) ? formatNumber(n) : '—');
/** "a–b", or "a" when every value is the same. */
const spread = (values: readonly number[]): string => {
  const [lo, hi] = [Math.min(...values), Math.max(...values)];
  return lo === hi ? show(lo) : `${show(lo)}–${show(hi)}`;
};

/** Rows "label | median | min–max | runs" for one group of runs. */
export function figureRows(scenario: string, runs: readonly BenchResult[]): string[][] {
  const rows: string[][] = [];
  for (const [label, dotted] of FIGURES[scenario] ?? []) {
    const paths = dotted.endsWith('.*')
      ? [...new Set(runs.flatMap((r) => Object.keys((get(r.figures, dotted.slice(0, -2)) as Record<string, unknown>) ?? {})))].sort().map((k) => [`${label}${k}`, `${dotted.slice(0, -1)}${k}`] as const)
      : [[label, dotted] as const];
    for (const [l, p] of paths) {
      const values = numbersAt(runs, p);
      if (values.length === 0) continue;
      const range = values.length > 1 ? `${show(Math.min(...values))}–${show(Math.max(...values))}` : '';
      rows.push([l, show(median(values)), range, String(values.length)]);
    }
  }
  return rows;
}

export type Verdict = 'holds' | 'misses' | 'not measured';

export interface TargetRow {
  target: string;
  figure: string;
  verdict: Verdict;
  basis: string;
}

/** Successful runs of `scenario` (of size `n`, when given) taken under `conditions` (default: the operator as shipped, on a default cluster). */
function byScenario(results: readonly BenchResult[], scenario: string, n?: number, conditions: (r: BenchResult) => boolean = asSpecified): BenchResult[] {
  return results.filter((r) => r.ok && conditions(r) && r.scenario === scenario && (n === undefined || r.options.n === n));
}

/** Runs of the operator's default command with a companion process beside it (`--companion-cmd`). */
function shippedBesideCompanion(r: BenchResult): boolean {
  return r.options.operatorCmd === undefined && r.options.companionCmd !== undefined;
}

/** Runs of operator-sdk's Go sample under the conditions ours are judged in: a default cluster, no memory limit. */
function goSampleAsSpecified(r: BenchResult): boolean {
  return r.options.goSample !== undefined && r.options.operatorMemoryLimitMiB === undefined && defaultCluster(r);
}

export function evaluateTargets(results: readonly BenchResult[]): TargetRow[] {
  const rows: TargetRow[] = [];
  const judge = (target: string, values: number[], ok: (v: number) => boolean, unit: string, basis: string, pick: (v: number[]) => number = median, runs = values.length): TargetRow => {
    if (values.length === 0) return { target, figure: '—', verdict: 'not measured', basis };
    const v = pick(values);
    return { target, figure: `${show(v)}${unit}`, verdict: ok(v) ? 'holds' : 'misses', basis: `${basis}; ${runs} run${runs === 1 ? '' : 's'}` };
  };

  const bursts = byScenario(results, 'burst', 100);
  const paired = numbersAt(bursts, 'ratioWallToFloor');
  if (paired.length > 0) {
    rows.push(judge('burst wall time ≤ 1.05 × floor (N = 100)', paired, (v) => v <= 1.05, ' ×', 'median of burst/floor ratios measured in the same run'));
  } else {
    const floors = numbersAt(byScenario(results, 'floor', 100), 'wallS');
    const walls = numbersAt(bursts, 'wallS');
    const ratio = floors.length && walls.length ? [median(walls) / median(floors)] : [];
    rows.push(judge('burst wall time ≤ 1.05 × floor (N = 100)', ratio, (v) => v <= 1.05, ' ×', 'median burst wall / median floor wall (separate runs)'));
  }

  const steady = byScenario(results, 'steady', 100);
  rows.push(judge('steady: writes per minute = 0 (idle and forced resync)', [...numbersAt(steady, 'idle.writesPerMin'), ...numbersAt(steady, 'resync.writes')], (v) => v === 0, '', 'largest over idle windows and resyncs', (v) => Math.max(...v), steady.length));

  const latency = byScenario(results, 'latency');
  rows.push(judge('latency: create → Available p99 within 1 s of the floor', numbersAt(latency, 'availableP99MinusFloorS'), (v) => v <= 1, ' s', 'median of (p99 − floor p99) measured in the same run'));

  const rss = numbersAt(bursts, 'operator.peakRssMiB');
  rows.push(judge('IoT operator peak RSS ≤ 90 MiB (burst, N = 100)', rss, (v) => v <= 90, ' MiB', 'median peak RSS over burst runs, no memory limit'));

  // Below a Go operator's: operator-sdk's controller-runtime sample, measured on the same cluster
  // (absolute seconds and MiB differ from machine to machine; the ratio is what the aim is about).
  const memcached = byScenario(results, 'memcached', 500);
  const goSample = byScenario(results, 'memcached', 500, goSampleAsSpecified);
  const againstGo = (target: string, figure: string, unit: string, ok: (ratio: number) => boolean): TargetRow => {
    const [ours, theirs] = [numbersAt(memcached, figure), numbersAt(goSample, figure)];
    const measured = ours.length > 0 && theirs.length > 0;
    const medians = measured ? `: ${show(median(ours))} against ${show(median(theirs))}${unit}` : '';
    const basis = `median of ours / median of the Go sample's${medians}, runs alternating on one cluster, no memory limit`;
    return judge(target, measured ? [median(ours) / median(theirs)] : [], ok, ' ×', basis, median, memcached.length + goSample.length);
  };
  rows.push(againstGo("Memcached operator peak RSS < the Go sample's (operator-sdk, N = 500, size 1)", 'operator.peakRssMiB', ' MiB', (v) => v < 1));
  rows.push(againstGo("Memcached operator CPU ≤ 0.8 × the Go sample's (N = 500, size 1)", 'operator.cpuS', ' s', (v) => v <= 0.8));

  const start = byScenario(results, 'start');
  const slowestStart = start.map((r) => Math.max(Number(get(r.figures, 'clusterAbsentS')), Number(get(r.figures, 'clusterRunningS'))));
  rows.push(judge('warm npm start → Available ≤ 30 s (cluster absent or running)', slowestStart, (v) => v <= 30, ' s', 'median over runs of the slower of the two starts'));

  const churnAtSpecifiedRate = (r: BenchResult) => r.scenario === 'churn' && r.options.n === 100 && (r.options.fraction ?? 0.1) === 0.1 && (r.options.periodS ?? 10) === 10;
  const churn = byScenario(results, 'churn', 100).filter(churnAtSpecifiedRate);
  const minutes = [...new Set(churn.map((r) => r.options.m))].join(', ');
  const floorNote = (runs: BenchResult[]) => {
    const p99 = numbersAt(runs, 'floor.changeToReady.p99S');
    return p99.length > 0 ? `; the same churn without the operator (floor, same runs): p99 ${show(median(p99))} s` : '';
  };
  // Runs on a controller-manager with a raised rate limit are no basis for the verdict, but they
  // show what the operator achieves once the default limit no longer queues the rollouts.
  const raised = results.filter(
    (r) => r.ok && shippedOperator(r) && r.options.controllerManagerQps !== undefined && churnAtSpecifiedRate(r),
  );
  const raisedNote = [...new Set(raised.map((r) => Number(r.options.controllerManagerQps)))].map((qps) => {
    const runs = raised.filter((r) => Number(r.options.controllerManagerQps) === qps);
    return `. With the controller-manager at QPS ${qps}: p99 ${show(median(numbersAt(runs, 'changeToAvailable.p99S')))} s${floorNote(runs)}; ${runs.length} run${runs.length === 1 ? '' : 's'}`;
  });
  const churnRow = judge('churn: change → Available p99 ≤ 5 s (N = 100)', numbersAt(churn, 'changeToAvailable.p99S'), (v) => v <= 5, ' s', `median over runs of M = ${minutes || '?'} min${floorNote(churn)}`);
  rows.push({ ...churnRow, basis: churnRow.basis + raisedNote.join('') });

  const restart = byScenario(results, 'restart', 100);
  rows.push(judge('restart: writes after restart = 0', numbersAt(restart, 'writes'), (v) => v === 0, '', 'largest over runs', (v) => Math.max(...v)));

  // N = 1,000 full instances: judged on the scale scenario's cluster, whose controller-manager and
  // scheduler limits are raised so that the operator, not their pacing, is what is measured.
  const scale = scaleRuns(results).filter((r) => r.options.n === 1000);
  const basis = (what: string) => `${what}; controller-manager and scheduler at ${[...new Set(scale.map(controlPlaneQps))].join(', ') || '?'}`;
  rows.push(judge('scale N = 1,000: burst wall ≤ 1.1 × floor', numbersAt(scale, 'ratioWallToFloor'), (v) => v <= 1.1, ' ×', basis('median of burst/floor ratios measured in the same run')));
  rows.push(judge('scale N = 1,000: operator peak RSS ≤ 150 MiB (no memory limit)', numbersAt(scale, 'burst.operator.peakRssMiB'), (v) => v <= 150, ' MiB', basis('median burst peak RSS')));
  // The same objects cached by controller-runtime (bench/go-cache), run beside the operator in
  // the same burst: what a Go operator of this design holds before doing any work of its own.
  const besideGoCache = byScenario(results, 'scale', 1000, shippedBesideCompanion);
  const ratios = besideGoCache.map((r) => Number(get(r.figures, 'burst.operator.peakRssMiB')) / Number(get(r.figures, 'burst.companion.peakRssMiB')));
  const peaks = (dotted: string) => show(median(numbersAt(besideGoCache, dotted)));
  const goCacheBasis = ratios.length > 0 ? `: ${peaks('burst.operator.peakRssMiB')} against ${peaks('burst.companion.peakRssMiB')} MiB` : '';
  rows.push(
    judge(
      'scale N = 1,000: operator peak RSS < that of the same objects in a controller-runtime cache (bench/go-cache, beside it)',
      ratios,
      (v) => v < 1,
      ' ×',
      `median of ours / the Go cache's, measured in the same burst${goCacheBasis}; no memory limit`,
    ),
  );
  rows.push(judge('scale N = 1,000: restart → every instance re-checked ≤ 15 s', numbersAt(scale, 'restart.killToVerifiedS'), (v) => v <= 15, ' s', basis('median from kill -9')));
  rows.push(judge('scale N = 1,000: writes after restart and in steady state = 0', [...numbersAt(scale, 'restart.writes'), ...numbersAt(scale, 'steady.idle.writesPerMin'), ...numbersAt(scale, 'steady.resync.writes')], (v) => v === 0, '', basis('largest over restarts, idle windows and resyncs'), (v) => Math.max(...v), scale.length));
  rows.push(judge('scale N = 1,000: churn change → Available p99 within 1 s of the floor', numbersAt(scale, 'churnP99OverFloorS'), (v) => v <= 1, ' s', basis('median of (p99 − floor p99) measured in the same run')));

  // The gateway's fleet limits: real processes on this machine, no cluster (scenarios/fleet.ts).
  const fleet = byScenario(results, 'fleet');
  const cpuRatios = numbersAt(fleet, 'throughput.tlsGatewayCpuPerMessage');
  const cpuNote = cpuRatios.length > 0 ? `; the gateway's CPU per message over TLS ${show(median(cpuRatios))} × plaintext's` : '';
  rows.push(judge('fleet: MQTT QoS 1 over TLS costs ≤ 30 % of the plaintext messages/s', numbersAt(fleet, 'throughput.tlsToPlain'), (v) => v >= 0.7, ' × plaintext', `median of mqtts / mqtt PUBACKs/s measured in the same run${cpuNote}`));
  const herds = fleet.filter((r) => get(r.figures, 'herd.devices') === 10_000);
  const reconnected = herds.map((r) => {
    const all = get(r.figures, 'herd.reconnect.allConnectedS');
    return typeof all === 'number' ? all : Number.POSITIVE_INFINITY;
  });
  const herdTarget = 'fleet: 10,000 devices over TLS all connected again ≤ 60 s after the gateway is SIGKILLed and restarted';
  if (herds.length === 0) {
    rows.push({ target: herdTarget, figure: '—', verdict: 'not measured', basis: 'no fleet run of 10,000 devices' });
  } else {
    const v = median(reconnected);
    const notAll = herds.filter((r) => get(r.figures, 'herd.reconnect.allConnectedS') === undefined);
    const shown = notAll.map((r) => `${String(get(r.figures, 'herd.reconnect.connected'))} of 10,000 after ${String(get(r.figures, 'herd.reconnect.wallS'))} s`).join('; ');
    rows.push({
      target: herdTarget,
      figure: Number.isFinite(v) ? `${show(v)} s` : `not all (${shown})`,
      verdict: v <= 60 ? 'holds' : 'misses',
      basis: `median over runs; a run in which not all reconnected within its timeout counts as never; ${herds.length} run${herds.length === 1 ? '' : 's'}`,
    });
  }
  const growth = fleet.map((r) => 100 * Math.max(Number(get(r.figures, 'flood.p99Growth.cold')), Number(get(r.figures, 'flood.p99Growth.warm'))));
  rows.push(judge("fleet: a wrong-password flood delays other devices' login p99 by ≤ 10 %", growth.filter(Number.isFinite), (v) => v <= 10, ' %', 'median over runs of the larger growth, uncached or cached logins'));
  return rows;
}

/** Scale runs of the operator as shipped (any control-plane limits: the scenario raises them on purpose). */
function scaleRuns(results: readonly BenchResult[]): BenchResult[] {
  return results.filter((r) => r.ok && r.scenario === 'scale' && shippedOperator(r));
}

function controlPlaneQps(r: BenchResult): string {
  return `QPS ${String(r.options.controllerManagerQps ?? 20)} / ${String(r.options.schedulerQps ?? 50)}`;
}

/** The columns of the growth table: [header, dotted path into a scale result's figures]. */
const GROWTH_COLUMNS: [string, string][] = [
  ['burst wall (s)', 'burst.wallS'],
  ['burst / floor', 'ratioWallToFloor'],
  ['peak RSS (MiB)', 'burst.operator.peakRssMiB'],
  ['RSS after 5 idle min (MiB)', 'steady.rss.idleEndMiB'],
  ['CPU per instance (ms)', 'perInstance.cpuMs'],
  ['requests per instance', 'perInstance.requests'],
  ['reconciles per instance', 'perInstance.reconciles'],
  ['idle writes / min', 'steady.idle.writesPerMin'],
  ['resync: requests', 'steady.resync.requests'],
  ['resync: all reconciled (s)', 'steady.resync.allReconciledS'],
  ['churn p99 − floor (s)', 'churnP99OverFloorS'],
  ['restart → synced (s)', 'restart.killToReadyS'],
  ['restart → all re-checked (s)', 'restart.killToVerifiedS'],
  ['restart → queues empty (s)', 'restart.killToQuietS'],
  ['writes after restart', 'restart.writes'],
];

/** One row per N of the scale runs (medians), the smallest N first: how each figure grows with N. */
export function scaleGrowthTable(results: readonly BenchResult[]): string {
  const runs = scaleRuns(results);
  const sizes = [...new Set(runs.map((r) => Number(r.options.n)))].sort((a, b) => a - b);
  if (sizes.length === 0) return '';
  const rows = sizes.map((n) => {
    const atN = runs.filter((r) => r.options.n === n);
    return [String(n), String(atN.length), ...GROWTH_COLUMNS.map(([, dotted]) => medianShown(atN, dotted))];
  });
  return markdownTable(['N', 'runs', ...GROWTH_COLUMNS.map(([header]) => header)], rows);
}

export function burstChart(results: readonly BenchResult[]): string {
  const bursts = byScenario(results, 'burst', 100);
  const use = bursts.length > 0 ? bursts : byScenario(results, 'burst');
  const series: Series[] = [];
  for (const r of use) {
    if (r.samples.floorReadyS?.length) series.push({ label: 'floor: workloads ready (no operator)', values: r.samples.floorReadyS, color: '#888888', dashed: true, opacity: 0.8 });
  }
  for (const r of use) {
    if (r.samples.availableS?.length) series.push({ label: 'operator: IoTService Available', values: r.samples.availableS, color: '#1f6fb2', opacity: 0.85 });
  }
  const n = use[0]?.options.n ?? '?';
  return cdfSvg(series, { title: `burst: per-instance time from create to ready, N = ${String(n)} (${use.length} runs, one line each)`, xLabel: 'seconds since the instance was created' });
}

/** Median of a figure over runs, shown; '—' when no run has it. */
function medianShown(runs: readonly BenchResult[], dotted: string): string {
  const values = numbersAt(runs, dotted);
  return values.length > 0 ? show(median(values)) : '—';
}

/**
 * The throughput scenario side by side: one row per size and operator concurrency (medians over
 * the runs of the operator as shipped), then the memory-growth figure: RSS at idle per size and
 * its least-squares slope per 1,000 cached objects, per concurrency.
 */
export function throughputTables(results: readonly BenchResult[]): string[] {
  const runs = results.filter((r) => r.ok && r.scenario === 'throughput' && asSpecified(r));
  const concurrency = (r: BenchResult) => (r.options.maxConcurrentReconciles === undefined ? 'default' : String(r.options.maxConcurrentReconciles));
  const groups = new Map<string, BenchResult[]>();
  for (const r of runs) {
    const key = `${String(r.options.n)}\u0000${concurrency(r)}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const keys = [...groups.keys()].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const out: string[] = [];
  if (runs.length > 0) {
    out.push('');
    out.push('Side by side (medians; the operator as shipped):');
    out.push('');
    out.push(
      markdownTable(
        ['N', 'max concurrent reconciles', 'runs', 'objects/s', 'objects/s (p10–p90)', 'wall to last Deployment (s)', 'operator requests', 'writes', 'rate-limiter wait (s)', 'CPU (s)', 'peak RSS (MiB)'],
        keys.map((key) => {
          const g = groups.get(key)!;
          const [n, c] = key.split('\u0000') as [string, string];
          return [
            n,
            c,
            String(g.length),
            medianShown(g, 'objectsPerS'),
            medianShown(g, 'steadyObjectsPerS'),
            medianShown(g, 'wallS'),
            medianShown(g, 'operator.requests.total'),
            medianShown(g, 'operator.requests.writes'),
            medianShown(g, 'operatorClient.rateLimiterWaitS'),
            medianShown(g, 'operator.cpuS'),
            medianShown(g, 'operator.peakRssMiB'),
          ];
        }),
        'rrrrrrrrrrr',
      ),
    );
  }
  // Memory does not depend on the controller-manager's pace, so runs on a cluster whose
  // controller-manager has a raised rate limit (it observes every Deployment sooner) count here.
  const withIdle = results.filter(
    (r) => r.ok && r.scenario === 'throughput' && r.options.operatorCmd === undefined && r.options.operatorMemoryLimitMiB === undefined && typeof get(r.figures, 'idle.rssMiB') === 'number',
  );
  if (withIdle.length > 0) {
    const cmQps = (r: BenchResult) => (r.options.controllerManagerQps === undefined ? '20 (default)' : String(r.options.controllerManagerQps));
    const memoryGroups = new Map<string, BenchResult[]>();
    for (const r of withIdle) {
      const key = `${String(r.options.n)}\u0000${concurrency(r)}\u0000${cmQps(r)}`;
      memoryGroups.set(key, [...(memoryGroups.get(key) ?? []), r]);
    }
    out.push('');
    out.push(
      'Memory growth (size 0, so the cache holds the Memcacheds and their Deployments; RSS once the controller-manager has observed every Deployment ' +
        'and the operator has been idle for the settle time):',
    );
    out.push('');
    out.push(
      markdownTable(
        ['N', 'max concurrent reconciles', 'controller-manager QPS', 'cached objects', 'runs', 'peak RSS (MiB)', 'RSS at idle (MiB)'],
        [...memoryGroups.keys()]
          .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
          .map((key) => {
            const g = memoryGroups.get(key)!;
            const [n, c, q] = key.split('\u0000') as [string, string, string];
            return [n, c, q, medianShown(g, 'cachedObjects'), String(g.length), medianShown(g, 'idle.peakRssMiB'), medianShown(g, 'idle.rssMiB')];
          }),
        'rrrrrrr',
      ),
    );
    for (const c of [...new Set(withIdle.map(concurrency))].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))) {
      const g = withIdle.filter((r) => concurrency(r) === c);
      const points = g.map((r) => ({ cachedObjects: Number(get(r.figures, 'cachedObjects')), rssMiB: Number(get(r.figures, 'idle.rssMiB')) }));
      const peaks = g.map((r) => ({ cachedObjects: Number(get(r.figures, 'cachedObjects')), rssMiB: Number(get(r.figures, 'idle.peakRssMiB')) }));
      const idle = rssSlope(points);
      const peak = rssSlope(peaks);
      if (!idle || !peak) continue;
      const sizes = [...new Set(g.map((r) => Number(r.options.n)))].sort((a, b) => a - b).join(', ');
      out.push('');
      out.push(
        `- ${/^\d+$/.test(c) ? `Concurrency ${c}` : 'At the operator\'s default concurrency'}: RSS at idle grows ${show(idle.miBPer1000)} MiB per 1,000 cached objects (least squares over ${g.length} runs at N = ${sizes}; ` +
          `${show(idle.interceptMiB)} MiB at none); peak RSS ${show(peak.miBPer1000)} MiB per 1,000.`,
      );
    }
  }
  return out;
}

export interface ReportInput {
  results: readonly BenchResult[];
  /** The chart's path relative to docs/performance.md. */
  svgName: string;
  /** Paths relative to docs/performance.md (defaults: the repository's layout). */
  links?: { analysis?: string; results?: string; bench?: string };
  /** docs/performance.md's path relative to the results page (default: the repository's layout). */
  docFromResults?: string;
  /** bench/analysis.md's path relative to the results page (default: the repository's layout). */
  analysisFromResults?: string;
}

/**
 * The figures docs/performance.md shows as headlines: one group of runs each, named by scenario
 * and size key (sizeKey); a headline with no such runs is left out.
 */
export const HEADLINES: { scenario: string; size: string; figures: [string, string][] }[] = [
  { scenario: 'burst', size: 'n=100', figures: [['100 IoTServices at once: wall time to all Available (s)', 'wallS'], ['burst wall / operator-free floor wall (same run)', 'ratioWallToFloor'], ['operator CPU (s)', 'operator.cpuS'], ['operator peak RSS (MiB)', 'operator.peakRssMiB']] },
  { scenario: 'latency', size: 'k=30', figures: [['one IoTService: create → Available p99 (s)', 'availableP99S'], ['Available p99 − floor p99 (s)', 'availableP99MinusFloorS']] },
  { scenario: 'steady', size: 'n=100 m=2', figures: [['idle: operator writes per minute', 'idle.writesPerMin'], ['forced resync: writes', 'resync.writes']] },
  { scenario: 'churn', size: 'n=100 m=5 controller-manager QPS 200', figures: [['change → Available p99 (s)', 'changeToAvailable.p99S'], ['floor (same run, no operator): change → ready p99 (s)', 'floor.changeToReady.p99S']] },
  { scenario: 'restart', size: 'n=100', figures: [['kill → every instance verified (s)', 'killToVerifiedS'], ['writes after restart', 'writes']] },
  { scenario: 'scale', size: 'n=1000 m=5 fraction=0.01 controller-manager QPS 200 scheduler QPS 200', figures: [['1,000 IoTServices: burst wall / floor wall (same run)', 'ratioWallToFloor'], ['burst: operator peak RSS (MiB)', 'burst.operator.peakRssMiB'], ['restart: kill → every instance re-checked (s)', 'restart.killToVerifiedS']] },
  { scenario: 'sharded', size: 'n=2000 shards=3 controller-manager QPS 200', figures: [['2,000 IoTServices on 3 shards: wall time to all Available (s)', 'wallS'], ['largest replica: peak RSS (MiB)', 'totals.maxPeakRssMiB']] },
  { scenario: 'memcached', size: 'n=500', figures: [['500 Memcacheds: wall time, every Deployment ready (s)', 'wallS'], ['operator peak RSS (MiB)', 'operator.peakRssMiB']] },
  { scenario: 'throughput', size: 'n=2000 controller-manager QPS 200', figures: [['Memcached operator as the bottleneck: objects/s', 'objectsPerS']] },
  { scenario: 'armada', size: 'n=50', figures: [['50 ArmadaCharts: operator wall / helm install --wait wall (same run)', 'ratioToFloor']] },
  { scenario: 'start', size: '', figures: [['warm npm start → Available, cluster running (s)', 'clusterRunningS']] },
  { scenario: 'fleet', size: '', figures: [['gateway on this machine: MQTT QoS 1 PUBACKs/s over TLS / plaintext', 'throughput.tlsToPlain'], ['uncached logins/s (one password check in core each), mqtts', 'logins.cold.mqtts.perS'], ['cached logins/s, mqtts', 'logins.warm.mqtts.perS'], ['10,000 devices reconnecting over TLS after a gateway SIGKILL: connected within the timeout', 'herd.reconnect.connected']] },
  { scenario: 'reference', size: 'controller-manager QPS 100', figures: [['one reference IoT service on 2 cores: create → Available (s)', 'applyToAvailableS'], ['MQTT QoS 1: peak messages/s acknowledged (median second)', 'mqtt.saturation.peakPerS'], ['HTTP: peak messages/s acknowledged (median second)', 'http.saturation.peakPerS'], ['MQTT latency step: acknowledgement → stored p99 (ms)', 'mqtt.latency.latencyMs.p99Ms']] },
];

/** Rows "scenario | figure | median | min–max | runs" of the headlines the runs have. */
export function headlineRows(results: readonly BenchResult[]): string[][] {
  const rows: string[][] = [];
  for (const h of HEADLINES) {
    const group = results.filter((r) => r.ok && r.scenario === h.scenario && sizeKey(r) === h.size);
    for (const [label, dotted] of h.figures) {
      const values = numbersAt(group, dotted);
      if (values.length === 0) continue;
      const range = values.length > 1 ? `${show(Math.min(...values))}–${show(Math.max(...values))}` : '';
      rows.push([`${h.scenario}${h.size ? ` (${h.size})` : ''}`, label, show(median(values)), range, String(values.length)]);
    }
  }
  return rows;
}

function environment(ok: readonly BenchResult[]): string[] {
  if (ok.length === 0) return [];
  const commits = [...new Set(ok.map((r) => r.versions.gitCommit.slice(0, 10)))];
  const m = ok[0]!.machine;
  const loads = ok.map((r) => r.machine.loadavgStart[0] ?? 0);
  // runs with no cluster of their own (fleet) had no bench cluster's API server among them
  const apiservers = ok.filter((r) => r.versions.kubernetes !== NO_CLUSTER).map((r) => r.machine.kubeApiserversRunning);
  return [
    '## Environment',
    '',
    `- Machine: ${m.cores} cores (${m.cpuModel}), ${m.memoryGiB} GiB; Node.js ${ok[0]!.versions.node}; Kubernetes ${ok[0]!.versions.kubernetes} (kwok fake nodes).`,
    `- Commits measured: ${commits.length > 3 ? `${commits.length} (the project moved on while the runs went on; each result file names its commit)` : commits.join(', ')}.`,
    `- The machine was shared: the 1-minute load average at the start of a run ranged ${show(Math.min(...loads))}–${show(Math.max(...loads))} ` +
      `and ${spread(apiservers.map((n) => n - 1))} other clusters' API servers ran beside the bench cluster's. ` +
      'Absolute times are therefore noisy; ratios measured within one run are the robust figures.',
    '',
  ];
}

/**
 * docs/performance.md (`markdown`): targets, headline figures, the chart and the environment, with
 * links to the findings (bench/analysis.md) and every figure (`results`, bench/results/README.md).
 */
export function buildReport({ results, svgName, links = {}, docFromResults = '../../docs/performance.md', analysisFromResults = '../analysis.md' }: ReportInput): { markdown: string; results: string; svg: string } {
  const { analysis = '../bench/analysis.md', results: resultsLink = '../bench/results/README.md', bench = '../bench/README.md' } = links;
  const ok = results.filter((r) => r.ok);
  const failed = results.filter((r) => !r.ok);
  const out: string[] = [];
  out.push(`<!-- ${NOTICE} -->`);
  out.push('# Performance');
  out.push('');
  out.push(
    'What the operators cost and how fast they are, measured on the real local control plane ' +
      '(kube-apiserver, etcd, controller-manager, scheduler and kwok fake nodes, all on one machine). ' +
      'Every figure is the median over runs, with the min–max range. ' +
      `Every figure of every scenario: [bench/results/README.md](${resultsLink}); what was found and how: [bench/analysis.md](${analysis}); ` +
      `the scenarios and their options: [bench/README.md](${bench}).`,
  );
  out.push('');
  out.push('Reproduce a figure with `npm run bench -- <scenario> --runs 3`, then `npm run bench -- report`. ' +
    'Figures far from these on a similar machine: compare the environment below and the failed runs in the results page first.');
  out.push('');

  out.push('## Targets');
  out.push('');
  out.push(markdownTable(['target', 'measured', 'verdict', 'basis'], evaluateTargets(ok).map((t) => [t.target, t.figure, t.verdict, t.basis]), 'lrll'));
  out.push('');

  const headlines = headlineRows(ok);
  if (headlines.length > 0) {
    out.push('## Headline figures');
    out.push('');
    out.push(markdownTable(['scenario', 'figure', 'median', 'min–max', 'runs'], headlines, 'llrrr'));
    out.push('');
  }
  if (ok.some((r) => r.scenario === 'burst')) {
    out.push(`![per-instance time to Available, burst](${svgName})`);
    out.push('');
  }
  out.push(...environment(ok));
  if (failed.length > 0) {
    out.push(`${failed.length} failed run${failed.length === 1 ? '' : 's'} (never averaged in): listed in [bench/results/README.md](${resultsLink}).`);
    out.push('');
  }

  const res: string[] = [];
  res.push(`<!-- ${NOTICE} -->`);
  res.push('# Benchmark results');
  res.push('');
  res.push(
    'Every figure of every scenario in this folder\'s result files: the median over the successful runs of one scenario at one size, ' +
      'with the min–max range and the number of runs. Each scenario is described in bench/scenarios/*.ts. ' +
      `Targets and headline figures: [docs/performance.md](${docFromResults}); findings: [bench/analysis.md](${analysisFromResults}).`,
  );
  res.push('');
  res.push(...environment(ok));
  res.push('## Results');
  for (const scenario of [...SCENARIO_ORDER, ...new Set(ok.map((r) => r.scenario).filter((s) => !SCENARIO_ORDER.includes(s)))]) {
    const runs = ok.filter((r) => r.scenario === scenario);
    if (runs.length === 0) continue;
    const groups = new Map<string, BenchResult[]>();
    for (const r of runs) groups.set(sizeKey(r), [...(groups.get(sizeKey(r)) ?? []), r]);
    const keys = [...groups.keys()].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
    if (scenario === 'throughput') {
      res.push('');
      res.push('### throughput: the operator as the bottleneck');
      res.push(...throughputTables(runs));
    }
    if (scenario === 'scale') {
      res.push('');
      res.push('### scale: how the figures grow with N (medians)');
      res.push('');
      res.push(scaleGrowthTable(runs));
    }
    for (const key of keys) {
      const group = groups.get(key)!;
      res.push('');
      res.push(`### ${scenario} (${key || 'defaults'}; ${group.length} run${group.length === 1 ? '' : 's'})`);
      res.push('');
      res.push(markdownTable(['figure', 'median', 'min–max', 'runs'], figureRows(scenario, group)));
    }
  }
  res.push('');

  if (failed.length > 0) {
    res.push('## Failed runs');
    res.push('');
    for (const r of failed) res.push(`- ${r.scenario} (${sizeKey(r)}) at ${r.startedAt}: ${(r.error ?? 'unknown error').split('\n')[0]}`);
    res.push('');
  }
  return { markdown: out.join('\n'), results: res.join('\n'), svg: `<!-- ${NOTICE} -->\n${burstChart(ok)}` };
}

export function loadResults(dir: string): BenchResult[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as BenchResult);
}

/** Where the report is read from and written to unless `npm run bench -- report` is told otherwise. */
export const DEFAULT_REPORT = {
  resultsDir: path.join(repoRoot, 'bench/results'),
  docFile: path.join(repoRoot, 'docs/performance.md'),
  svgFile: path.join(repoRoot, 'docs/burst-distribution.svg'),
};

/** The report's three files (absolute path → text) from the results in `resultsDir`; the results page is README.md there. */
export function reportFiles(o: typeof DEFAULT_REPORT): Record<string, string> {
  const resultsFile = path.join(o.resultsDir, 'README.md');
  const analysisFile = path.join(path.dirname(o.resultsDir), 'analysis.md');
  const benchReadme = path.join(path.dirname(o.resultsDir), 'README.md');
  const fromDoc = (f: string) => path.relative(path.dirname(o.docFile), f);
  const fromResults = (f: string) => path.relative(path.dirname(resultsFile), f);
  const { markdown, results, svg } = buildReport({
    results: loadResults(o.resultsDir),
    svgName: fromDoc(o.svgFile),
    links: { analysis: fromDoc(analysisFile), results: fromDoc(resultsFile), bench: fromDoc(benchReadme) },
    docFromResults: fromResults(o.docFile),
    analysisFromResults: fromResults(analysisFile),
  });
  return { [o.docFile]: markdown, [resultsFile]: results, [o.svgFile]: svg };
}

export function writeReport(o: typeof DEFAULT_REPORT): string[] {
  const files = reportFiles(o);
  for (const [file, text] of Object.entries(files)) writeFileSync(file, text);
  return Object.keys(files);
}

/** The generator of `npm run generate` that writes the report (scripts/generate.ts runs `reportFiles` under this name). */
export const REPORT_GENERATOR = 'performance-report';

const NOTICE = generatedNotice({ command: `npm run generate (${REPORT_GENERATOR})`, source: 'bench/report.ts (from bench/results/*.json)' });
