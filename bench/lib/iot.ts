/**
 * IoT landscapes for the benchmarks: the CRD, the operator process for a landscape, IoTService
 * objects, a watch-driven record of when each instance became Available, and tear-down.
 *
 * Guarantees:
 * - `AvailabilityTracker` records, from one watch on the landscape's IoTServices, the first
 *   time each instance is Available for (at least) the generation it is waiting for; times are
 *   monotonic milliseconds, as received by the benchmark.
 * - `teardownLandscape` deletes every IoTService while the operator still runs (its finalizer
 *   removes the instance namespaces), waits until they and every namespace of the landscape
 *   are gone, stops the operator and deletes the landscape namespace. If the operator cannot
 *   finish (crashed, hung), finalizers are stripped and namespaces deleted directly, so the next
 *   run starts clean either way.
 */
import { Kinds, RuntimeMetrics, customResource, type KubeClient, type KubeObject } from '@iot-operator/runtime';
import { TestEnv } from '@iot-operator/runtime/testing';
import { landscapeSelector } from '@iot-operator/iot';
import { installIoTCrd as installConvertedIoTCrd } from '@iot-operator/iot/testing';
import {
  deleteAllAndWait,
  deleteNamespaceAndWait,
  deleteNamespacesBySelector,
  log,
  mapLimit,
  now,
  sleep,
  stripFinalizers,
  watchObjects,
} from './kube.ts';
import { bundledOperatorCommand, OperatorProcess } from './operator.ts';
import { iotAvailable, type IoTLike } from './readiness.ts';

export const IoTServiceV1alpha1Type = customResource('cp.iotservices.io', 'v1alpha1', 'IoTService', 'iotservices');
export const IOT_CRD = 'operators/iot/deploy/crds/iotservices.cp.iotservices.io.yaml';
/** The operator as the image runs it: the bundle that `npm run build` (and the runner) writes. */
export const IOT_DEFAULT_COMMAND = bundledOperatorCommand('iot');
export const PODS_PER_INSTANCE = 7;
export const DEFAULT_VERSION = '2.4.1';

/** The IoTService CRD, converted by this benchmark process (as in the tests). */
export async function installIoTCrd(kubeconfig: string, client: KubeClient): Promise<void> {
  await installConvertedIoTCrd(new TestEnv(kubeconfig, client, new RuntimeMetrics()));
}

export function instanceName(i: number): string {
  return `iot-${String(i).padStart(4, '0')}`;
}

/** An IoTService of `version`; `spec` adds to (or overrides) the default spec. */
export function iotService(name: string, landscape: string, version = DEFAULT_VERSION, spec: Record<string, unknown> = {}): KubeObject {
  return { apiVersion: 'cp.iotservices.io/v1alpha1', kind: 'IoTService', metadata: { name, namespace: landscape }, spec: { version, ...spec } };
}

export interface IoTOperatorOptions {
  command: string;
  kubeconfig: string;
  landscape: string;
  workers?: number;
  logFile: string;
  memoryLimitMiB?: number;
}

export async function startIoTOperator(o: IoTOperatorOptions): Promise<OperatorProcess> {
  const command = o.workers ? `${o.command} --max-concurrent-reconciles ${o.workers}` : o.command;
  const op = await OperatorProcess.start({
    command,
    env: { KUBECONFIG: o.kubeconfig, OPERATOR_NAME: o.landscape, WATCH_NAMESPACE: '' },
    logFile: o.logFile,
    memoryLimitMiB: o.memoryLimitMiB,
  });
  return op;
}

/** Records when each IoTService of a landscape is Available for the generation it waits for. */
export class AvailabilityTracker {
  readonly availableAt = new Map<string, number>();
  /** name → generation the next Available must be for (set by `expect`). */
  private readonly waitingFor = new Map<string, number>();
  private readonly latest = new Map<string, IoTLike>();
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private listeners: (() => void)[] = [];
  /** Called with the name and time whenever an awaited instance becomes Available. */
  onAvailable: ((name: string, at: number) => void) | undefined;

  constructor(
    private readonly client: KubeClient,
    readonly landscape: string,
  ) {}

  async start(): Promise<void> {
    const { running } = await watchObjects(
      this.client,
      IoTServiceV1alpha1Type,
      { namespace: this.landscape },
      (type, obj, at) => {
        const name = obj.metadata.name!;
        if (type === 'DELETED') {
          this.latest.delete(name);
          return;
        }
        this.latest.set(name, obj as IoTLike);
        const generation = this.waitingFor.get(name);
        if (generation !== undefined && iotAvailable(obj as IoTLike, generation)) {
          this.waitingFor.delete(name);
          this.availableAt.set(name, at);
          this.onAvailable?.(name, at);
          for (const l of this.listeners) l();
        }
      },
      this.abort.signal,
    );
    this.running = running;
  }

  /** From now on, wait for `name` to be Available at `generation` or later (1 for a new object). */
  expect(name: string, generation = 1): void {
    this.availableAt.delete(name);
    const seen = this.latest.get(name);
    if (seen && iotAvailable(seen, generation)) {
      this.availableAt.set(name, now());
      return;
    }
    this.waitingFor.set(name, generation);
  }

  get pending(): number {
    return this.waitingFor.size;
  }

  /** Waits until nothing is pending; prints progress every `progressMs`. */
  async waitAll(label: string, total: number, startedAt: number, timeoutMs: number, progressMs = 2000): Promise<void> {
    const deadline = now() + timeoutMs;
    let lastPrint = now();
    while (this.waitingFor.size > 0) {
      if (now() > deadline) throw new Error(`${label}: ${this.waitingFor.size} of ${total} instances not Available after ${Math.round(timeoutMs / 1000)} s: ${[...this.waitingFor.keys()].slice(0, 5).join(', ')}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 250);
        this.listeners.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      this.listeners = [];
      if (now() - lastPrint >= progressMs) {
        lastPrint = now();
        log(`${label}: ${total - this.waitingFor.size}/${total} Available, ${((now() - startedAt) / 1000).toFixed(1)} s`);
      }
    }
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running?.catch(() => undefined);
  }
}

/** Creates IoTServices concurrently (`spec` added to the default); returns name → monotonic time its create request was sent. */
export async function createInstances(client: KubeClient, landscape: string, names: readonly string[], concurrency = names.length, spec: Record<string, unknown> = {}): Promise<Map<string, number>> {
  const sentAt = new Map<string, number>();
  await mapLimit(names, Math.max(1, concurrency), async (name) => {
    sentAt.set(name, now());
    await client.create(IoTServiceV1alpha1Type, iotService(name, landscape, DEFAULT_VERSION, spec));
  });
  return sentAt;
}

/** Deletes the landscape's instances through the operator, then everything else; leaves nothing behind. */
export async function teardownLandscape(client: KubeClient, landscape: string, operator: OperatorProcess | undefined, timeoutMs = 600_000): Promise<void> {
  const t0 = now();
  try {
    if (!operator?.running) throw new Error('operator not running');
    await deleteAllAndWait(client, IoTServiceV1alpha1Type, landscape, timeoutMs);
  } catch (err) {
    log(`tear-down through the operator did not finish (${err instanceof Error ? err.message : String(err)}); stripping finalizers`);
    await stripFinalizers(client, IoTServiceV1alpha1Type, landscape).catch(() => undefined);
    await deleteAllAndWait(client, IoTServiceV1alpha1Type, landscape, 60_000).catch(() => undefined);
  }
  await operator?.stop();
  await deleteNamespacesBySelector(client, landscapeSelector(landscape), timeoutMs);
  await deleteNamespaceAndWait(client, landscape);
  log(`landscape ${landscape} removed (${((now() - t0) / 1000).toFixed(0)} s)`);
}

/** Deletes every namespace a previous, interrupted benchmark left behind. */
export async function removeLeftovers(client: KubeClient): Promise<void> {
  const leftovers = await client.listAll(Kinds.Namespace, { labelSelector: 'iot-operator.bench/run=true' });
  if (leftovers.items.length === 0) return;
  log(`removing ${leftovers.items.length} landscape namespaces left by an earlier run`);
  for (const ns of leftovers.items) {
    const name = ns.metadata.name!;
    await stripFinalizers(client, IoTServiceV1alpha1Type, name).catch(() => undefined);
    await deleteNamespacesBySelector(client, `cp.iotservices.io/landscape=${name}`).catch((err: unknown) => log(String(err)));
  }
  await deleteNamespacesBySelector(client, 'iot-operator.bench/run=true');
  await sleep(1000);
}
