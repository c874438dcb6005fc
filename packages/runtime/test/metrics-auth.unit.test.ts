// Who may read /metrics, decided by a scripted API server: TokenReview then SubjectAccessReview;
// 401 / 403 / 200 as the reviews say, a failing review never allows, decisions remembered per token.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KubeClient } from '../src/client/client.ts';
import { MetricsAuthorizer } from '../src/manager/metrics-auth.ts';

const users: Record<string, { username: string; groups: string[] }> = { 'reader-token': { username: 'system:serviceaccount:mon:prometheus', groups: ['system:serviceaccounts'] }, 'other-token': { username: 'alice', groups: [] } };
const reviews: Array<{ kind: string; spec: Record<string, unknown> }> = [];
let failReviews = false;
let server: http.Server;
let client: KubeClient;
let dir: string;

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const review = JSON.parse(body) as { kind: string; spec: { token?: string; user?: string; nonResourceAttributes?: { path: string; verb: string } } };
      reviews.push(review);
      res.setHeader('Content-Type', 'application/json');
      if (failReviews) return res.writeHead(503).end(JSON.stringify({ kind: 'Status', reason: 'ServiceUnavailable', message: 'etcd is down' }));
      if (review.kind === 'TokenReview') {
        const user = users[review.spec.token ?? ''];
        return res.end(JSON.stringify({ status: user ? { authenticated: true, user } : { authenticated: false, error: 'invalid bearer token' } }));
      }
      const allowed = review.spec.user === users['reader-token']!.username && review.spec.nonResourceAttributes?.path === '/metrics' && review.spec.nonResourceAttributes.verb === 'get';
      res.end(JSON.stringify({ status: { allowed } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  dir = await mkdtemp(path.join(os.tmpdir(), 'metrics-auth-'));
  const kubeconfig = path.join(dir, 'config');
  await writeFile(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${(server.address() as AddressInfo).port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: operator-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
  );
  client = await KubeClient.fromKubeconfig({ kubeconfigPath: kubeconfig });
});
after(async () => {
  client?.close();
  server?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('metrics authorization', () => {
  it('a token allowed "get /metrics" passes; its user, groups and the non-resource URL are what is reviewed', async () => {
    reviews.length = 0;
    assert.deepEqual(await new MetricsAuthorizer(client).authorize('Bearer reader-token', '/metrics'), { code: 200, reason: 'allowed' });
    assert.deepEqual(reviews.map((r) => r.kind), ['TokenReview', 'SubjectAccessReview']);
    assert.deepEqual(reviews[1]!.spec, { user: 'system:serviceaccount:mon:prometheus', groups: ['system:serviceaccounts'], nonResourceAttributes: { path: '/metrics', verb: 'get' } });
  });

  it('no token or an unknown one: 401; a known user without the right: 403 naming the user', async () => {
    const authorizer = new MetricsAuthorizer(client);
    assert.equal((await authorizer.authorize(undefined, '/metrics')).code, 401);
    assert.equal((await authorizer.authorize('Basic abc', '/metrics')).code, 401);
    assert.deepEqual(await authorizer.authorize('Bearer stolen', '/metrics'), { code: 401, reason: 'invalid bearer token' });
    const refused = await authorizer.authorize('Bearer other-token', '/metrics');
    assert.equal(refused.code, 403);
    assert.match(refused.reason, /alice may not get \/metrics/);
  });

  it('a review that fails is a 500, never an allow, and is not remembered', async () => {
    const authorizer = new MetricsAuthorizer(client);
    failReviews = true;
    const failed = await authorizer.authorize('Bearer reader-token', '/metrics');
    failReviews = false;
    assert.equal(failed.code, 500);
    assert.match(failed.reason, /etcd is down/);
    assert.equal((await authorizer.authorize('Bearer reader-token', '/metrics')).code, 200);
  });

  it('a decision is remembered: repeated scrapes with one token cost no further reviews', async () => {
    const authorizer = new MetricsAuthorizer(client);
    reviews.length = 0;
    for (let i = 0; i < 5; i++) assert.equal((await authorizer.authorize('Bearer reader-token', '/metrics')).code, 200);
    for (let i = 0; i < 5; i++) assert.equal((await authorizer.authorize('Bearer other-token', '/metrics')).code, 403);
    assert.equal(reviews.length, 4, 'two reviews per token');
  });
});
