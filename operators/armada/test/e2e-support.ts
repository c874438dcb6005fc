/**
 * Shared pieces of the Armada end-to-end tests: the helm binary (built from Go modules by
 * cluster/build-helm.sh on a fresh machine, cached afterwards), the CRDs, an operator in the
 * test process, ArmadaChart objects on the project's test chart, Helm's own view of releases
 * (`helm list`, `helm history`) and waits on the objects' status.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { isNotFound, type Manager, type ResourceType } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { repoRoot } from '@iot-operator/local-cluster';
import { ArmadaChart, type ArmadaChartObject, type ChartSpec, type CommonStatus } from '../src/api/armada.ts';
import { CRD_FILES } from '../src/api/crd.ts';
import type { HelmRevision } from '../src/helm/helm.ts';
import { createArmadaOperator } from '../src/operator.ts';

const run = promisify(execFile);

export const TESTCHART = path.join(repoRoot, 'operators/armada/helm-charts/testchart');
export const FIXTURES = path.join(repoRoot, 'operators/armada/test/fixtures');

let helmPath: Promise<string> | undefined;

/** The project's helm (built on first use, about 2 minutes on a cold Go cache). */
export function helmBinary(): Promise<string> {
  helmPath ??= run('bash', [path.join(repoRoot, 'cluster/build-helm.sh')], { timeout: 900_000, maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => stdout.trim().split('\n').at(-1)!);
  return helmPath;
}

export async function installArmadaCrds(env: TestEnv): Promise<void> {
  for (const file of Object.values(CRD_FILES)) await env.installCrd(path.join(repoRoot, 'operators/armada', file));
}

export async function startOperator(env: TestEnv, namespace: string): Promise<Manager> {
  const mgr = await createArmadaOperator({ ...env.operatorOptions(namespace), helmBinary: await helmBinary() });
  await mgr.start();
  return mgr;
}

let kubectlPath: Promise<string> | undefined;

/** Runs the project's kubectl (cluster/build.sh) against the test cluster; returns stdout. */
export async function kubectl(env: TestEnv, ...args: string[]): Promise<string> {
  kubectlPath ??= run('bash', [path.join(repoRoot, 'cluster/build.sh')], { timeout: 900_000, maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => path.join(stdout.trim().split('\n').at(-1)!, 'kubectl'));
  const { stdout } = await run(await kubectlPath, ['--kubeconfig', env.kubeconfigPath, ...args], { timeout: 180_000 });
  return stdout;
}

/** Runs helm against the test cluster; returns stdout. */
export async function helm(env: TestEnv, ...args: string[]): Promise<string> {
  const { stdout } = await run(await helmBinary(), [...args, '--kubeconfig', env.kubeconfigPath], { timeout: 120_000 });
  return stdout;
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

export async function getOrUndefined<T extends { metadata: object }>(env: TestEnv, type: ResourceType, name: string, namespace?: string): Promise<T | undefined> {
  try {
    return await env.client.get<T & { metadata: Record<string, unknown> }>(type, name, namespace);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
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
