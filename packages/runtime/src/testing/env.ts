/**
 * The end-to-end test environment on a real cluster: the one the environment names.
 *
 * Guarantees:
 * - `testEnv()` connects to the cluster of `KUBECONFIG` once per test process when
 *   `IOT_TEST_USE_KUBECONFIG=1` asks for it (`operator-ts cluster exec` sets both, for the local
 *   cluster it starts or reuses); every call returns the same env. Without them it fails saying to
 *   run the tests through `operator-ts cluster exec`, so a cluster that merely happens to be in
 *   KUBECONFIG is never written to by tests.
 * - `TestEnv.connect(kubeconfigPath)` is an env of its own on the cluster of that kubeconfig.
 * - `namespace()` creates a fresh namespace with a unique name per call and deletes it in
 *   `cleanup()` (call it from the suite's `after`).
 * - `installCrd` applies a CRD and waits until it is Established.
 * - `operatorOptions(namespace)` runs an operator in the test process against this cluster,
 *   watching `namespace`, its HTTP server on a free port, logging at $LOG_LEVEL (default warn).
 * - `waitFor` polls until a condition holds and, on timeout, fails with a message saying what
 *   was expected and what was last seen.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { pino } from 'pino';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { KubeClient } from '../client/client.ts';
import { isNotFound } from '../client/errors.ts';
import { Kinds, type KubeObject } from '../client/resource.ts';
import type { OperatorProcessOptions } from '../manager/operator-process.ts';
import { RuntimeMetrics } from '../metrics/runtime-metrics.ts';

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
}

export class TestEnv {
  private readonly namespaces = new Set<string>();

  constructor(
    readonly kubeconfigPath: string,
    readonly client: KubeClient,
    readonly metrics: RuntimeMetrics,
  ) {}

  /** An env on the cluster of the kubeconfig at `kubeconfigPath`, with a client and metrics of its own. */
  static async connect(kubeconfigPath: string): Promise<TestEnv> {
    const metrics = new RuntimeMetrics();
    const client = await KubeClient.fromKubeconfig({ kubeconfigPath, metrics });
    return new TestEnv(kubeconfigPath, client, metrics);
  }

  /** Creates a namespace with a unique name starting with `prefix`; removed in cleanup(). */
  async namespace(prefix = 'test', labels: Record<string, string> = {}): Promise<string> {
    const name = `${prefix}-${randomBytes(3).toString('hex')}`.slice(0, 63);
    await this.client.create(Kinds.Namespace, { metadata: { name, labels: { 'iot-operator.test/e2e': 'true', ...labels } } });
    this.namespaces.add(name);
    return name;
  }

  /** Options for an operator run in this process against the test cluster, watching `namespace`. */
  operatorOptions(namespace: string): OperatorProcessOptions {
    return { kubeconfigPath: this.kubeconfigPath, watchNamespace: namespace, httpAddress: '127.0.0.1:0', logger: pino({ level: process.env.LOG_LEVEL ?? 'warn' }) };
  }

  /** Deletes the namespaces this env created (without waiting for them to disappear). */
  async cleanup(): Promise<void> {
    await Promise.all([...this.namespaces].map((name) => this.client.delete(Kinds.Namespace, name).catch(() => undefined)));
    this.namespaces.clear();
  }

  /** Applies a CRD (object or YAML file) with server-side apply and waits until it is Established. */
  async installCrd(crd: KubeObject | string, options: WaitOptions = {}): Promise<KubeObject> {
    const object = typeof crd === 'string' ? (parseYaml(await readFile(crd, 'utf8')) as KubeObject) : crd;
    await this.client.apply(Kinds.CustomResourceDefinition, object, { fieldManager: 'iot-operator-tests', force: true });
    const name = object.metadata.name!;
    return this.waitFor(
      `CRD ${name} to be Established`,
      async () => {
        const current = await this.client.get(Kinds.CustomResourceDefinition, name);
        const established = (current.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
        return { done: !!established, value: current, seen: current.status };
      },
      options,
    );
  }

  async uninstallCrd(name: string): Promise<void> {
    await this.client.delete(Kinds.CustomResourceDefinition, name).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    });
  }

  /** Polls `check` until it reports done; fails with what was expected and last seen. */
  async waitFor<T>(expected: string, check: () => Promise<{ done: boolean; value: T; seen?: unknown }>, options: WaitOptions = {}): Promise<T> {
    return waitFor(expected, check, options);
  }

  /** Reads a multi-document YAML file into objects. */
  static async readManifests(file: string): Promise<KubeObject[]> {
    const docs = parseAllDocuments(await readFile(file, 'utf8'));
    return docs.map((d) => d.toJSON() as KubeObject).filter((o) => o && typeof o === 'object');
  }
}

export async function waitFor<T>(expected: string, check: () => Promise<{ done: boolean; value: T; seen?: unknown }>, options: WaitOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const intervalMs = options.intervalMs ?? 250;
  const deadline = Date.now() + timeoutMs;
  let lastSeen: unknown = 'nothing yet';
  for (;;) {
    try {
      const result = await check();
      if (result.done) return result.value;
      lastSeen = result.seen ?? result.value;
    } catch (err) {
      lastSeen = err instanceof Error ? `${err.name}: ${err.message}` : err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${expected}; last seen: ${JSON.stringify(lastSeen, null, 1)?.slice(0, 2000)}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The kubeconfig the environment names for tests, or an error saying how to name one. */
function testKubeconfig(): string {
  if (process.env.IOT_TEST_USE_KUBECONFIG === '1' && process.env.KUBECONFIG) return process.env.KUBECONFIG;
  throw new Error('no cluster is named for the tests: run them through `operator-ts cluster exec -- <command>` (the local cluster), or set KUBECONFIG and IOT_TEST_USE_KUBECONFIG=1');
}

let shared: Promise<TestEnv> | undefined;

/** The process-wide test environment on the cluster the environment names. */
export function testEnv(): Promise<TestEnv> {
  shared ??= (async () => TestEnv.connect(testKubeconfig()))();
  return shared;
}
