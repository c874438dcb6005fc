import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { metadataSource } from '../src/cache/metadata-source.ts';
import { KubeClient } from '../src/client/client.ts';
import { Kinds } from '../src/client/resource.ts';

/** A scripted API server: answers list and watch requests for ConfigMaps with metadata only, and records what it was asked. */
let server: http.Server;
let client: KubeClient;
const asked: Array<{ url: string; accept?: string }> = [];
const metadata = { name: 'big', namespace: 'ns', resourceVersion: '7', labels: { app: 'x' } };

before(async () => {
  server = http.createServer((req, res) => {
    asked.push({ url: req.url!, accept: req.headers.accept });
    res.writeHead(200, { 'Content-Type': 'application/json' });
    if (req.url!.includes('watch=true')) {
      res.end(`${JSON.stringify({ type: 'MODIFIED', object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: { ...metadata, resourceVersion: '8' } } })}\n`);
    } else {
      res.end(JSON.stringify({ kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '7' }, items: [{ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata }] }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'metadata-source-'));
  const kubeconfig = path.join(dir, 'config');
  await writeFile(kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${(server.address() as AddressInfo).port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`);
  client = await KubeClient.fromKubeconfig({ kubeconfigPath: kubeconfig });
});

after(() => {
  client?.close();
  server?.close();
});

describe('metadata-only source', () => {
  it('asks for PartialObjectMetadata on list and watch and hands out objects typed as the resource, metadata only', async () => {
    const source = metadataSource(client, Kinds.ConfigMap, { labelSelector: 'app=x' });
    const page = await source.list({ limit: 500 });
    assert.deepEqual(page.items, [{ apiVersion: 'v1', kind: 'ConfigMap', metadata }]);
    assert.equal(page.resourceVersion, '7');
    const events = await source.watch({ resourceVersion: '7', timeoutSeconds: 5, signal: new AbortController().signal });
    const received = [];
    for await (const event of events) received.push(event);
    assert.deepEqual(received, [{ type: 'MODIFIED', object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { ...metadata, resourceVersion: '8' } } }]);

    assert.equal(asked.length, 2);
    assert.match(asked[0]!.accept ?? '', /^application\/json;as=PartialObjectMetadataList;g=meta\.k8s\.io;v=v1/);
    assert.match(asked[1]!.accept ?? '', /^application\/json;as=PartialObjectMetadata;g=meta\.k8s\.io;v=v1/);
    for (const { url } of asked) assert.match(url, /labelSelector=app%3Dx/);
    assert.doesNotMatch(asked[0]!.url, /accept/i, 'the Accept header is no query parameter');
  });
});
