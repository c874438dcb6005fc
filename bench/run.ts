/**
 * The benchmark runner: `npm run bench -- <scenario> [options]` and `npm run bench -- report`.
 *
 * Guarantees:
 * - Every scenario runs against the dedicated bench cluster (`iot-bench`, started or reused by
 *   cluster up with enough kwok nodes) unless `--kubeconfig` names another; the operator under
 *   test is a separate process (`--operator-cmd`). A scenario of this machine alone (`fleet`)
 *   starts, reuses and uses no cluster at all.
 * - Each of `--runs` runs starts from a clean cluster (leftovers of interrupted runs are removed
 *   first), prints its figures as a table and writes one JSON file to `--out` (default
 *   bench/results), failed runs included (`ok: false` with the error), so nothing measured is
 *   lost. The exit code is non-zero if any run failed.
 * - Ctrl-C stops the operator processes (and the fleet scenario's processes) this runner started
 *   before exiting.
 */
import { mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { BenchContext, BenchOptions, LocalScenario, Scenario, ScenarioOutput } from './lib/context.ts';
import { summarizeProfile, type CpuProfile } from './lib/cpuprofile.ts';
import { IOT_DEFAULT_COMMAND, PODS_PER_INSTANCE, installIoTCrd, removeLeftovers } from './lib/iot.ts';
import { BENCH_CLUSTER, clusterDirOf, connect, ensureBenchCluster, kubernetesVersion, log, podCapacity, repoRoot } from './lib/kube.ts';
import { OperatorProcess } from './lib/operator.ts';
import { componentFlag } from './lib/proc.ts';
import { flatten, formatTable, gitInfo, machineInfo, NO_CLUSTER, writeResult, type BenchResult } from './lib/results.ts';
import { bundleOperator } from '../images/bundle.ts';
import { DEFAULT_REPORT, writeReport } from './report.ts';
import { runApplications } from './scenarios/applications.ts';
import { ARMADA_DEFAULT_COMMAND, runArmada } from './scenarios/armada.ts';
import { runBurst } from './scenarios/burst.ts';
import { runChurn } from './scenarios/churn.ts';
import { killStarted } from './fleet/services.ts';
import { runFleet } from './scenarios/fleet.ts';
import { runFloor } from './scenarios/floor.ts';
import { runLatency } from './scenarios/latency.ts';
import { MEMCACHED_DEFAULT_COMMAND, goSampleCommand, runMemcached } from './scenarios/memcached.ts';
import { runRestart } from './scenarios/restart.ts';
import { runReference } from './scenarios/reference.ts';
import { runScale } from './scenarios/scale.ts';
import { runStart } from './scenarios/start.ts';
import { PODS_PER_LIGHT_INSTANCE, runSharded } from './scenarios/sharded.ts';
import { runSteady } from './scenarios/steady.ts';
import { runThroughput } from './scenarios/throughput.ts';
import { combinations, parseList } from './lib/throughput.ts';

interface ScenarioSpec {
  /** Runs against the bench cluster (or the one --kubeconfig names). */
  run?: Scenario;
  /** Runs on this machine alone: no cluster is started, reused or used. */
  runLocal?: LocalScenario;
  defaults: Partial<BenchOptions>;
  /** Pods the scenario needs at once (to size the cluster). */
  pods: (o: BenchOptions) => number;
  /** Option names that matter for this scenario (recorded in the result). */
  uses: (keyof BenchOptions)[];
  operator?: string;
  /** The operator whose bundle (images/bundle.ts) the default command runs; rebuilt before the runs. */
  bundle?: string;
  /** The scenario needs the Kubernetes controller sharder on the cluster (cluster up CLUSTER_SHARDER=1). */
  sharder?: boolean;
  /** The controller-manager's and scheduler's client QPS a new bench cluster gets, so that neither paces the scenario. */
  controlPlaneQps?: number;
  /** The scenario runs only on a cluster named by --kubeconfig (why, when it is missing). */
  needsKubeconfig?: string;
}

const scenarios: Record<string, ScenarioSpec> = {
  burst: { run: runBurst, defaults: { n: 100 }, pods: (o) => o.n * PODS_PER_INSTANCE, uses: ['n', 'floor', 'workers', 'companionCmd'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot' },
  steady: { run: runSteady, defaults: { n: 100, m: 5 }, pods: (o) => o.n * PODS_PER_INSTANCE, uses: ['n', 'm', 'workers'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot' },
  latency: { run: runLatency, defaults: { k: 30 }, pods: (o) => o.k * PODS_PER_INSTANCE, uses: ['k', 'floor', 'workers'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot' },
  churn: { run: runChurn, defaults: { n: 100, m: 5 }, pods: (o) => Math.ceil(o.n * PODS_PER_INSTANCE * 1.5), uses: ['n', 'm', 'periodS', 'fraction', 'floor', 'workers'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot' },
  restart: { run: runRestart, defaults: { n: 100 }, pods: (o) => o.n * PODS_PER_INSTANCE, uses: ['n', 'workers'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot' },
  memcached: { run: runMemcached, defaults: { n: 1000 }, pods: (o) => o.n, uses: ['n', 'goSample'], operator: MEMCACHED_DEFAULT_COMMAND, bundle: 'memcached' },
  throughput: { run: runThroughput, defaults: { n: 2000 }, pods: () => 0, uses: ['n', 'maxConcurrentReconciles', 'settleS'], operator: MEMCACHED_DEFAULT_COMMAND, bundle: 'memcached' },
  armada: { run: runArmada, defaults: { n: 50 }, pods: (o) => o.n, uses: ['n', 'floor', 'workers'], operator: ARMADA_DEFAULT_COMMAND, bundle: 'armada' },
  sharded: { run: runSharded, defaults: { n: 2000 }, pods: (o) => o.n * PODS_PER_LIGHT_INSTANCE, uses: ['n', 'shards', 'workers'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot', sharder: true },
  scale: { run: runScale, defaults: { n: 1000, m: 5, fraction: 0.01 }, pods: (o) => Math.ceil(o.n * PODS_PER_INSTANCE * 1.5), uses: ['n', 'm', 'periodS', 'fraction', 'floor', 'workers', 'companionCmd'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot', controlPlaneQps: 200 },
  floor: { run: runFloor, defaults: { n: 100, k: 30 }, pods: (o) => Math.max(o.n, o.k) * PODS_PER_INSTANCE, uses: ['n', 'k'] },
  start: { run: runStart, defaults: {}, pods: () => 0, uses: [] },
  fleet: { runLocal: runFleet, defaults: {}, pods: () => 0, uses: ['devices', 'windowS', 'herd', 'clients', 'logins'] },
  reference: {
    run: runReference, defaults: {}, pods: () => 0, uses: ['devices', 'windowS', 'protocols', 'latencyShare', 'settleS', 'workers'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot',
    needsKubeconfig: 'reference runs on the cluster with the real node: --kubeconfig <its kubeconfig> (e.g. /root/.kwok/clusters/iot-operator/kubeconfig.yaml)',
  },
  applications: {
    run: runApplications, defaults: {}, pods: () => 0, uses: ['windowS', 'workers'], operator: IOT_DEFAULT_COMMAND, bundle: 'iot',
    needsKubeconfig: 'applications runs on the cluster with the real node: --kubeconfig <its kubeconfig> (e.g. /root/.kwok/clusters/iot-operator/kubeconfig.yaml)',
  },
};

const usage = `usage: npm run bench -- <scenario> [options]
       npm run bench -- report [--out bench/results] [--doc docs/performance.md] [--svg docs/burst-distribution.svg]
                         (also writes every figure of every scenario to <out>/README.md)
       npm run bench -- profile <file.cpuprofile | directory>   (self time by function and by area)

scenarios: ${Object.keys(scenarios).join(', ')}
options:
  --n <count>[,<count>]  instances (burst/steady/churn/restart/floor 100, memcached 1000, armada 50,
                         throughput and sharded 2000, scale 1000); a list runs each size, one result file each
  --m <minutes>          steady: idle time; churn: duration; scale: both (default 5)
  --k <count>            latency/floor: instances created one at a time (default 30; floor --k 0 skips)
  --runs <count>         repetitions, each written to its own result file (default 1)
  --operator-cmd "<cmd>" operator under test (default: the scenario's operator, bundled as the image ships it)
  --companion-cmd "<cmd>"
                         burst/scale: also run this beside the IoT operator, with its environment,
                         and report its peak RSS, CPU and requests over the burst (\`companion\`);
                         e.g. the IoT watches in controller-runtime, bench/go-cache (see bench/README.md)
  --workers <count>      --max-concurrent-reconciles passed to the IoT operator; armada: the
                         operator's concurrent chart reconciles and the floor's parallel helm installs (default 4)
  --max-concurrent-reconciles <c>[,<c>]
                         throughput: passed to the Memcached operator (default: its own); a list
                         runs each value, one result file each (e.g. 1,4,16)
  --settle <seconds>     throughput: idle time before the RSS-at-idle sample (default 20; 0 = skip
                         the memory figure and the wait for the controller-manager)
  --no-floor             burst/latency/churn/scale: skip the operator-free floor measured in the same run
  --go-sample <dir>      memcached: run operator-sdk's Go Memcached sample (a checkout of
                         testdata/go/v4/memcached-operator, built to <dir>/bin/manager) with its CRD and
                         its sample's spec instead of our operator; done when every Deployment is ready
  --period <seconds>     churn/scale: seconds between rounds of changes (default 10)
  --fraction <0..1>      churn/scale: share of instances changed per round (default 0.1; scale 0.01)
  --shards <count>       sharded: replicas of the IoT operator, one shard each (default 3)
  --memory-limit <MiB>   run the operator in a memory cgroup with this limit, as its Pod's
                         memory limit does in a cluster (deploy/operator.yml: 256); needs root
  --devices <k>[,<k>]    reference: devices per throughput step (default 1,4,16,64; then ×4 up to 256
                         while the acknowledged rate still grows by 10 % a step)
  --window <seconds>     reference: measuring window of each throughput step (default 30); applications:
                         of the stream's and the commands' windows (default 60)
  --protocols <p>[,<p>]  reference: mqtt, http or both, in that order (default mqtt,http)
  --latency-share <0..1> reference: after a protocol's throughput steps, a latency step paced to this
                         share of their highest stored rate (median second), with the device count
                         of the step that reached it: acknowledgement → stored p50/p90/p99/max (default 0.8)
  --devices <k>          fleet: devices publishing in the throughput phase (default 50); --window: seconds
                         of each of its four windows (default 15)
  --herd <count>         fleet: devices of the reconnect herd (default 10000)
  --clients <count>      fleet: processes the devices are spread over (default 2)
  --logins <count>       fleet: devices per login measurement (default 200)
  --timeout <seconds>    give up waiting after this long (default 900; fleet: for each herd)
  --kubeconfig <path>    use this cluster instead of the bench cluster 'iot-bench'
  --out <dir>            where result files go (default bench/results)`;

function num(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got "${value}"`);
  return n;
}

function parseProtocols(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const list = [...new Set(value.split(',').map((p) => p.trim()))];
  if (list.length === 0 || list.some((p) => p !== 'mqtt' && p !== 'http')) throw new Error(`--protocols must list mqtt and/or http, got "${value}"`);
  return list;
}

function parseShare(value: string | undefined, name: string): number | undefined {
  const share = num(value, name);
  if (share !== undefined && (share === 0 || share > 1)) throw new Error(`--${name} must be a share above 0 and at most 1, got "${value}"`);
  return share;
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      n: { type: 'string' },
      m: { type: 'string' },
      k: { type: 'string' },
      runs: { type: 'string' },
      'operator-cmd': { type: 'string' },
      'companion-cmd': { type: 'string' },
      workers: { type: 'string' },
      'max-concurrent-reconciles': { type: 'string' },
      settle: { type: 'string' },
      'no-floor': { type: 'boolean' },
      'go-sample': { type: 'string' },
      period: { type: 'string' },
      fraction: { type: 'string' },
      timeout: { type: 'string' },
      'memory-limit': { type: 'string' },
      shards: { type: 'string' },
      devices: { type: 'string' },
      window: { type: 'string' },
      protocols: { type: 'string' },
      'latency-share': { type: 'string' },
      herd: { type: 'string' },
      clients: { type: 'string' },
      logins: { type: 'string' },
      kubeconfig: { type: 'string' },
      out: { type: 'string' },
      doc: { type: 'string' },
      svg: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const name = positionals[0];
  if (values.help || !name) {
    console.log(usage);
    return name || values.help ? 0 : 2;
  }
  if (name === 'report') {
    const written = writeReport({
      resultsDir: path.resolve(values.out ?? DEFAULT_REPORT.resultsDir),
      docFile: path.resolve(values.doc ?? DEFAULT_REPORT.docFile),
      svgFile: path.resolve(values.svg ?? DEFAULT_REPORT.svgFile),
    });
    console.log(`wrote ${written.join(', ')}`);
    return 0;
  }
  if (name === 'profile') {
    const target = positionals[1];
    if (!target) throw new Error('usage: npm run bench -- profile <file.cpuprofile | directory>');
    const files = statSync(target).isDirectory()
      ? readdirSync(target).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(target, f))
      : [target];
    for (const file of files) {
      const s = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, repoRoot, 30);
      console.log(`\n${file}: ${(s.totalMs / 1000).toFixed(2)} s on CPU, ${(s.idleMs / 1000).toFixed(2)} s idle`);
      console.log(formatTable(['self time by area', 'ms', '%'], s.areas.map((a) => [a.name, a.selfMs, a.percent])));
      console.log('');
      console.log(formatTable(['self time by function', 'ms', '%'], s.functions.map((f) => [f.name, f.selfMs, f.percent])));
    }
    return 0;
  }
  const spec = scenarios[name];
  if (!spec) {
    console.error(`unknown scenario "${name}"\n${usage}`);
    return 2;
  }
  if (values['companion-cmd'] !== undefined && !spec.uses.includes('companionCmd')) {
    console.error(`--companion-cmd is measured by ${Object.keys(scenarios).filter((s) => scenarios[s]!.uses.includes('companionCmd')).join(' and ')}, not ${name}`);
    return 2;
  }
  const sizes = parseList(values.n, 'n') ?? [spec.defaults.n ?? 100];
  const goSample = values['go-sample'] === undefined ? undefined : path.resolve(values['go-sample']);
  const concurrencies: (number | undefined)[] = parseList(values['max-concurrent-reconciles'], 'max-concurrent-reconciles') ?? [undefined];
  const options: BenchOptions = {
    n: Math.max(...sizes),
    m: num(values.m, 'm') ?? spec.defaults.m ?? 5,
    k: num(values.k, 'k') ?? spec.defaults.k ?? 30,
    runs: num(values.runs, 'runs') ?? 1,
    operatorCmd: values['operator-cmd'] ?? (goSample === undefined ? undefined : goSampleCommand(goSample)),
    companionCmd: values['companion-cmd'],
    workers: num(values.workers, 'workers'),
    settleS: num(values.settle, 'settle') ?? 20,
    floor: !values['no-floor'],
    goSample,
    periodS: num(values.period, 'period') ?? 10,
    fraction: num(values.fraction, 'fraction') ?? spec.defaults.fraction ?? 0.1,
    shards: num(values.shards, 'shards') ?? 3,
    timeoutS: num(values.timeout, 'timeout') ?? 900,
    memoryLimitMiB: num(values['memory-limit'], 'memory-limit'),
    devices: parseList(values.devices, 'devices'),
    windowS: num(values.window, 'window'),
    protocols: parseProtocols(values.protocols),
    latencyShare: parseShare(values['latency-share'], 'latency-share'),
    herd: parseList(values.herd, 'herd')?.[0],
    clients: parseList(values.clients, 'clients')?.[0],
    logins: parseList(values.logins, 'logins')?.[0],
    out: path.resolve(values.out ?? path.join(repoRoot, 'bench/results')),
  };

  const logDir = path.join(os.tmpdir(), 'iot-bench-logs');
  mkdirSync(logDir, { recursive: true });
  const base: Record<string, unknown> = { runs: options.runs, timeoutS: options.timeoutS };
  const variants = combinations(sizes, concurrencies);
  if (spec.runLocal) {
    const runLocal = spec.runLocal;
    return (await measure(name, spec, options, variants, base, NO_CLUSTER, (o) => runLocal({ options: o, logDir }))) > 0 ? 1 : 0;
  }
  const runOnCluster = spec.run;
  if (!runOnCluster) throw new Error(`scenario ${name} has nothing to run`);

  if (spec.sharder) process.env.CLUSTER_SHARDER = '1';
  if (spec.controlPlaneQps) {
    process.env.CLUSTER_CONTROLLER_MANAGER_QPS ??= String(spec.controlPlaneQps);
    process.env.CLUSTER_SCHEDULER_QPS ??= String(spec.controlPlaneQps);
  }
  const givenKubeconfig = values.kubeconfig ?? process.env.BENCH_KUBECONFIG;
  if (spec.needsKubeconfig && !givenKubeconfig) {
    console.error(spec.needsKubeconfig);
    return 2;
  }
  const kubeconfig = await ensureBenchCluster(givenKubeconfig, spec.pods(options));
  const client = await connect(kubeconfig);
  const capacity = await podCapacity(client);
  if (capacity < spec.pods(options)) {
    throw new Error(`the cluster has room for ${capacity} pods, the scenario needs ${spec.pods(options)}: CLUSTER_NAME=iot-bench CLUSTER_NODES=<more> node --import tsx cluster/cli/cluster.ts up`);
  }
  const ctx: BenchContext = { kubeconfig, client, clusterDir: clusterDirOf(kubeconfig), options, logDir, benchCluster: givenKubeconfig ? undefined : BENCH_CLUSTER };
  const k8s = await kubernetesVersion(client);
  await installIoTCrd(kubeconfig, client);

  if (options.operatorCmd) base.operatorCmd = options.operatorCmd;
  if (options.memoryLimitMiB !== undefined && spec.operator) base.operatorMemoryLimitMiB = options.memoryLimitMiB;
  // A cluster made with CLUSTER_CONTROLLER_MANAGER_QPS or CLUSTER_SCHEDULER_QPS: its results are kept apart from the default's.
  const controllerManagerQps = componentFlag(ctx.clusterDir, 'kube-controller-manager', 'kube-api-qps');
  if (controllerManagerQps !== undefined) base.controllerManagerQps = Number(controllerManagerQps);
  const schedulerQps = componentFlag(ctx.clusterDir, 'kube-scheduler', 'kube-api-qps');
  if (schedulerQps !== undefined) base.schedulerQps = Number(schedulerQps);
  if (spec.controlPlaneQps && (controllerManagerQps === undefined || schedulerQps === undefined)) {
    log(`${name}: the bench cluster was made without raised controller-manager and scheduler limits, which may pace this scenario; recreate it: CLUSTER_NAME=${BENCH_CLUSTER} node --import tsx cluster/cli/cluster.ts down`);
  }

  if (spec.bundle && !options.operatorCmd) log(`bundled ${path.relative(repoRoot, await bundleOperator(spec.bundle))}`);

  const failures = await measure(name, spec, options, variants, base, k8s, async (o) => {
    ctx.options = o;
    await removeLeftovers(ctx.client);
    return runOnCluster(ctx);
  });
  ctx.client.close();
  return failures > 0 ? 1 : 0;
}

/**
 * Runs the scenario `options.runs` times for each variant (size, concurrency), one result file
 * each, failed runs included; returns how many failed.
 */
async function measure(
  name: string,
  spec: ScenarioSpec,
  options: BenchOptions,
  variants: [number, number | undefined][],
  base: Record<string, unknown>,
  kubernetes: string,
  runOnce: (options: BenchOptions) => Promise<ScenarioOutput>,
): Promise<number> {
  let failures = 0;
  for (let run = 1; run <= options.runs; run++) {
    for (const [n, maxConcurrentReconciles] of variants) {
      const variant = { ...options, n, maxConcurrentReconciles };
      const recorded: Record<string, unknown> = { ...base };
      for (const key of spec.uses) if (variant[key] !== undefined) recorded[key] = variant[key];
      const git = gitInfo();
      const result: BenchResult = {
        scenario: name,
        startedAt: new Date().toISOString(),
        ok: false,
        options: { ...recorded, run },
        versions: { node: process.version, kubernetes, gitCommit: git.commit, gitDirty: git.dirty, operatorCommand: spec.operator ? (options.operatorCmd ?? spec.operator) : undefined },
        machine: machineInfo(),
        figures: {},
        samples: {},
      };
      log(`${name}: run ${run}/${options.runs} (${JSON.stringify(recorded)})`);
      try {
        const out = await runOnce(variant);
        result.ok = true;
        result.figures = out.figures;
        result.samples = out.samples;
        if (out.operatorCommand) result.versions.operatorCommand = out.operatorCommand;
      } catch (err) {
        failures++;
        result.error = err instanceof Error ? (err.stack ?? err.message) : String(err);
        log(`${name}: run ${run} failed: ${result.error}`);
      }
      result.finishedAt = new Date().toISOString();
      result.machine.loadavgEnd = os.loadavg().map((l) => Math.round(l * 100) / 100);
      const file = writeResult(options.out, result);
      console.log(`\n${name} run ${run}/${options.runs}${result.ok ? '' : ' (FAILED)'}`);
      console.log(formatTable(['figure', 'value'], flatten(result.figures)));
      console.log(`result: ${path.relative(process.cwd(), file)}\n`);
    }
  }
  return failures;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping operator processes`);
    for (const op of OperatorProcess.live) op.signal('SIGKILL');
    killStarted();
    process.exit(130);
  });
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    for (const op of OperatorProcess.live) op.signal('SIGKILL');
    killStarted();
    process.exit(1);
  },
);
