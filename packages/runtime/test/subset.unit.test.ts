/**
 * Comparing desired and observed objects: the subset check ignores what only the server sets
 * and names the first difference; overlay builds a full replace; the desired-hash stamp makes a
 * removed field a difference; childDifference tolerates owner references others added.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { childDifference, firstDifference, isSubset } from '../src/apply/subset.ts';
import type { KubeObject } from '../src/client/resource.ts';

describe('desired-subset-of-observed', () => {
  const observed = {
    metadata: { name: 'a', labels: { app: 'x' }, resourceVersion: '5', uid: 'u' },
    spec: { replicas: 2, template: { spec: { containers: [{ name: 'c', image: 'i:1', ports: [{ containerPort: 80, protocol: 'TCP' }], terminationMessagePath: '/dev/termination-log' }] } } },
    status: { readyReplicas: 2 },
  };

  it('ignores fields only the server sets', () => {
    assert.equal(isSubset({ metadata: { name: 'a', labels: { app: 'x' } }, spec: { replicas: 2, template: { spec: { containers: [{ name: 'c', image: 'i:1', ports: [{ containerPort: 80, protocol: 'TCP' }] }] } } } }, observed), true);
  });

  it('names the first field that differs', () => {
    assert.equal(firstDifference({ spec: { replicas: 3 } }, observed), '.spec.replicas');
    assert.equal(firstDifference({ spec: { template: { spec: { containers: [{ image: 'i:2' }] } } } }, observed), '.spec.template.spec.containers[0].image');
    assert.equal(firstDifference({ metadata: { labels: { app: 'x', extra: 'y' } } }, observed), '.metadata.labels.extra');
  });

  it('treats a list as a whole: a missing or extra element is a difference', () => {
    assert.equal(isSubset({ spec: { template: { spec: { containers: [] } } } }, observed), false);
    assert.equal(isSubset({ spec: { template: { spec: { containers: [{ name: 'c' }, { name: 'd' }] } } } }, observed), false);
  });

  it('matches empty desired maps and lists with absent observed ones, but not numbers with strings', () => {
    assert.equal(isSubset({ metadata: { annotations: {} }, spec: { tolerations: [] } }, observed), true);
    assert.equal(isSubset({ spec: { replicas: '2' } }, observed), false);
  });
});

describe('overlay for a full replace', () => {
  it('keeps server-set fields, takes desired values and whole lists from desired', async () => {
    const { overlay } = await import('../src/apply/overlay.ts');
    const observed = { metadata: { name: 's', resourceVersion: '7', labels: { a: '1', extra: 'x' } }, spec: { clusterIP: '10.0.0.1', ports: [{ name: 'http', port: 9999 }, { name: 'hand', port: 1 }] } };
    const desired = { metadata: { name: 's', labels: { a: '1' } }, spec: { ports: [{ name: 'http', port: 8080 }] } };
    const result = overlay(observed, desired);
    assert.deepEqual(result.spec.ports, [{ name: 'http', port: 8080 }]);
    assert.equal(result.spec.clusterIP, '10.0.0.1');
    assert.equal(result.metadata.resourceVersion, '7');
    assert.equal(isSubset(desired, result), true);
    assert.equal(observed.spec.ports.length, 2, 'the input is not modified');
  });
});

describe('desired hash', () => {
  it('makes a removed field visible to the subset check, and ignores key order and previous stamps', async () => {
    const { withDesiredHash } = await import('../src/apply/desired-hash.ts');
    const before: KubeObject = withDesiredHash({ metadata: { name: 'd' }, spec: { nodeSelector: { zone: 'a', disk: 'ssd' } } });
    const after: KubeObject = withDesiredHash({ metadata: { name: 'd' }, spec: { nodeSelector: { zone: 'a' } } });
    assert.equal(isSubset({ metadata: { name: 'd' }, spec: { nodeSelector: { zone: 'a' } } }, before), true, 'without the stamp the removal is invisible');
    assert.equal(isSubset(after, before), false, 'with the stamp it is a difference');
    const reordered: KubeObject = withDesiredHash({ spec: { nodeSelector: { disk: 'ssd', zone: 'a' } }, metadata: { name: 'd' } });
    assert.deepEqual(reordered.metadata.annotations, before.metadata.annotations);
    assert.deepEqual(withDesiredHash(before).metadata.annotations, before.metadata.annotations, 'stamping twice changes nothing');
  });

  it('stamps the hash earlier releases stamped, so an upgraded operator re-applies no child', async () => {
    const { DESIRED_HASH_ANNOTATION, canonicalJson, withDesiredHash } = await import('../src/apply/desired-hash.ts');
    const child: KubeObject = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      // Keys whose order by UTF-16 code units differs from a locale's ('B' before 'a', 'z' before 'é').
      metadata: { name: 'd', namespace: 'n', labels: { b: '2', a: '1', B: '3', é: '4', z: '5' }, annotations: { z: 'y' } },
      spec: { replicas: 2, paused: undefined, template: { spec: { containers: [{ name: 'c', args: ['-v', '10'], env: [{ name: 'É', value: 'x' }] }] } }, '10': true, '9': null },
    };
    assert.equal(
      canonicalJson(child),
      '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"z":"y"},"labels":{"B":"3","a":"1","b":"2","z":"5","é":"4"},"name":"d","namespace":"n"},' +
        '"spec":{"10":true,"9":null,"replicas":2,"template":{"spec":{"containers":[{"args":["-v","10"],"env":[{"name":"É","value":"x"}],"name":"c"}]}}}}',
    );
    assert.equal(withDesiredHash(child).metadata.annotations?.[DESIRED_HASH_ANNOTATION], '4c7b940b6efeb7d1f9b7d5e374bf46a1');
    assert.equal(canonicalJson([1, undefined, { a: [] }]), '[1,,{"a":[]}]', 'an undefined entry is written as before: nothing');
  });
});

describe('child difference', () => {
  const owner = { apiVersion: 'example.com/v1', kind: 'Widget', name: 'w', uid: 'u1', controller: true, blockOwnerDeletion: true };
  const desired: KubeObject = { metadata: { name: 'c', ownerReferences: [owner] }, spec: { replicas: 2 } };
  const observed: KubeObject = { metadata: { name: 'c', resourceVersion: '3', ownerReferences: [owner] }, spec: { replicas: 2, paused: false } };

  it('is the first differing field, as for any object', () => {
    assert.equal(childDifference(desired, observed), undefined);
    assert.equal(childDifference({ ...desired, spec: { replicas: 3 } }, observed), '.spec.replicas');
  });

  it('lets others add owner references, in any position, but not drop ours', () => {
    const other = { apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'u2' };
    assert.equal(childDifference(desired, { ...observed, metadata: { ...observed.metadata, ownerReferences: [other, owner] } }), undefined);
    assert.equal(childDifference(desired, { ...observed, metadata: { ...observed.metadata, ownerReferences: [other] } }), '.metadata.ownerReferences[0]');
    assert.equal(childDifference(desired, { ...observed, metadata: { name: 'c' } }), '.metadata.ownerReferences[0]');
    assert.equal(firstDifference(desired, { ...observed, metadata: { ...observed.metadata, ownerReferences: [other, owner] } }), '.metadata.ownerReferences', 'the plain check sees the extra owner');
  });
});
