/**
 * The reference IoT service on the real node: an IoTService with the reference images
 * (workloads/iot-service, built and pushed to the cluster's registry by `npm run
 * image:iot-service`), every component placed on the real node, the landscape's
 * image-pull-secret holding the registry's credentials, goes Available with running pods; then a
 * device simulated on this machine registers through core, publishes M messages over MQTT and M
 * over HTTP to the gateway and reads all 2M back from core; a wrong device password is refused on
 * both protocols, a publish to another device's topic is refused, and a wrong API token gets
 * 401. The simulator dials only the instance's pod IPs.
 * The gateway admits this machine as a user admits devices: the node's address on the pod bridge
 * in `spec.gateway.deviceSources`; core, which admits only its instance, is reached from that same
 * address, which kube-router lets reach every pod of its node (as it does the kubelet's probes).
 * Reported as not run where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, REAL_NODE_NAME, realNode } from '@iot-operator/local-cluster';
import { HttpStatusError, postHttp, publishMqtt, readTelemetry, registerDevice, simulateDevice } from '@iot-operator/iot-service/simulator';
import { COMPONENTS } from '../src/api/iotservice.ts';
import { deviceAddresses, iotService, realNodeSpec, startReferenceLandscape, stopServedLandscape, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const VERSION = '2.4.1';
const MESSAGES = 20;

let landscape = '';
let mgr: Manager | undefined;

describe('the reference IoT service on the real node', { skip }, () => {
  before(async () => {
    ({ landscape, mgr } = await startReferenceLandscape(env, VERSION));
  });

  after(() => stopServedLandscape({ env, landscape, mgr }));

  it('goes Available; a device’s 2M messages over MQTT and HTTP are read back from core; wrong credentials are refused', async () => {
    const applied = Date.now();
    await env.client.create(IoTServiceV1alpha1Type, iotService('plant', landscape, realNodeSpec({ gateway: { protocols: ['mqtt', 'http'] } })));
    const available = await waitForPhase(env, landscape, 'plant', 'Available', 300_000);
    const availableMs = Date.now() - applied;
    const namespace = `${landscape}-plant`;
    const { items: pods } = await env.client.list<KubeObject & { spec: { nodeName?: string }; status?: { phase?: string } }>(Kinds.Pod, { namespace });
    assert.equal(pods.length, COMPONENTS.length, 'one pod per component');
    for (const pod of pods) assert.deepEqual([pod.spec.nodeName, pod.status?.phase], [REAL_NODE_NAME, 'Running'], `${pod.metadata.name} runs on the real node`);
    assert.deepEqual(available.status?.pods, pods.map((p) => p.metadata.name).sort(), 'status.pods names the running pods');

    const addresses = await deviceAddresses(env, namespace);
    const report = await simulateDevice(addresses, { messages: MESSAGES, timeoutMs: 60_000 });
    console.log(`reference service: apply → Available ${availableMs} ms; ${report.sent.total} sent, ${report.stored} stored in ${report.elapsedMs} ms`);
    assert.deepEqual(report.sent, { mqtt: MESSAGES, http: MESSAGES, total: 2 * MESSAGES });
    assert.equal(report.stored, 2 * MESSAGES);

    const device = await registerDevice(addresses, `wrong-${Date.now()}`);
    const wrong = { id: device.id, password: `${device.password}x` };
    await assert.rejects(publishMqtt(addresses.gatewayMqttUrl, wrong, [{ n: 1 }]), 'MQTT with a wrong password is refused');
    await assert.rejects(postHttp(addresses.gatewayHttpUrl, wrong, { n: 1 }), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
    await assert.rejects(readTelemetry({ ...addresses, apiToken: 'wrong' }, device.id, 1), (e: unknown) => e instanceof HttpStatusError && e.status === 401);
    assert.deepEqual(await readTelemetry(addresses, device.id, 10), [], 'nothing of the refused device stored');

    await assert.rejects(publishMqtt(addresses.gatewayMqttUrl, device, [{ n: 1 }], `telemetry/${report.deviceId}`), /closed the connection/, "a publish to another device's topic is refused");
    assert.equal((await readTelemetry(addresses, report.deviceId, 1000)).length, 2 * MESSAGES, "nothing added to the other device's telemetry");
  });
});
