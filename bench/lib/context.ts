/**
 * What every scenario receives: the bench cluster's client and kubeconfig, where its component
 * pid files live, the options of this invocation and where to put operator logs; a scenario that
 * needs no cluster (fleet) receives only the options and the log directory.
 *
 * Guarantees: options are plain data (they are written verbatim into the result file); every
 * scenario returns its figures and raw samples and never writes files itself.
 */
import type { KubeClient } from '@iot-operator/runtime';

export interface BenchOptions {
  /** Instances (IoTServices or Memcacheds). */
  n: number;
  /** Minutes (steady: idle time; churn: duration of changes). */
  m: number;
  /** Sequential instances (latency, floor). */
  k: number;
  runs: number;
  /** Operator command; undefined = the scenario's default operator. */
  operatorCmd?: string;
  /** IoT scenarios: a second process started beside the operator, with its environment, and measured over the same burst. */
  companionCmd?: string;
  /** --max-concurrent-reconciles for the IoT operator; undefined = the operator's default. */
  workers?: number;
  /** throughput: --max-concurrent-reconciles for the Memcached operator; undefined = the operator's default. */
  maxConcurrentReconciles?: number;
  /** throughput: idle seconds before the RSS-at-idle sample (0 = no memory figure). */
  settleS: number;
  /** Also measure the operator-free floor in the same run (burst, latency). */
  floor: boolean;
  /** memcached: a checkout of operator-sdk's Go Memcached sample to run instead of our operator (scenarios/memcached.ts). */
  goSample?: string;
  /** churn: seconds between rounds of spec changes, and the fraction of instances changed per round. */
  periodS: number;
  fraction: number;
  /** Run the operator in a memory cgroup of this many MiB, as a Pod memory limit does; undefined = no limit. */
  memoryLimitMiB?: number;
  /** sharded: replicas of the IoT operator, each one shard of the ring. */
  shards: number;
  /** reference: devices per throughput step, in order (default 1,4,16,64; then ×4 while the rate grows); fleet: its first value, the publishing devices (default 50). */
  devices?: number[];
  /** reference: seconds of each throughput step's measuring window (default 30); fleet: of each protocol's two windows (default 15). */
  windowS?: number;
  /** reference: protocols measured, in order (default mqtt,http). */
  protocols?: string[];
  /** reference: the latency step's rate as a share of the highest stored rate of a protocol's steps (default 0.8). */
  latencyShare?: number;
  /** fleet: devices of the reconnect herd (default 10,000). */
  herd?: number;
  /** fleet: processes the devices are spread over (default 2). */
  clients?: number;
  /** fleet: devices per login measurement (default 200). */
  logins?: number;
  /** Give up waiting after this many seconds. */
  timeoutS: number;
  out: string;
}

/** What a scenario that needs no cluster receives. */
export interface LocalContext {
  options: BenchOptions;
  /** Directory for the logs of the processes it starts (outside the repository). */
  logDir: string;
}

export interface BenchContext extends LocalContext {
  kubeconfig: string;
  /** The cluster's client; a scenario that recreates the bench cluster replaces it (lib/recreate.ts). */
  client: KubeClient;
  /** The runner's own cluster (`iot-bench`, made by cluster up); undefined with --kubeconfig / BENCH_KUBECONFIG. */
  benchCluster?: string;
  clusterDir: string;
}

export interface ScenarioOutput {
  figures: Record<string, unknown>;
  samples: Record<string, number[]>;
  /** The operator command actually measured, for the result's versions. */
  operatorCommand?: string;
}

export type Scenario = (ctx: BenchContext) => Promise<ScenarioOutput>;
export type LocalScenario = (ctx: LocalContext) => Promise<ScenarioOutput>;
