// Kubeconfig settings against the real API server: tls-server-name (the server dialled at an
// address its certificate does not name), proxy-url (through a loopback CONNECT proxy) and a
// rotated token file (the stale token's 401 makes the client read the file again and retry), and
// rotated client certificate files (the same, with new connections for the new certificate).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import { localTestEnv, realNode } from '@iot-operator/local-cluster';
import { ApiError, Kinds, KubeClient, RuntimeMetrics } from '../src/index.ts';
import { serviceAccountKubeconfig, type TestEnv } from '../src/testing/index.ts';
import { makeCertificates } from './certificates.ts';

interface KubeconfigFile {
  clusters: Array<{ name: string; cluster: Record<string, unknown> }>;
  users: Array<{ name: string; user: Record<string, unknown> }>;
  contexts: Array<{ name: string; context: { cluster: string; user: string } }>;
  'current-context': string;
}

// The API server as a pod reaches it: at a non-loopback address (the real node's bridge gateway,
// forwarded to the API server; loopback addresses are never proxied).
const podAddress = '10.244.0.1';
const node = await realNode(await localTestEnv());
const withoutRealNode = node.available ? false : node.reason;

let env: TestEnv;
let ns: string;
let dir: string;
let admin: KubeconfigFile;
const closers: Array<() => void> = [];

before(async () => {
  env = await localTestEnv();
  ns = await env.namespace('client-config');
  dir = await mkdtemp(path.join(os.tmpdir(), 'client-config-'));
  admin = parse(await readFile(env.kubeconfigPath, 'utf8')) as KubeconfigFile;
  await env.client.create(Kinds.ConfigMap, { metadata: { name: 'probe', namespace: ns }, data: { k: 'v' } });
});
after(async () => {
  for (const close of closers) close();
  await env?.cleanup();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The admin kubeconfig with its cluster and user entries changed. */
async function kubeconfig(name: string, cluster: (c: Record<string, unknown>) => Record<string, unknown>, user?: Record<string, unknown>): Promise<string> {
  const context = admin.contexts.find((c) => c.name === admin['current-context'])!.context;
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: cluster(admin.clusters.find((c) => c.name === context.cluster)!.cluster) }],
    users: [{ name: 'u', user: user ?? admin.users.find((u) => u.name === context.user)!.user }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'x',
  };
  const file = path.join(dir, `${name}.yaml`);
  await writeFile(file, stringify(config), { mode: 0o600 });
  return file;
}

async function listen(server: net.Server, host = '127.0.0.1'): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(() => server.close());
  return (server.address() as AddressInfo).port;
}

async function clientFor(file: string, metrics?: RuntimeMetrics): Promise<KubeClient> {
  const client = await KubeClient.fromKubeconfig({ kubeconfigPath: file, metrics });
  closers.unshift(() => client.close());
  return client;
}

const apiServer = () => new URL(String(admin.clusters[0]!.cluster.server));

/** An HTTP CONNECT proxy on loopback that records the target of every tunnel. */
async function connectProxy(): Promise<{ tunnels: string[]; proxyPort: number }> {
  const tunnels: string[] = [];
  const proxy = http.createServer((_req, res) => res.writeHead(405).end());
  proxy.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
    tunnels.push(req.url!);
    const [host, port] = req.url!.split(':');
    const upstream = net.connect(Number(port), host, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      socket.pipe(upstream).pipe(socket);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  return { tunnels, proxyPort: await listen(proxy) };
}


describe('client configuration on the real API server', () => {
  it('tls-server-name: reached at an address its certificate does not name, the server is verified by that name', async () => {
    // 127.0.0.2 is loopback too, but not in the API server's certificate.
    const forwarder = net.createServer((socket) => {
      const upstream = net.connect(Number(apiServer().port), apiServer().hostname);
      socket.pipe(upstream).pipe(socket);
      upstream.on('error', () => socket.destroy());
      socket.on('error', () => upstream.destroy());
    });
    const port = await listen(forwarder, '127.0.0.2');
    const named = await clientFor(await kubeconfig('tls-server-name', (c) => ({ ...c, server: `https://127.0.0.2:${port}`, 'tls-server-name': 'kubernetes.default.svc' })));
    assert.equal((await named.get(Kinds.ConfigMap, 'probe', ns)).metadata.name, 'probe');
    const unnamed = await clientFor(await kubeconfig('no-tls-server-name', (c) => ({ ...c, server: `https://127.0.0.2:${port}` })));
    await assert.rejects(unnamed.get(Kinds.ConfigMap, 'probe', ns), (err: unknown) => err instanceof ApiError && err.code === 0 && /127\.0\.0\.2/.test(err.message));
  });

  it('proxy-url: every request and watch goes through the HTTP proxy in a CONNECT tunnel', async () => {
    const { tunnels, proxyPort } = await connectProxy();
    const metrics = new RuntimeMetrics();
    const client = await clientFor(await kubeconfig('proxy-url', (c) => ({ ...c, 'proxy-url': `http://127.0.0.1:${proxyPort}` })), metrics);
    assert.equal((await client.get(Kinds.ConfigMap, 'probe', ns)).metadata.name, 'probe');
    const stream = await client.watch(Kinds.ConfigMap, { namespace: ns, resourceVersion: '0', timeoutSeconds: 5 });
    stream.close();
    assert.ok(tunnels.length >= 1 && tunnels.every((t) => t === apiServer().host), `tunnels to the API server only: ${tunnels.join(', ')}`);
    const host = (await metrics.restRequests.get()).values.map((v) => v.labels.host);
    assert.ok(host.every((h) => h === apiServer().host), 'metrics name the API server, not the proxy');
  });

  it('a token file rotated after the client loaded it: the 401 re-reads it and the request succeeds', async () => {
    const manifest = path.join(dir, 'reader.yaml');
    await writeFile(
      manifest,
      [
        { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'reader' } },
        { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'reader' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }] },
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: 'reader' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
          subjects: [{ kind: 'ServiceAccount', name: 'reader' }],
        },
      ]
        .map((d) => JSON.stringify(d))
        .join('\n---\n'),
    );
    const account = await serviceAccountKubeconfig(env, ns, [manifest]);
    closers.push(() => void account.cleanup());
    const token = (parse(await readFile(account.file, 'utf8')) as KubeconfigFile).users[0]!.user.token as string;
    const tokenFile = path.join(dir, 'token');
    await writeFile(tokenFile, 'a-token-that-was-revoked');
    const client = await clientFor(await kubeconfig('token-file', (c) => c, { 'token-file': tokenFile }));
    await writeFile(tokenFile, token);
    assert.equal((await client.get(Kinds.ConfigMap, 'probe', ns)).metadata.name, 'probe');
  });

  it('client certificate files rotated after the client loaded them: the 401 re-reads them and the request succeeds on new connections', async () => {
    // One certificate the API server does not trust (another CA), one it does (the cluster's CA).
    const stranger = makeCertificates(await mkdtemp(path.join(dir, 'stranger-')), ['DNS:stranger.test']);
    const pki = path.join(path.dirname(env.kubeconfigPath), 'pki');
    const file = (name: string) => path.join(dir, name);
    const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', file('trusted.key'), '-out', file('trusted.csr'), '-subj', '/O=system:masters/CN=rotated-user');
    openssl('x509', '-req', '-in', file('trusted.csr'), '-CA', path.join(pki, 'ca.crt'), '-CAkey', path.join(pki, 'ca.key'), '-CAcreateserial', '-CAserial', file('ca.srl'), '-out', file('trusted.crt'), '-days', '1');

    await copyFile(stranger.certFile, file('client.crt'));
    await copyFile(stranger.keyFile, file('client.key'));
    const client = await clientFor(await kubeconfig('client-certificate', (c) => c, { 'client-certificate': file('client.crt'), 'client-key': file('client.key') }));
    await assert.rejects(client.get(Kinds.ConfigMap, 'probe', ns), (err: unknown) => err instanceof ApiError && err.code === 401, 'a certificate of another CA is refused');

    await copyFile(file('trusted.crt'), file('client.crt'));
    await copyFile(file('trusted.key'), file('client.key'));
    assert.equal((await client.get(Kinds.ConfigMap, 'probe', ns)).metadata.name, 'probe');
  });

  it('HTTPS_PROXY is used for an API server at a non-loopback address, and NO_PROXY with a CIDR bypasses it', { skip: withoutRealNode }, async () => {
    const { tunnels, proxyPort } = await connectProxy();
    const file = await kubeconfig('environment-proxy', (c) => ({ ...c, server: `https://${podAddress}:${apiServer().port}` }));
    const saved = { HTTPS_PROXY: process.env.HTTPS_PROXY, NO_PROXY: process.env.NO_PROXY };
    try {
      process.env.HTTPS_PROXY = `127.0.0.1:${proxyPort}`;
      delete process.env.NO_PROXY;
      const proxied = await clientFor(file);
      assert.equal((await proxied.get(Kinds.ConfigMap, 'probe', ns)).metadata.name, 'probe');
      assert.deepEqual([...new Set(tunnels)], [`${podAddress}:${apiServer().port}`]);

      process.env.NO_PROXY = 'example.com,10.244.0.0/16';
      const direct = await clientFor(file);
      const before = tunnels.length;
      assert.equal((await direct.get(Kinds.ConfigMap, 'probe', ns)).metadata.name, 'probe');
      assert.equal(tunnels.length, before, 'no tunnel: NO_PROXY covers the address');
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});
