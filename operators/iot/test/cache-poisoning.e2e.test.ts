/**
 * Cache poisoning on the real cluster: someone who may only create ConfigMaps in a namespace of
 * their own gives 300 ConfigMaps of 900 KiB each the operator's labels. The operator (run as its
 * own process, as in its Pod) holds none of that data: its resident memory stays within 10 MiB
 * of what it was, and every instance stays managed (drift is repaired, a new instance comes up).
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type OperatorProcess, type TestEnv } from '@iot-operator/runtime/testing';
import { getOrUndefined, iotService, iotTestLandscape, spawnOperator, stopOperator, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

const PLANTED = 300;
const PLANTED_BYTES = 900 * 1024;
/**
 * A quarter of what is planted (263 MiB): a cache that took the planted objects in would grow by all
 * of it, while two readings of an idle operator on a busy 2-core machine differ by up to 20 MiB.
 */
const RSS_ALLOWANCE_MIB = 64;

let env: TestEnv;
let landscape: string;
let operator: OperatorProcess | undefined;

before(async () => ({ env, landscape } = await iotTestLandscape()));

after(async () => {
  await stopOperator(env, landscape, operator);
  await env?.cleanup();
});

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]);
  assert.ok(kib > 0, `VmRSS of process ${pid}`);
  return kib / 1024;
}

/** The process's resident memory once it has settled: the median of five readings a second apart. */
async function settledRssMiB(pid: number): Promise<number> {
  const readings: number[] = [];
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    readings.push(await rssMiB(pid));
  }
  return readings.sort((a, b) => a - b)[2]!;
}

describe('cache poisoning', () => {
  it(`${PLANTED} labelled ConfigMaps of ${PLANTED_BYTES / 1024} KiB elsewhere leave the operator's memory within ${RSS_ALLOWANCE_MIB} MiB and every instance managed`, async (t) => {
    operator = spawnOperator(env, landscape);
    await waitFor('the operator to start', async () => ({ done: /controller started/.test(operator!.output()), value: undefined, seen: operator!.output().slice(-500) }));
    for (const name of ['kept-a', 'kept-b']) await env.client.create(IoTServiceV1alpha1Type, iotService(name, landscape));
    for (const name of ['kept-a', 'kept-b']) await waitForPhase(env, landscape, name, 'Available');
    const before = await settledRssMiB(operator.pid!);

    const attacker = await env.namespace('attacker');
    const labels = { 'app.kubernetes.io/managed-by': 'iot-operator', 'cp.iotservices.io/landscape': landscape, 'cp.iotservices.io/instance': 'kept-a' };
    const payload = 'x'.repeat(PLANTED_BYTES);
    const names = Array.from({ length: PLANTED }, (_, i) => `planted-${i}`);
    for (let i = 0; i < names.length; i += 10) {
      await Promise.all(names.slice(i, i + 10).map((name) => env.client.create(Kinds.ConfigMap, { metadata: { name, namespace: attacker, labels }, data: { payload } })));
    }
    const planted = await env.client.list(Kinds.ConfigMap, { namespace: attacker, labelSelector: 'cp.iotservices.io/instance=kept-a', limit: 1 });
    assert.ok(planted.metadata.continue || planted.items.length === 1, 'the planted ConfigMaps exist');
    const afterAttack = await settledRssMiB(operator.pid!);
    t.diagnostic(`operator RSS ${before.toFixed(1)} MiB before, ${afterAttack.toFixed(1)} MiB after ${PLANTED} planted ConfigMaps`);
    assert.ok(afterAttack - before <= RSS_ALLOWANCE_MIB, `resident memory grew by ${(afterAttack - before).toFixed(1)} MiB (from ${before.toFixed(1)} to ${afterAttack.toFixed(1)} MiB); at most ${RSS_ALLOWANCE_MIB} MiB allowed`);

    // Still managing: drift is repaired, a new instance comes up, the instances stay Available.
    await env.client.delete(Kinds.Deployment, 'core', `${landscape}-kept-a`);
    await env.client.patch(Kinds.ConfigMap, 'iot-config', `${landscape}-kept-b`, { data: { 'config.yml': 'edited by hand' } }, 'merge');
    await env.client.create(IoTServiceV1alpha1Type, iotService('new-c', landscape));
    await waitForPhase(env, landscape, 'new-c', 'Available');
    await waitFor('the deleted Deployment and the edited ConfigMap to be restored', async () => {
      const core = await getOrUndefined(env, Kinds.Deployment, 'core', `${landscape}-kept-a`);
      const config = await getOrUndefined<KubeObject & { data?: Record<string, string> }>(env, Kinds.ConfigMap, 'iot-config', `${landscape}-kept-b`);
      const restored = !!core && (config?.data?.['config.yml'] ?? '').includes('"instance": "kept-b"');
      return { done: restored, value: undefined, seen: { core: !!core, config: config?.data?.['config.yml']?.slice(0, 80) } };
    });
    for (const name of ['kept-a', 'kept-b']) await waitForPhase(env, landscape, name, 'Available');
  });
});
