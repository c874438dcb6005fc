/**
 * Placement as the real API server stores it under the generated CRD (crd-schema.ts types some of
 * it and keeps label selectors and v1alpha1's affinity unchecked). Proves: an IoTService whose five
 * components set every scheduling field (test/full-placement.ts) reads back unchanged as v1beta1
 * and as v1alpha1, written as v1alpha1 (stored as v1beta1) or as v1beta1: nothing of it is pruned.
 * No operator runs: the API server stores the objects and this test process converts them
 * (installIoTCrd).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { KubeObject } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { COMPONENTS } from '../src/api/iotservice.ts';
import { IoTServiceType, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { abandonLandscape, createLandscape, createThroughConversion, installIoTCrd } from './e2e-support.ts';
import { FULL_PLACEMENT } from './full-placement.ts';

type Spec = Record<string, unknown>;
const env: TestEnv = await localTestEnv();
let landscape = '';

const betaSpec: Spec = { version: '2.4.1', ...Object.fromEntries(COMPONENTS.map((c) => [c, { placement: FULL_PLACEMENT }])) };
const alphaSpec: Spec = { version: '2.4.1', ...Object.fromEntries(COMPONENTS.map((c) => [c, FULL_PLACEMENT])) };

/** The components of a spec as the API server returns it (defaults such as replicas left out). */
function placements(spec: Spec, inPlacement: boolean): unknown {
  return Object.fromEntries(
    COMPONENTS.map((c) => {
      const component = spec[c] as Spec;
      const fields = inPlacement ? component['placement'] : { nodeSelector: component['nodeSelector'], tolerations: component['tolerations'], affinity: component['affinity'] };
      return [c, fields];
    }),
  );
}

before(async () => {
  await installIoTCrd(env);
  landscape = await createLandscape(env, false);
});

after(async () => {
  await abandonLandscape(env, landscape);
  await env.cleanup();
});

describe('placement stored by the API server under the generated CRD', () => {
  test('written as v1alpha1: stored as v1beta1 with every scheduling field, read back unchanged both ways', async () => {
    const object = { apiVersion: 'cp.iotservices.io/v1alpha1', kind: 'IoTService', metadata: { name: 'full-alpha', namespace: landscape }, spec: alphaSpec };
    await createThroughConversion(env, object, 'this process', { timeoutMs: 30_000, intervalMs: 500 });
    const beta = await env.client.get<KubeObject & { spec: Spec }>(IoTServiceType, 'full-alpha', landscape);
    assert.deepEqual(placements(beta.spec, true), placements(betaSpec, true));
    const alpha = await env.client.get<KubeObject & { spec: Spec }>(IoTServiceV1alpha1Type, 'full-alpha', landscape);
    assert.deepEqual(placements(alpha.spec, false), placements(alphaSpec, false));
  });

  test('written as v1beta1: every scheduling field reads back unchanged as v1beta1 and as v1alpha1', async () => {
    const object = { apiVersion: 'cp.iotservices.io/v1beta1', kind: 'IoTService', metadata: { name: 'full-beta', namespace: landscape }, spec: betaSpec };
    await env.client.create(IoTServiceType, object);
    const beta = await env.client.get<KubeObject & { spec: Spec }>(IoTServiceType, 'full-beta', landscape);
    assert.deepEqual(placements(beta.spec, true), placements(betaSpec, true));
    const alpha = await env.client.get<KubeObject & { spec: Spec }>(IoTServiceV1alpha1Type, 'full-beta', landscape);
    assert.deepEqual(placements(alpha.spec, false), placements(alphaSpec, false));
  });
});
