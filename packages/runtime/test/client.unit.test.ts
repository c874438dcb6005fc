import assert from 'node:assert/strict';
import { writeFile, mkdtemp } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KubeClient } from '../src/client/client.ts';
import { ApiError, ifFound, isAlreadyExists, isConflict, isForbidden, isGone } from '../src/client/errors.ts';
import { Kinds } from '../src/client/resource.ts';
import { RuntimeMetrics } from '../src/metrics/runtime-metrics.ts';

type Handler = (req: http.IncomingMessage, body: string) => { code: number; body?: unknown; headers?: Record<string, string> };

/** A scripted HTTP server standing in for the API server: answers from a queue of handlers. */
let server: http.Server;
let handlers: Handler[] = [];
const seen: Array<{ method: string; url: string; contentType?: string; authorization?: string; body: string }> = [];
let client: KubeClient;
let metrics: RuntimeMetrics;

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, contentType: req.headers['content-type'], authorization: req.headers.authorization, body });
      const handler: Handler = handlers.shift() ?? (() => ({ code: 500, body: { kind: 'Status', message: 'no handler' } }));
      const answer = handler(req, body);
      res.writeHead(answer.code, { 'Content-Type': 'application/json', ...answer.headers });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  metrics = new RuntimeMetrics();
  client = await KubeClient.fromKubeconfig({ kubeconfigPath: await writeKubeconfig(), metrics });
});

/** A kubeconfig naming the scripted server, with a bearer token. */
async function writeKubeconfig(): Promise<string> {
  const kubeconfig = path.join(await mkdtemp(path.join(os.tmpdir(), 'client-test-')), 'config');
  await writeFile(kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${(server.address() as AddressInfo).port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`);
  return kubeconfig;
}

after(() => {
  client?.close();
  server?.close();
});

describe('client', () => {
  it('turns a Status body into a typed ApiError with code and reason', async () => {
    handlers = [() => ({ code: 404, body: { kind: 'Status', reason: 'NotFound', message: 'configmaps "x" not found' } })];
    await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.code, 404);
      assert.equal(err.reason, 'NotFound');
      assert.equal(err.message, 'configmaps "x" not found');
      return true;
    });
    handlers = [() => ({ code: 409, body: 'not a status' })];
    await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => err instanceof ApiError && err.reason === 'Conflict' && err.retriable);
  });

  it('keeps the reason the server names even where one code carries several', async () => {
    const answers: Array<[number, string]> = [
      [409, 'AlreadyExists'],
      [409, 'Conflict'],
      [410, 'Expired'],
      [500, 'ServerTimeout'],
      [422, 'SomeReasonOfANewerServer'],
    ];
    for (const [code, reason] of answers) {
      handlers = [() => ({ code, body: { kind: 'Status', reason, message: `${reason} here` } })];
      await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => {
        assert.ok(err instanceof ApiError);
        assert.deepEqual([err.code, err.reason, err.message], [code, reason, `${reason} here`]);
        return true;
      });
    }
    handlers = [() => ({ code: 409, body: { kind: 'Status', reason: 'AlreadyExists' } })];
    await assert.rejects(client.create(Kinds.ConfigMap, { metadata: { name: 'x', namespace: 'ns' } }), (err: unknown) => isAlreadyExists(err) && !isConflict(err));
    handlers = [() => ({ code: 410, body: { kind: 'Status', reason: 'Expired' } })];
    await assert.rejects(client.list(Kinds.ConfigMap, { namespace: 'ns' }), (err: unknown) => isGone(err));
    handlers = [() => ({ code: 403, body: { kind: 'Status', reason: '' } })];
    await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => isForbidden(err));
  });

  it('ifFound: the object, undefined for NotFound, any other failure passed on', async () => {
    handlers = [() => ({ code: 200, body: { metadata: { name: 'x', namespace: 'ns' } } })];
    assert.equal((await ifFound(client.get(Kinds.ConfigMap, 'x', 'ns')))?.metadata.name, 'x');
    handlers = [() => ({ code: 404, body: { kind: 'Status', reason: 'NotFound' } })];
    assert.equal(await ifFound(client.get(Kinds.ConfigMap, 'x', 'ns')), undefined);
    handlers = [() => ({ code: 403, body: { kind: 'Status', reason: 'Forbidden' } })];
    await assert.rejects(ifFound(client.get(Kinds.ConfigMap, 'x', 'ns')), (err: unknown) => isForbidden(err));
  });

  it('honours Retry-After on 429 and retries', async () => {
    const start = Date.now();
    handlers = [
      () => ({ code: 429, body: { kind: 'Status', reason: 'TooManyRequests' }, headers: { 'Retry-After': '1' } }),
      () => ({ code: 200, body: { metadata: { name: 'x', namespace: 'ns' } } }),
    ];
    const got = await client.get(Kinds.ConfigMap, 'x', 'ns');
    assert.equal(got.metadata.name, 'x');
    assert.ok(Date.now() - start >= 950, `waited ${Date.now() - start} ms for Retry-After: 1`);
  });

  it('fails a 429 without Retry-After at once, as client-go does (an eviction a disruption budget refuses)', async () => {
    handlers = [
      () => ({ code: 429, body: { kind: 'Status', reason: 'TooManyRequests', message: "Cannot evict pod as it would violate the pod's disruption budget." } }),
      () => ({ code: 200, body: { metadata: { name: 'x', namespace: 'ns' } } }),
    ];
    await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => err instanceof ApiError && err.code === 429 && /disruption budget/.test(err.message));
  });

  it('pages through lists with continue tokens and returns the snapshot resourceVersion', async () => {
    seen.length = 0;
    handlers = [
      () => ({ code: 200, body: { items: [{ metadata: { name: 'a' } }], metadata: { continue: 'next', resourceVersion: '7' } } }),
      () => ({ code: 200, body: { items: [{ metadata: { name: 'b' } }], metadata: { resourceVersion: '7' } } }),
    ];
    const all = await client.listAll(Kinds.ConfigMap, { namespace: 'ns', labelSelector: 'app=x' });
    assert.deepEqual(all.items.map((i) => i.metadata.name), ['a', 'b']);
    assert.equal(all.metadata.resourceVersion, '7');
    assert.match(seen[0]!.url, /^\/api\/v1\/namespaces\/ns\/configmaps\?/);
    assert.match(seen[0]!.url, /limit=500/);
    assert.match(seen[0]!.url, /labelSelector=app%3Dx/);
    assert.match(seen[1]!.url, /continue=next/);
  });

  it('sends server-side apply, patches and deletes as the API server expects, with the bearer token', async () => {
    seen.length = 0;
    handlers = [() => ({ code: 200, body: { metadata: { name: 'd' } } }), () => ({ code: 200, body: { metadata: { name: 'd' } } }), () => ({ code: 200, body: {} })];
    await client.apply(Kinds.Deployment, { metadata: { name: 'd', namespace: 'ns' } }, { fieldManager: 'me', force: true });
    await client.patch(Kinds.Deployment, 'd', 'ns', [{ op: 'remove', path: '/metadata/finalizers/0' }], 'json');
    await client.delete(Kinds.Deployment, 'd', 'ns', { propagationPolicy: 'Foreground' });
    assert.equal(seen[0]!.authorization, 'Bearer secret-token');
    assert.equal(seen[0]!.method, 'PATCH');
    assert.equal(seen[0]!.url, '/apis/apps/v1/namespaces/ns/deployments/d?fieldManager=me&force=true');
    assert.equal(seen[0]!.contentType, 'application/apply-patch+yaml');
    assert.deepEqual(JSON.parse(seen[0]!.body), { metadata: { name: 'd', namespace: 'ns' }, apiVersion: 'apps/v1', kind: 'Deployment' });
    assert.equal(seen[1]!.contentType, 'application/json-patch+json');
    assert.equal(seen[2]!.method, 'DELETE');
    assert.equal(JSON.parse(seen[2]!.body).propagationPolicy, 'Foreground');
  });

  it('withOwnRateLimit: a client whose requests never wait behind the first client\'s for tokens, at the same rate', async () => {
    const limited = await KubeClient.fromKubeconfig({ kubeconfigPath: await writeKubeconfig(), rateLimit: { qps: 1, burst: 1 } });
    try {
      const own = limited.withOwnRateLimit();
      const answer = () => ({ code: 200, body: { metadata: { name: 'x' } } });
      handlers = [answer, answer, answer, answer];
      await limited.get(Kinds.ConfigMap, 'x', 'ns'); // the one token
      const queued = limited.get(Kinds.ConfigMap, 'x', 'ns'); // due in 1 s
      const started = performance.now();
      await own.get(Kinds.ConfigMap, 'x', 'ns');
      assert.ok(performance.now() - started < 500, 'answered without waiting behind the queued request');
      await own.get(Kinds.ConfigMap, 'x', 'ns');
      assert.ok(performance.now() - started >= 900, 'its own bucket has the same rate: its second request waits a second');
      await queued;
    } finally {
      limited.close();
    }
  });

  it('counts every request by code and method', async () => {
    const values = (await metrics.restRequests.get()).values;
    const count = (code: string, method: string) => values.find((v) => v.labels.code === code && v.labels.method === method)?.value ?? 0;
    assert.ok(count('429', 'GET') >= 1);
    assert.ok(count('404', 'GET') >= 1);
    assert.ok(count('200', 'PATCH') >= 2);
  });
});
