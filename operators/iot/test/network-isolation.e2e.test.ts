/**
 * Network isolation on the real cluster, as `kubectl get networkpolicy -o yaml` shows it (the
 * local cluster runs no network plugin, so the policies the API server accepted are what is
 * checked): pods accept traffic only from their own instance; device traffic reaches the gateway
 * only from the sources the spec names, and stops when they are removed; egress is denied except
 * to the instance itself, DNS in kube-system and declared destinations.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiError, Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { testEnv, waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { IoTServiceType } from '../src/controller.ts';
import type { NetworkPolicy } from '../src/resources/network-policies.ts';
import { createLandscape, deleteAllInstances, installIoTCrd, iotService, startOperator, waitForPhase } from './e2e-support.ts';

let env: TestEnv;
let landscape: string;
let mgr: Manager | undefined;

before(async () => {
  env = await testEnv();
  await installIoTCrd(env);
  landscape = await createLandscape(env);
  mgr = await startOperator(env, landscape);
});

after(async () => {
  if (mgr) {
    await deleteAllInstances(env, landscape).catch(() => undefined);
    await mgr.stop();
  }
  await env?.cleanup();
});

async function policies(namespace: string): Promise<Map<string, NetworkPolicy['spec']>> {
  const list = await env.client.list<NetworkPolicy & KubeObject>(Kinds.NetworkPolicy, { namespace });
  return new Map(list.items.map((p) => [p.metadata.name!, p.spec]));
}

const instanceSelector = (id: string) => ({ matchLabels: { 'app.kubernetes.io/managed-by': 'iot-operator', 'cp.iotservices.io/landscape': landscape, 'cp.iotservices.io/instance': id } });
const dnsRule = { to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] };

describe('network isolation', () => {
  it('by default: ingress only from the instance, no device traffic, egress only to the instance and DNS', async () => {
    await env.client.create(IoTServiceType, iotService('closed', landscape));
    await waitForPhase(env, landscape, 'closed', 'Available');
    const found = await policies(`${landscape}-closed`);
    assert.deepEqual([...found.keys()].sort(), ['gateway-devices', 'instance-egress', 'instance-isolation']);
    assert.deepEqual(found.get('instance-isolation'), { podSelector: instanceSelector('closed'), policyTypes: ['Ingress'], ingress: [{ from: [{ podSelector: instanceSelector('closed') }] }] });
    const devices = found.get('gateway-devices')!;
    assert.deepEqual(devices.policyTypes, ['Ingress']);
    assert.equal(devices.ingress, undefined, 'the gateway admits no device traffic');
    assert.deepEqual(found.get('instance-egress'), { podSelector: instanceSelector('closed'), policyTypes: ['Egress'], egress: [{ to: [{ podSelector: instanceSelector('closed') }] }, dnsRule] });
  });

  it('device sources and egress destinations open exactly what the spec names, and close again when removed', async () => {
    await env.client.create(IoTServiceType, iotService('open', landscape, { gateway: { deviceSources: ['203.0.113.0/24'] }, egress: [{ cidr: '198.51.100.0/24', ports: [443] }] }));
    await waitForPhase(env, landscape, 'open', 'Available');
    const namespace = `${landscape}-open`;
    const found = await policies(namespace);
    assert.deepEqual(found.get('gateway-devices')?.ingress, [
      {
        from: [{ ipBlock: { cidr: '203.0.113.0/24' } }],
        ports: [
          { protocol: 'TCP', port: 1883 },
          { protocol: 'TCP', port: 8080 },
        ],
      },
    ]);
    assert.deepEqual(found.get('instance-egress')?.egress?.slice(1), [dnsRule, { to: [{ ipBlock: { cidr: '198.51.100.0/24' } }], ports: [{ protocol: 'TCP', port: 443 }] }]);

    await env.client.patch(IoTServiceType, 'open', landscape, { spec: { gateway: { deviceSources: null }, egress: null } }, 'merge');
    await waitFor('the gateway to admit no device traffic and egress to be DNS and the instance only', async () => {
      const now = await policies(namespace);
      return { done: now.get('gateway-devices')?.ingress === undefined && now.get('instance-egress')?.egress?.length === 2, value: undefined, seen: Object.fromEntries(now) };
    });
  });

  it('a device source or egress destination that is not a CIDR is rejected by the API server', async () => {
    for (const spec of [{ gateway: { deviceSources: ['0.0.0.0'] } }, { egress: [{ cidr: 'example.com/24' }] }]) {
      await assert.rejects(env.client.create(IoTServiceType, iotService('bad-cidr', landscape, spec)), (err: unknown) => {
        assert.ok(err instanceof ApiError && err.reason === 'Invalid', JSON.stringify(spec));
        assert.match(err.message, /must be a CIDR/);
        return true;
      });
    }
  });
});
