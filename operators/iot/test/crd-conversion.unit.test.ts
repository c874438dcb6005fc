// When the operator points the IoTService CRD's conversion at its own Service and when it leaves
// it alone (conversionDecision, pure): the CRD as shipped (naming a Service of the seed's landscape,
// no CA) is taken over when that Service is missing or has no ready endpoint; the operator's own
// Service is re-pointed only when its CA (or path, port) differs; a Service another landscape's
// operator serves and a URL are never replaced. One round against a fake client shows the patch
// carries the resourceVersion read (so concurrent replicas cannot both win) and a single target.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ApiError } from '@iot-operator/runtime';
import { DEFAULT_CONVERSION_SERVICE, IOTSERVICE_CRD_NAME, conversionClientConfig } from '../src/api/crd.ts';
import { checkConversion, conversionDecision, type CrdConversion } from '../src/webhooks/crd-conversion.ts';

const own = { namespace: 'landscape-a', name: 'iot-operator-webhook' };
const ca = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const shipped = conversionClientConfig({ service: DEFAULT_CONVERSION_SERVICE }, '') as CrdConversion;

describe('conversionDecision', () => {
  it('no conversion webhook at all (strategy None, or none): point it', () => {
    assert.deepEqual(conversionDecision(undefined, own, ca, 'missing'), { point: true, reason: 'no Service' });
    assert.deepEqual(conversionDecision({ strategy: 'None' }, own, ca, 'missing'), { point: true, reason: 'no Service' });
  });

  it('the CRD as shipped, naming a Service that does not exist or has no ready endpoint: point it', () => {
    assert.deepEqual(conversionDecision(shipped, own, ca, 'missing'), { point: true, reason: 'Service missing' });
    assert.deepEqual(conversionDecision(shipped, own, ca, 'not serving'), { point: true, reason: 'no ready endpoint' });
  });

  it('another landscape’s Service with a ready endpoint: left alone, naming it', () => {
    assert.deepEqual(conversionDecision(shipped, own, ca, 'serving'), { point: false, reason: 'served elsewhere', holder: 'devawsk8s/iot-operator-webhook' });
  });

  it('a URL (an operator outside the cluster, or tests): never replaced', () => {
    const url = conversionClientConfig({ url: 'https://127.0.0.1:9443' }, ca) as CrdConversion;
    assert.deepEqual(conversionDecision(url, own, ca, 'missing'), { point: false, reason: 'url', holder: 'https://127.0.0.1:9443/convert' });
  });

  it('this very Service: nothing to do while its CA is the one mounted; re-pointed when the CA changed (a renewed certificate)', () => {
    const current = conversionClientConfig({ service: own }, ca) as CrdConversion;
    assert.deepEqual(conversionDecision(current, own, ca, 'not serving'), { point: false, reason: 'current' });
    assert.deepEqual(conversionDecision(current, own, `${ca}\n`, 'not serving'), { point: true, reason: 'outdated' });
    assert.deepEqual(conversionDecision(conversionClientConfig({ service: own }, '') as CrdConversion, own, ca, 'not serving'), { point: true, reason: 'outdated' });
  });
});

describe('checkConversion', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'iot-conversion-ca-'));
  const caFile = path.join(dir, 'ca.crt');
  writeFileSync(caFile, ca);

  /** A client holding the CRD and, when `endpoints` are given, the Service it names with those endpoints; records the patches it is sent. */
  function client(conversion: CrdConversion, endpoints?: Array<{ conditions: { ready?: boolean; serving?: boolean } }>) {
    const patches: unknown[] = [];
    return {
      patches,
      get: async (type: { kind: string }, name: string) => {
        if (type.kind === 'CustomResourceDefinition' && name === IOTSERVICE_CRD_NAME) return { metadata: { name, resourceVersion: '42' }, spec: { conversion } } as never;
        if (type.kind === 'Service' && endpoints) return { metadata: { name } } as never;
        throw new ApiError(404, 'NotFound', `${type.kind} ${name} not found`);
      },
      list: async () => ({ items: endpoints ? [{ metadata: {}, endpoints }] : [] }) as never,
      patch: async (_type: unknown, _name: string, _ns: unknown, patch: unknown, patchType?: string) => {
        patches.push({ patch, patchType });
        return {} as never;
      },
    };
  }

  it('the shipped CRD: one merge patch carrying the resourceVersion read, the Service and the CA, no URL', async () => {
    const fake = client(shipped);
    assert.deepEqual(await checkConversion(fake, { service: own, caFile }), { point: true, reason: 'Service missing' });
    const desired = conversionClientConfig({ service: own }, ca);
    assert.deepEqual(fake.patches, [
      {
        patchType: 'merge',
        patch: { metadata: { resourceVersion: '42' }, spec: { conversion: { ...desired, webhook: { ...desired.webhook, clientConfig: { ...desired.webhook.clientConfig, url: null } } } } },
      },
    ]);
  });

  it('already pointed at this Service with this CA: no patch', async () => {
    const fake = client(conversionClientConfig({ service: own }, ca) as CrdConversion);
    assert.deepEqual(await checkConversion(fake, { service: own, caFile }), { point: false, reason: 'current' });
    assert.deepEqual(fake.patches, []);
  });

  it('another Service: left while an endpoint’s pod is ready (serving); taken over when its endpoints are published but not serving (pods starting or stuck)', async () => {
    const serving = client(shipped, [{ conditions: { ready: true, serving: true } }]);
    assert.deepEqual(await checkConversion(serving, { service: own, caFile }), { point: false, reason: 'served elsewhere', holder: 'devawsk8s/iot-operator-webhook' });
    assert.deepEqual(serving.patches, []);
    const notServing = client(shipped, [{ conditions: { ready: true, serving: false } }]);
    assert.deepEqual(await checkConversion(notServing, { service: own, caFile }), { point: true, reason: 'no ready endpoint' });
    const noEndpoints = client(shipped, []);
    assert.deepEqual(await checkConversion(noEndpoints, { service: own, caFile }), { point: true, reason: 'no ready endpoint' });
  });
});
