/**
 * The seed's contract on the real cluster, through the `iot-operator` command: config.yml is
 * mounted at /etc/sap/config.yml in every pod (another path with `--config-mount-path`), and the
 * seed's `operator-sdk up local --namespace=` maps to `--namespace`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Deployment, V1StatefulSet } from '@kubernetes/client-node';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type OperatorProcess, type TestEnv } from '@iot-operator/runtime/testing';
import { createLandscape, iotService, iotTestEnv, spawnOperator, stopOperator, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

let env: TestEnv;
const running: Array<{ operator: OperatorProcess; landscape: string }> = [];

before(async () => (env = await iotTestEnv()));

after(async () => {
  for (const { operator, landscape } of running) await stopOperator(env, landscape, operator);
  await env?.cleanup();
});

async function landscapeWithOperator(args: string[]): Promise<string> {
  const landscape = await createLandscape(env);
  const operator = spawnOperator(env, landscape, args);
  running.push({ operator, landscape });
  await waitFor('the operator to start', async () => ({ done: /controller started/.test(operator.output()), value: undefined, seen: operator.output().slice(-500) }));
  return landscape;
}

/** The config mount path and IOT_CONFIG_FILE of every workload of an instance. */
async function configPaths(namespace: string): Promise<string[]> {
  const workloads = [
    ...(await env.client.list<V1Deployment & KubeObject>(Kinds.Deployment, { namespace })).items,
    ...(await env.client.list<V1StatefulSet & KubeObject>(Kinds.StatefulSet, { namespace })).items,
  ];
  assert.equal(workloads.length, 5);
  return [...new Set(workloads.flatMap((w) => {
    const container = w.spec!.template.spec!.containers[0]!;
    return [container.volumeMounts!.find((m) => m.name === 'config')!.mountPath, container.env!.find((e) => e.name === 'IOT_CONFIG_FILE')!.value!];
  }))];
}

describe('seed fidelity', () => {
  it('config.yml is mounted at /etc/sap/config.yml in every pod', async () => {
    const landscape = await landscapeWithOperator([]);
    await env.client.create(IoTServiceV1alpha1Type, iotService('sap', landscape));
    await waitForPhase(env, landscape, 'sap', 'Available');
    assert.deepEqual(await configPaths(`${landscape}-sap`), ['/etc/sap/config.yml']);
  });

  it('--config-mount-path mounts it elsewhere', async () => {
    const landscape = await landscapeWithOperator(['--config-mount-path=/srv/iot/config.yml']);
    await env.client.create(IoTServiceV1alpha1Type, iotService('moved', landscape));
    await waitForPhase(env, landscape, 'moved', 'Available');
    assert.deepEqual(await configPaths(`${landscape}-moved`), ['/srv/iot/config.yml']);
  });

  it('--namespace limits the watches like WATCH_NAMESPACE (the seed’s `up local --namespace=`)', async () => {
    const landscape = await landscapeWithOperator(['--namespace=elsewhere']);
    await env.client.create(IoTServiceV1alpha1Type, iotService('scoped', landscape));
    const iot = await waitForPhase(env, landscape, 'scoped', 'Failed');
    assert.match(iot.status?.reason ?? '', /WATCH_NAMESPACE=elsewhere limits the operator to that namespace/);
  });
});
