/**
 * What an IoTService author can ask for, on the real cluster: images only from allowed
 * registries, the gateway Service type only as allowed, placement only as allowed (tolerations of
 * allowed taint keys, never of every taint; node labels of the allowed keys; pod affinity within
 * the instance's own namespace — the test's operator allows the real node's taint and label
 * besides the defaults), a quota within the operator's maximum
 * (ResourceQuota and LimitRange in every instance namespace), config keys that cannot shadow the
 * operator's keys and are written quoted.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1ConfigMap, V1LimitRange, V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import { ApiError, Kinds, customResource, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { getOrUndefined, iotService, startServedLandscape, stopServedLandscape, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

const ResourceQuotaType = customResource('', 'v1', 'ResourceQuota', 'resourcequotas');
const LimitRangeType = customResource('', 'v1', 'LimitRange', 'limitranges');

let env: TestEnv;
let landscape: string;
let mgr: Manager | undefined;

before(async () => ({ env, landscape, mgr } = await startServedLandscape()));
after(() => stopServedLandscape({ env, landscape, mgr }));

describe('what an IoTService author can ask for', () => {
  it('config keys that spell a reserved key, or are not plain names, are rejected by the API server', async () => {
    for (const key of ['Instance', 'end_points', '<<']) {
      await assert.rejects(env.client.create(IoTServiceV1alpha1Type, iotService('bad-config', landscape, { config: { [key]: 'x' } })), (err: unknown) => {
        assert.ok(err instanceof ApiError && err.reason === 'Invalid', `${key}: refused as invalid`);
        assert.match(err.message, /spec: Invalid value: "object": config (must not set|keys may hold only)/, key);
        return true;
      });
    }
  });

  it('a registry, Service type, placement or quota beyond what the operator allows: Failed naming the flag, nothing created', async () => {
    const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
      ['registry', { registry: 'docker.io/attacker' }, 'RegistryNotAllowed', /--allowed-registries: registry\.example\.com\/iot/],
      ['image', { processing: { image: 'registry.example.com.evil.io/iot/miner:1' } }, 'RegistryNotAllowed', /spec\.processing\.image/],
      ['lb', { gateway: { serviceType: 'LoadBalancer' } }, 'ServiceTypeNotAllowed', /--allowed-service-types: ClusterIP/],
      ['quota', { quota: { cpu: '64' } }, 'QuotaAboveLimit', /spec\.quota\.cpu 64 .*--max-quota cpu=16/],
      ['taint', { gateway: { tolerations: [{ key: 'dedicated', operator: 'Exists' }] } }, 'TolerationNotAllowed', /spec\.gateway\.placement\.tolerations\[0\]\.key dedicated .*--allowed-toleration-keys: node\.iot-operator\.dev\/real\)/],
      ['every-taint', { core: { tolerations: [{ operator: 'Exists' }] } }, 'TolerationNotAllowed', /spec\.core\.placement\.tolerations\[0\] has no key and so tolerates every taint/],
      ['node-label', { database: { nodeSelector: { 'example.com/pool': 'gold' } } }, 'NodeLabelNotAllowed', /spec\.database\.placement\.nodeSelector key example\.com\/pool .*--allowed-node-label-keys: kubernetes\.io\/hostname, .*node\.iot-operator\.dev\/real\)/],
      ['pod-affinity', { broker: { affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', namespaces: ['kube-system'] }] } } } }, 'PodAffinityNotAllowed', /podAntiAffinity\.requiredDuringSchedulingIgnoredDuringExecution\[0\]\.namespaces kube-system may select pods outside the instance namespace/],
    ];
    for (const [name, spec] of cases) {
      await env.client.create(IoTServiceV1alpha1Type, iotService(`refused-${name}`, landscape, spec));
    }
    for (const [name, , reason, message] of cases) {
      const iot = await waitForPhase(env, landscape, `refused-${name}`, 'Failed');
      assert.equal(iot.status?.conditions?.find((c) => c.type === 'Degraded')?.reason, reason, name);
      assert.match(iot.status?.reason ?? '', message, name);
      assert.equal(await getOrUndefined(env, Kinds.Namespace, `${landscape}-refused-${name}`), undefined, `${name}: no namespace was created`);
    }
  });

  it('every instance namespace has a ResourceQuota (spec within the maximum) and a LimitRange its pods are admitted under; config.yml is quoted', async () => {
    await env.client.create(IoTServiceV1alpha1Type, iotService('quota', landscape, { quota: { cpu: '2', storage: '20Gi' }, config: { merge: '<<', flag: 'yes' } }));
    await waitForPhase(env, landscape, 'quota', 'Available');
    const namespace = `${landscape}-quota`;
    const quota = await env.client.get<V1ResourceQuota & KubeObject>(ResourceQuotaType, 'instance-quota', namespace);
    assert.deepEqual(quota.spec?.hard, { 'requests.cpu': '2', 'requests.memory': '8Gi', 'requests.storage': '20Gi' });
    const limits = await env.client.get<V1LimitRange & KubeObject>(LimitRangeType, 'instance-limits', namespace);
    assert.deepEqual(limits.spec?.limits.map((l) => [l.type, (l as { default?: unknown }).default, l.defaultRequest]), [['Container', { cpu: '1', memory: '1Gi' }, { cpu: '10m', memory: '32Mi' }]]);
    const pods = await env.client.list<V1Pod & KubeObject>(Kinds.Pod, { namespace });
    assert.equal(pods.items.length, 7);
    for (const pod of pods.items) assert.deepEqual(pod.spec?.containers[0]?.resources?.requests, { cpu: '10m', memory: '32Mi' }, `${pod.metadata.name} got the default requests`);
    await waitFor('the quota to count the instance’s 7 pods', async () => {
      const used = await env.client.get<V1ResourceQuota & KubeObject>(ResourceQuotaType, 'instance-quota', namespace);
      return { done: used.status?.used?.['requests.cpu'] === '70m', value: undefined, seen: used.status };
    });

    const config = await env.client.get<V1ConfigMap & KubeObject>(Kinds.ConfigMap, 'iot-config', namespace);
    assert.match(config.data?.['config.yml'] ?? '', /^"merge": "<<"$/m);
    assert.match(config.data?.['config.yml'] ?? '', /^"flag": "yes"$/m);
  });
});
