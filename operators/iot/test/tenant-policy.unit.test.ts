import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { validateIoTServiceSpec } from '../src/api/validation.ts';
import { desiredLimitRange, desiredResourceQuota, renderConfigYaml, resolveInstance } from '../src/resources/index.ts';
import { iotService, TEST_CONFIG, testInstance } from './fixtures.ts';

/** The failure reason and message of a spec the default policy refuses. */
function refusal(spec: Record<string, unknown>): { reason: string; message: string } {
  const resolved = resolveInstance(iotService('tenant-a', { version: '2.4.1', ...spec }), TEST_CONFIG);
  assert.ok(!resolved.ok, `${JSON.stringify(spec)} is refused`);
  return resolved.failure;
}

describe('tenant policy', () => {
  it('images come only from allowed registries, matched on whole path segments', () => {
    assert.ok(resolveInstance(iotService('a', { version: '1', registry: 'registry.example.com/iot/team' }), TEST_CONFIG).ok, 'below the allowed registry');
    const lookalike = refusal({ registry: 'registry.example.com/iotx' });
    assert.equal(lookalike.reason, 'RegistryNotAllowed');
    assert.match(lookalike.message, /--allowed-registries: registry\.example\.com\/iot/);
    assert.equal(refusal({ registry: 'registry.example.com.evil.io/iot' }).reason, 'RegistryNotAllowed');
    const image = refusal({ core: { image: 'docker.io/attacker/miner:1' } });
    assert.equal(image.reason, 'RegistryNotAllowed');
    assert.match(image.message, /^spec\.core\.image docker\.io\/attacker\/miner:1 is not from a registry this operator allows/);
    assert.ok(resolveInstance(iotService('a', { version: '1', core: { image: 'registry.example.com/iot/core@sha256:abc' } }), TEST_CONFIG).ok);
  });

  it('the gateway Service type is ClusterIP unless the operator allows more', () => {
    const failure = refusal({ gateway: { serviceType: 'LoadBalancer' } });
    assert.equal(failure.reason, 'ServiceTypeNotAllowed');
    assert.match(failure.message, /--allowed-service-types: ClusterIP/);
    assert.equal(refusal({ gateway: { serviceType: 'NodePort' } }).reason, 'ServiceTypeNotAllowed');
  });

  it('the quota takes spec values within the maximum, defaults otherwise, and refuses more', () => {
    assert.deepEqual(desiredResourceQuota(testInstance()).spec?.hard, { 'requests.cpu': '4', 'requests.memory': '8Gi', 'requests.storage': '100Gi' });
    assert.deepEqual(desiredResourceQuota(testInstance({ quota: { cpu: '16', memory: '1024Mi' } })).spec?.hard, { 'requests.cpu': '16', 'requests.memory': '1Gi', 'requests.storage': '100Gi' });
    const failure = refusal({ quota: { memory: '33Gi' } });
    assert.equal(failure.reason, 'QuotaAboveLimit');
    assert.match(failure.message, /spec\.quota\.memory 33Gi .*--max-quota memory=32Gi/);
    const limits = desiredLimitRange(testInstance()).spec.limits[0]!;
    assert.deepEqual([limits.type, limits.default, limits.defaultRequest], ['Container', { cpu: '1', memory: '1Gi' }, { cpu: '10m', memory: '32Mi' }]);
  });
});

describe('config keys', () => {
  it('no spelling of a reserved key is accepted, and keys keep a plain grammar', () => {
    for (const key of ['Instance', 'VERSION', 'end_points', 'name-space', 'land.scape', 'Stream', 'stre.am', 'Retention', 'reten_tion']) {
      const result = validateIoTServiceSpec({ version: '1', config: { [key]: 'x' } });
      assert.ok(!result.ok && result.errors.some((e) => /must not set instance, landscape, namespace, version, endpoints, stream, retention in any case or spelling/.test(e)), key);
    }
    for (const key of ['<<', ' instance', 'a b', '-x', 'ｉnstance']) {
      const result = validateIoTServiceSpec({ version: '1', config: { [key]: 'x' } });
      assert.ok(!result.ok && result.errors.some((e) => /config keys may hold only letters, digits/.test(e)), JSON.stringify(key));
    }
    assert.ok(validateIoTServiceSpec({ version: '1', config: { 'log.level': 'debug', Feature_X: 'on' } }).ok);
  });

  it('keys and values are written as quoted strings: nothing becomes YAML syntax', () => {
    const text = renderConfigYaml(testInstance({ config: { yes: 'no', merge: '<<', anchor: '*ref', empty: '~' } }));
    assert.match(text, /^"yes": "no"$/m);
    assert.match(text, /^"merge": "<<"$/m);
    assert.match(text, /^"instance": "tenant-a"$/m);
    assert.deepEqual(parse(text, { version: '1.1', merge: true }), {
      instance: 'tenant-a',
      landscape: 'devawsk8s',
      namespace: 'devawsk8s-tenant-a',
      version: '2.4.1',
      endpoints: parse(text).endpoints,
      stream: { replicas: 1, maxBytes: 805306368 },
      retention: { seconds: 2592000 },
      anchor: '*ref',
      empty: '~',
      merge: '<<',
      yes: 'no',
    });
  });
});
