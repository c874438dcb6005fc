/**
 * How the broker's pods start and roll (src/resources/broker-rollout.ts), in the desired
 * StatefulSet and through the reconcile on the runtime's in-memory fake (ingestion.e2e rolls
 * three brokers on the real node): three brokers of a new instance start in parallel and are
 * ready only on nats-server's full /healthz (their streams current), so a roll waits for each
 * replaced broker to catch up; one broker is exactly as before; a broker StatefulSet that exists
 * with OrderedReady keeps it and the js-enabled-only readiness (the policy cannot be changed).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Secret, V1StatefulSet } from '@kubernetes/client-node';
import { Kinds, type CacheReader, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { iotReconciler } from '../src/controller.ts';
import { IoTServiceType } from '../src/iotservice-types.ts';
import { desiredChildren } from '../src/resources/index.ts';
import { iotService, TEST_CONFIG, TEST_CREDENTIALS, testGatewayTls, testInstance } from './fixtures.ts';

const PULL_SECRET: V1Secret = { metadata: { name: 'image-pull-secret' }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': 'e30=' } };
const NS = 'devawsk8s-tenant-a';

/** What decides how the broker's pods start and roll: the StatefulSet's policy and the broker's readiness path. */
function rollout(statefulSet: V1StatefulSet | undefined): { policy: string | undefined; readiness: string | undefined } {
  const container = statefulSet?.spec?.template.spec?.containers[0];
  return { policy: statefulSet?.spec?.podManagementPolicy, readiness: container?.readinessProbe?.httpGet?.path };
}

function desiredBroker(replicas: 1 | 3, keptOrderedReadyBroker?: boolean): V1StatefulSet {
  const all = desiredChildren(testInstance({ broker: { replicas } }), {
    imagePullSecret: PULL_SECRET,
    credentials: TEST_CREDENTIALS,
    keptEmptyDirs: new Set(),
    ...(keptOrderedReadyBroker === undefined ? {} : { keptOrderedReadyBroker }),
    gatewayTls: testGatewayTls(),
  });
  return all.children.find((c) => c.object.kind === 'StatefulSet' && c.object.metadata.name === 'broker')!.object as V1StatefulSet;
}

describe('the broker StatefulSet', () => {
  it('of three new brokers: started in parallel, each ready only once its streams are current (full /healthz)', () => {
    assert.deepEqual(rollout(desiredBroker(3)), { policy: 'Parallel', readiness: '/healthz' });
  });

  it('of one broker: as before, the default OrderedReady and ready once JetStream is enabled, made or kept; only three differ', () => {
    assert.deepEqual(rollout(desiredBroker(1)), { policy: undefined, readiness: '/healthz?js-enabled-only=true' });
    assert.deepEqual(rollout(desiredBroker(1, true)), { policy: undefined, readiness: '/healthz?js-enabled-only=true' });
    assert.notDeepEqual(rollout(desiredBroker(3)), rollout(desiredBroker(1)), 'three new brokers start and roll otherwise');
  });

  it('of three brokers made with OrderedReady: keeps it, and the js-enabled-only readiness it needs to start', () => {
    assert.deepEqual(rollout(desiredBroker(3, true)), { policy: undefined, readiness: '/healthz?js-enabled-only=true' });
    assert.deepEqual(rollout(desiredBroker(3, false)), { policy: 'Parallel', readiness: '/healthz' }, 'as three new brokers do not');
  });
});

describe('the reconcile', () => {
  /** `shard`: the operator is a shard whose cache does not show the StatefulSets yet (it has just taken the instance over). */
  function setup(existingBroker?: V1StatefulSet, shard?: { ring: string; name: string }) {
    const cluster = new FakeClient();
    cluster.seed(Kinds.Secret, { ...PULL_SECRET, metadata: { name: 'image-pull-secret', namespace: TEST_CONFIG.operatorName } } as KubeObject);
    cluster.seed(IoTServiceType, iotService('tenant-a', { version: '2.4.1', broker: { replicas: 3 } }) as unknown as KubeObject);
    if (existingBroker) cluster.seed(Kinds.StatefulSet, existingBroker as KubeObject);
    const reconciler = iotReconciler({ ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1, ...(shard ? { shard } : {}) });
    const all = cluster.cacheReader();
    const cache: CacheReader = shard ? { ...all, get: (type, name, namespace, ...rest) => (type === Kinds.StatefulSet ? undefined : all.get(type, name, namespace, ...rest)) } : all;
    const reconcile = () => reconciler({ namespace: TEST_CONFIG.operatorName, name: 'tenant-a' }, cluster.reconcileContext(cache));
    const broker = () => cluster.peek<V1StatefulSet & KubeObject>(Kinds.StatefulSet, 'broker', NS);
    return { cluster, reconcile, broker };
  }

  it('makes the StatefulSet of three new brokers with Parallel and the full /healthz', async () => {
    const { reconcile, broker } = setup();
    await reconcile();
    assert.deepEqual(rollout(broker()), { policy: 'Parallel', readiness: '/healthz' });
  });

  it('leaves an existing broker StatefulSet of OrderedReady with it and its js-enabled-only readiness; made anew, it gets Parallel', async () => {
    // As an operator without broker-rollout.ts made it; the API server states the default policy.
    const made = desiredBroker(3, true);
    const { cluster, reconcile, broker } = setup({ ...made, spec: { ...made.spec!, podManagementPolicy: 'OrderedReady' } });
    await reconcile();
    await reconcile();
    assert.deepEqual(rollout(broker()), { policy: 'OrderedReady', readiness: '/healthz?js-enabled-only=true' });
    await cluster.delete(Kinds.StatefulSet, 'broker', NS);
    await reconcile();
    assert.deepEqual(rollout(broker()), { policy: 'Parallel', readiness: '/healthz' });
  });

  it('a shard that has just taken the instance over keeps the OrderedReady it finds on the API server, not yet in its cache', async () => {
    const made = desiredBroker(3, true);
    const { reconcile, broker } = setup({ ...made, spec: { ...made.spec!, podManagementPolicy: 'OrderedReady' } }, { ring: 'iot', name: 'shard-b' });
    await reconcile();
    assert.deepEqual(rollout(broker()), { policy: 'OrderedReady', readiness: '/healthz?js-enabled-only=true' });
  });
});
