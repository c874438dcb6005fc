import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeApiRequest, matchesRequest } from '../src/testing/fault-rules.ts';

const pick = (method: string, url: string) => {
  const { verb, group, version, resource, subresource, namespace, name } = describeApiRequest(method, url);
  return { verb, group, version, resource, subresource, namespace, name };
};

describe('fault proxy request info', () => {
  it('names verb, group, resource, namespace, name and subresource as the API server does', () => {
    assert.deepEqual(pick('GET', '/api/v1/namespaces/ns/pods/p1'), { verb: 'get', group: '', version: 'v1', resource: 'pods', subresource: '', namespace: 'ns', name: 'p1' });
    assert.deepEqual(pick('GET', '/api/v1/namespaces/ns/pods?limit=500'), { verb: 'list', group: '', version: 'v1', resource: 'pods', subresource: '', namespace: 'ns', name: '' });
    assert.deepEqual(pick('GET', '/apis/apps/v1/deployments?watch=true&resourceVersion=5'), { verb: 'watch', group: 'apps', version: 'v1', resource: 'deployments', subresource: '', namespace: '', name: '' });
    assert.deepEqual(pick('PUT', '/apis/coordination.k8s.io/v1/namespaces/ns/leases/op-leader'), { verb: 'update', group: 'coordination.k8s.io', version: 'v1', resource: 'leases', subresource: '', namespace: 'ns', name: 'op-leader' });
    assert.deepEqual(pick('PATCH', '/apis/cp.iotservices.io/v1alpha1/namespaces/ns/iotservices/x/status'), { verb: 'patch', group: 'cp.iotservices.io', version: 'v1alpha1', resource: 'iotservices', subresource: 'status', namespace: 'ns', name: 'x' });
    assert.deepEqual(pick('POST', '/api/v1/namespaces/ns/configmaps'), { verb: 'create', group: '', version: 'v1', resource: 'configmaps', subresource: '', namespace: 'ns', name: '' });
    assert.deepEqual(pick('DELETE', '/api/v1/namespaces/ns/secrets'), { verb: 'deletecollection', group: '', version: 'v1', resource: 'secrets', subresource: '', namespace: 'ns', name: '' });
    assert.deepEqual(pick('DELETE', '/api/v1/namespaces/gone'), { verb: 'delete', group: '', version: 'v1', resource: 'namespaces', subresource: '', namespace: '', name: 'gone' });
  });

  it('calls discovery and health paths non-resource requests', () => {
    assert.equal(pick('GET', '/apis').verb, 'nonresource');
    assert.equal(pick('GET', '/api/v1').verb, 'nonresource');
    assert.equal(pick('GET', '/healthz').verb, 'nonresource');
  });
});

describe('fault proxy matching', () => {
  const lease = describeApiRequest('PUT', '/apis/coordination.k8s.io/v1/namespaces/ns/leases/l', 'replica-a');
  const continued = describeApiRequest('GET', '/api/v1/namespaces/ns/configmaps?limit=500&continue=abc', 'replica-b');

  it('an empty match selects every request', () => {
    assert.ok(matchesRequest({}, lease));
    assert.ok(matchesRequest({}, continued));
  });

  it('selects by client, so one replica can be disturbed alone', () => {
    assert.ok(matchesRequest({ client: 'replica-a', group: 'coordination.k8s.io' }, lease));
    assert.ok(!matchesRequest({ client: 'replica-b', group: 'coordination.k8s.io' }, lease));
    assert.ok(matchesRequest({ client: ['replica-b', 'replica-a'] }, lease));
  });

  it('every field set must hold; lists of values mean any of them', () => {
    assert.ok(matchesRequest({ verb: ['get', 'update'], resource: 'leases', namespace: 'ns', name: 'l' }, lease));
    assert.ok(!matchesRequest({ verb: 'get', resource: 'leases' }, lease));
    assert.ok(!matchesRequest({ group: '' }, lease), 'the core group is "" and differs from coordination.k8s.io');
    assert.ok(matchesRequest({ group: '' }, continued));
  });

  it('paths match by prefix or pattern', () => {
    assert.ok(matchesRequest({ path: '/apis/coordination.k8s.io/' }, lease));
    assert.ok(!matchesRequest({ path: '/api/v1/' }, lease));
    assert.ok(matchesRequest({ path: /\/leases\/l$/ }, lease));
  });

  it('query parameters match by presence or exact value', () => {
    assert.ok(matchesRequest({ verb: 'list', query: { continue: true } }, continued));
    assert.ok(matchesRequest({ query: { limit: '500' } }, continued));
    assert.ok(!matchesRequest({ query: { limit: '10' } }, continued));
    assert.ok(!matchesRequest({ query: { continue: true } }, lease));
  });
});
