import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError, Kinds, type KubeApi, type KubeObject, type ListOptions, type ResourceType } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { ChildBodies } from '../src/child-bodies.ts';

const selection = { labelSelector: 'landscape=ls' };
const inInstanceNamespace = (obj: KubeObject) => obj.metadata.namespace!.startsWith('ls-');

function configMap(namespace: string, value: string, name = 'iot-config'): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels: { landscape: 'ls' } }, data: { value } } as KubeObject;
}

/** The fake behind a client that selects and pages lists as the API server does (metadata.name, limit, continue) and counts requests. */
function countingClient(fake: FakeClient, options: { failLists?: boolean } = {}) {
  const requests = { get: 0, list: 0 };
  const listedNames: string[] = [];
  const client: KubeApi = Object.assign(Object.create(fake) as KubeApi, {
    get: (type: ResourceType, name: string, namespace?: string) => (requests.get++, fake.get(type, name, namespace)),
    list: async (type: ResourceType, list: ListOptions = {}) => {
      requests.list++;
      if (options.failLists) throw new ApiError(503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
      const name = /^metadata\.name=(.+)$/.exec(list.fieldSelector ?? '')?.[1];
      if (list.continue === undefined) listedNames.push(name ?? '*');
      const all = (await fake.list(type, list)).items.filter((o) => name === undefined || o.metadata.name === name);
      const start = Number(list.continue ?? 0);
      const end = start + (list.limit ?? all.length);
      // Items of a list response carry no apiVersion and kind.
      const items = all.slice(start, end).map(({ apiVersion: _a, kind: _k, ...item }) => item as KubeObject);
      return { items, metadata: { continue: end < all.length ? String(end) : undefined } };
    },
  });
  return { client, requests, listedNames };
}

const cachedForm = async (fake: FakeClient, namespace: string, name = 'iot-config') => {
  const { data: _data, ...metadataOnly } = (await fake.get(Kinds.ConfigMap, name, namespace)) as KubeObject & { data?: unknown };
  return metadataOnly as KubeObject;
};

describe('bodies of metadata-only children', () => {
  it('after a start, the children of a kind are read from lists of 50, not one GET each, each as a GET would return it', async () => {
    const fake = new FakeClient();
    const namespaces = Array.from({ length: 120 }, (_, i) => `ls-${i}`);
    fake.seed(Kinds.ConfigMap, ...namespaces.map((ns) => configMap(ns, ns)));
    const { client, requests } = countingClient(fake);
    const bodies = new ChildBodies(selection, inInstanceNamespace);
    const read = await Promise.all(namespaces.map(async (ns) => bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, ns))));
    assert.deepEqual(requests, { get: 0, list: 3 });
    assert.deepEqual(read, await Promise.all(namespaces.map((ns) => fake.get(Kinds.ConfigMap, 'iot-config', ns))));
  });

  it('a child changed since the list, read a second time, or not wanted is got from the API server', async () => {
    const fake = new FakeClient();
    fake.seed(Kinds.ConfigMap, configMap('ls-a', 'a'), configMap('ls-b', 'b'), configMap('elsewhere', 'planted'));
    const { client, requests } = countingClient(fake);
    const bodies = new ChildBodies(selection, inInstanceNamespace);
    assert.equal((await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'ls-a')) as KubeObject & { data: { value: string } }).data.value, 'a');
    assert.deepEqual(requests, { get: 0, list: 1 });

    // Edited after the list: the cache shows the new resourceVersion, so the listed body is stale.
    const edited = await fake.get(Kinds.ConfigMap, 'iot-config', 'ls-b');
    await fake.replace(Kinds.ConfigMap, { ...edited, data: { value: 'edited' } } as KubeObject);
    assert.equal((await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'ls-b')) as KubeObject & { data: { value: string } }).data.value, 'edited');
    assert.equal(requests.get, 1);

    await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'ls-a'));
    assert.equal(requests.get, 2, 'a listed body is used once');
    await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'elsewhere'));
    assert.deepEqual(requests, { get: 3, list: 1 }, 'an object outside the instance namespaces was not held');
  });

  it('children of another name are listed apart, so objects of other names are never listed', async () => {
    const fake = new FakeClient();
    fake.seed(Kinds.ConfigMap, configMap('ls-a', 'a'), configMap('ls-a', 'other', 'another-child'), configMap('ls-b', 'planted', 'planted-0'));
    const { client, requests, listedNames } = countingClient(fake);
    const bodies = new ChildBodies(selection, inInstanceNamespace);
    await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'ls-a'));
    const other = await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'ls-a', 'another-child'));
    assert.equal((other as KubeObject & { data: { value: string } }).data.value, 'other');
    assert.deepEqual(listedNames, ['iot-config', 'another-child']);
    assert.deepEqual(requests, { get: 0, list: 2 });
  });

  it('a child gone since it was cached reads as undefined', async () => {
    const fake = new FakeClient();
    fake.seed(Kinds.ConfigMap, configMap('ls-a', 'a'));
    const cached = await cachedForm(fake, 'ls-a');
    await fake.delete(Kinds.ConfigMap, 'iot-config', 'ls-a');
    const { client } = countingClient(fake);
    assert.equal(await new ChildBodies(selection, inInstanceNamespace).read(client, Kinds.ConfigMap, cached), undefined);
  });

  it('a failed list leaves every read to a GET of its own; the list is not repeated', async () => {
    const fake = new FakeClient();
    fake.seed(Kinds.ConfigMap, configMap('ls-a', 'a'), configMap('ls-b', 'b'));
    const { client, requests } = countingClient(fake, { failLists: true });
    const bodies = new ChildBodies(selection, inInstanceNamespace);
    for (const ns of ['ls-a', 'ls-b']) assert.equal((await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, ns)) as KubeObject & { data: { value: string } }).data.value, ns.slice(3));
    assert.deepEqual(requests, { get: 2, list: 1 });
  });

  it('listed bodies not read within their time are let go', async () => {
    const fake = new FakeClient();
    fake.seed(Kinds.ConfigMap, configMap('ls-a', 'a'), configMap('ls-b', 'b'));
    const { client, requests } = countingClient(fake);
    const bodies = new ChildBodies(selection, inInstanceNamespace, 10);
    await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'ls-a'));
    await new Promise((resolve) => setTimeout(resolve, 30));
    await bodies.read(client, Kinds.ConfigMap, await cachedForm(fake, 'ls-b'));
    assert.deepEqual(requests, { get: 1, list: 1 });
  });
});
