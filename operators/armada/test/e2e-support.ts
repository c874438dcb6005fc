/**
 * Shared pieces of the Armada end-to-end tests: the helm binary (built from Go modules by
 * cluster/engines/build.sh helm on a fresh machine, cached afterwards), the CRDs, an operator in the
 * test process, ArmadaChart objects on the project's test chart (also packaged, for a loopback
 * server of the test to serve), Helm's own view of releases
 * (`helm list`, `helm history`) and waits on the objects' status.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { ifFound, type Manager, type ResourceType } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { ArmadaChart, type ArmadaChartObject, type ChartSpec, type CommonStatus } from '../src/api/armada.ts';
import { CRD_FILES } from '../src/api/crd.ts';
import type { HelmRevision } from '../src/helm/helm.ts';
import { createArmadaOperator, type ArmadaOperatorOptions } from '../src/operator.ts';

const run = promisify(execFile);

export const TESTCHART = path.join(repoRoot, 'operators/armada/helm-charts/testchart');
export const FIXTURES = path.join(repoRoot, 'operators/armada/test/fixtures');

let helmPath: Promise<string> | undefined;

/** The project's helm (built on first use, about 2 minutes on a cold Go cache). */
export function helmBinary(): Promise<string> {
  helmPath ??= run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000, maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => stdout.trim().split('\n').at(-1)!);
  return helmPath;
}

export async function installArmadaCrds(env: TestEnv): Promise<void> {
  for (const file of Object.values(CRD_FILES)) await env.installCrd(path.join(repoRoot, 'operators/armada', file));
}

/** The shared TestEnv with the Armada CRDs installed: where an Armada e2e suite starts. */
export async function armadaTestEnv(): Promise<TestEnv> {
  const env = await localTestEnv();
  await installArmadaCrds(env);
  return env;
}

/** The operator in this process with the project's helm, watching `namespace` ('' for every namespace), `overrides` on top. */
export async function startOperator(env: TestEnv, namespace: string, overrides: Partial<ArmadaOperatorOptions> = {}): Promise<Manager> {
  const mgr = await createArmadaOperator({ ...env.operatorOptions(namespace), helmBinary: await helmBinary(), ...overrides });
  await mgr.start();
  return mgr;
}

/** A namespace on `armadaTestEnv()` and the operator watching it in this process. */
export interface ServedNamespace {
  env: TestEnv;
  ns: string;
  mgr: Manager;
}

/**
 * A fresh namespace (`prefix`-…) on `armadaTestEnv()`, watched by the operator in this process.
 * Should the operator not start, the env's namespaces are deleted before the error is passed on:
 * nothing is left for a caller that got nothing. `stopServedNamespace` undoes it.
 */
export async function startServedNamespace(prefix: string): Promise<ServedNamespace> {
  const env = await armadaTestEnv();
  const ns = await env.namespace(prefix);
  try {
    return { env, ns, mgr: await startOperator(env, ns) };
  } catch (err) {
    await env.cleanup();
    throw err;
  }
}

/**
 * The operator stopped, the finalizers of the ArmadaCharts left in `ns` removed (no operator
 * uninstalls them now: the namespace's deletion takes their releases' objects), then the env's
 * namespaces deleted; parts never started are passed over.
 */
export async function stopServedNamespace({ env, ns, mgr }: Partial<ServedNamespace>): Promise<void> {
  await mgr?.stop();
  if (env && ns) await abandonCharts(env, ns);
  await env?.cleanup();
}

/** Removes the finalizers of every ArmadaChart in `ns`, so that deleting the namespace ends without an operator. */
export async function abandonCharts(env: TestEnv, ns: string): Promise<void> {
  const { items } = await env.client.list<ArmadaChartObject>(ArmadaChart, { namespace: ns }).catch(() => ({ items: [] as ArmadaChartObject[] }));
  await Promise.all(items.map((chart) => env.client.patch(ArmadaChart, chart.metadata.name!, ns, { metadata: { finalizers: null } }).catch(() => undefined)));
}

let kubectlPath: Promise<string> | undefined;

/** Runs the project's kubectl (cluster/engines/build.sh control-plane) against the test cluster; returns stdout. */
export async function kubectl(env: TestEnv, ...args: string[]): Promise<string> {
  kubectlPath ??= run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'], { timeout: 900_000, maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => path.join(stdout.trim().split('\n').at(-1)!, 'kubectl'));
  const { stdout } = await run(await kubectlPath, ['--kubeconfig', env.kubeconfigPath, ...args], { timeout: 180_000 });
  return stdout;
}

/** Runs helm against the test cluster; returns stdout. */
export async function helm(env: TestEnv, ...args: string[]): Promise<string> {
  const { stdout } = await run(await helmBinary(), [...args, '--kubeconfig', env.kubeconfigPath], { timeout: 120_000 });
  return stdout;
}

/** The project's test chart packaged by `helm package` into `dir`: the archive's bytes (testchart-0.1.0.tgz). */
export async function packageTestChart(env: TestEnv, dir: string): Promise<Buffer> {
  await helm(env, 'package', TESTCHART, '--destination', dir);
  return readFileSync(path.join(dir, 'testchart-0.1.0.tgz'));
}

/** Starts `server` on a free port of 127.0.0.1 (a chart source only the test serves); its base URL. */
export async function listenOnLoopback(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export interface ListedRelease {
  name: string;
  namespace: string;
  revision: string;
  status: string;
  chart: string;
  updated: string;
}

/** `helm list -a` of a namespace: every release, whatever its state. */
export async function helmList(env: TestEnv, namespace: string): Promise<ListedRelease[]> {
  return JSON.parse(await helm(env, 'list', '--all', '--namespace', namespace, '--output', 'json')) as ListedRelease[];
}

export async function helmHistory(env: TestEnv, namespace: string, release: string): Promise<HelmRevision[]> {
  return JSON.parse(await helm(env, 'history', release, '--namespace', namespace, '--output', 'json')) as HelmRevision[];
}

/** An ArmadaChart of the test chart from the operator's filesystem. */
export function testChart(name: string, namespace: string, spec: Partial<ChartSpec> = {}): ArmadaChartObject {
  return {
    apiVersion: 'armada.airshipit.org/v1alpha1',
    kind: 'ArmadaChart',
    metadata: { name, namespace },
    spec: {
      chart_name: name,
      release: name,
      source: { type: 'local', location: TESTCHART, subpath: '.', reference: 'master' },
      values: {},
      target_state: 'deployed',
      wait: { timeout: 120 },
      ...spec,
    },
  };
}

export function getOrUndefined<T extends { metadata: object }>(env: TestEnv, type: ResourceType, name: string, namespace?: string): Promise<T | undefined> {
  return ifFound(env.client.get<T & { metadata: Record<string, unknown> }>(type, name, namespace));
}

/** Waits until the object's status, for its current generation, satisfies `check`. */
export async function waitForStatus<T extends { metadata: { generation?: number }; status?: CommonStatus }>(
  env: TestEnv,
  type: ResourceType,
  namespace: string,
  name: string,
  what: string,
  check: (status: NonNullable<T['status']>, obj: T) => boolean,
  timeoutMs = 120_000,
): Promise<T> {
  return env.waitFor(
    `${type.kind} ${name}: ${what}`,
    async () => {
      const obj = await env.client.get<T & { metadata: Record<string, unknown> }>(type, name, namespace);
      const status = obj.status;
      const done = !!status && status.observedGeneration === obj.metadata.generation && check(status as NonNullable<T['status']>, obj);
      return { done, value: obj, seen: status };
    },
    { timeoutMs, intervalMs: 250 },
  );
}

export function waitForChartState(env: TestEnv, namespace: string, name: string, state: string, timeoutMs?: number): Promise<ArmadaChartObject> {
  return waitForStatus<ArmadaChartObject>(env, ArmadaChart, namespace, name, `actual_state ${state}`, (s) => s.actual_state === state, timeoutMs);
}

/** Deletes every ArmadaChart of the namespace and waits until they (and so their releases) are gone. */
export async function deleteCharts(env: TestEnv, namespace: string): Promise<void> {
  const charts = await env.client.list<ArmadaChartObject>(ArmadaChart, { namespace });
  await Promise.all(charts.items.map((c) => env.client.delete(ArmadaChart, c.metadata.name!, namespace).catch(() => undefined)));
  await env.waitFor('every ArmadaChart to be gone', async () => {
    const left = await env.client.list(ArmadaChart, { namespace });
    return { done: left.items.length === 0, value: undefined, seen: left.items.map((c) => c.metadata.name) };
  }, { timeoutMs: 120_000 });
}

/** Events recorded on an object, as `kubectl describe` lists them. */
export async function eventsOf(env: TestEnv, namespace: string, name: string): Promise<Array<{ type: string; reason: string; message: string }>> {
  const list = await env.client.list<{ metadata: Record<string, unknown>; involvedObject: { name: string }; type: string; reason: string; message: string }>(
    { group: '', version: 'v1', kind: 'Event', plural: 'events', namespaced: true },
    { namespace, fieldSelector: `involvedObject.name=${name}` },
  );
  return list.items.map((e) => ({ type: e.type, reason: e.reason, message: e.message }));
}
