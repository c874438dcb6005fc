// Kubeconfig settings the transport must honour, against loopback servers: tls-server-name (a TLS
// server whose certificate names another host than the address dialled), proxy-url (an HTTP
// proxy that tunnels or forwards), and credentials re-read after a 401 (token file, exec plugin).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { chmod, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { KubeClient } from '../src/client/client.ts';
import { ApiError } from '../src/client/errors.ts';
import { Kinds } from '../src/client/resource.ts';
import { makeCertificates, type TestCertificates } from './certificates.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'transport-test-'));
const serverName = 'api.cluster.test';

interface Seen {
  authorization?: string;
  sni?: string | false | null;
}

/** Answers every GET with a ConfigMap, to callers presenting a token in `acceptedTokens`. */
function apiHandler(seen: Seen[], acceptedTokens: () => string[]): http.RequestListener {
  return (req, res) => {
    seen.push({ authorization: req.headers.authorization, sni: (req.socket as TLSSocket).servername });
    const token = req.headers.authorization?.replace(/^Bearer /, '') ?? '';
    if (!acceptedTokens().includes(token)) {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', code: 401, reason: 'Unauthorized', message: 'Unauthorized' }));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ metadata: { name: 'x', namespace: 'ns' } }));
  };
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

let kubeconfigCount = 0;
function writeKubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  const file = path.join(dir, `kubeconfig-${++kubeconfigCount}`);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster }],
      users: [{ name: 'u', user }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  return file;
}

/** A loopback HTTP proxy: CONNECT tunnels and absolute-URL forwarding, recording what it did. */
interface ProxyLog {
  tunnels: string[];
  forwarded: string[];
  authorizations: Array<string | undefined>;
}
function startProxy(log: ProxyLog, refuse = false): http.Server {
  const proxy = http.createServer((req, res) => {
    log.forwarded.push(req.url!);
    log.authorizations.push(req.headers['proxy-authorization']);
    const upstream = http.request(req.url!, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    req.pipe(upstream);
  });
  proxy.on('connect', (req: http.IncomingMessage, client: net.Socket) => {
    log.tunnels.push(req.url!);
    log.authorizations.push(req.headers['proxy-authorization']);
    if (refuse) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n');
      return;
    }
    const [host, port] = req.url!.split(':');
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  return proxy;
}

let certs: TestCertificates;
let tlsServer: https.Server;
let tlsPort: number;
const tlsSeen: Seen[] = [];
const caData = () => Buffer.from(certs.ca).toString('base64');
const closers: Array<() => void> = [];

before(async () => {
  certs = makeCertificates(dir, [`DNS:${serverName}`]);
  tlsServer = https.createServer({ cert: certs.cert, key: certs.key }, apiHandler(tlsSeen, () => ['t']));
  tlsPort = await listen(tlsServer);
  closers.push(() => tlsServer.close());
});

after(async () => {
  for (const close of closers) close();
  await rm(dir, { recursive: true, force: true });
});

async function clientFor(kubeconfigPath: string): Promise<KubeClient> {
  const client = await KubeClient.fromKubeconfig({ kubeconfigPath });
  closers.unshift(() => client.close());
  return client;
}

describe('tls-server-name', () => {
  it('checks the server certificate against tls-server-name and sends it as SNI', async () => {
    const client = await clientFor(writeKubeconfig({ server: `https://127.0.0.1:${tlsPort}`, 'certificate-authority-data': caData(), 'tls-server-name': serverName }, { token: 't' }));
    tlsSeen.length = 0;
    const got = await client.get(Kinds.ConfigMap, 'x', 'ns');
    assert.equal(got.metadata.name, 'x');
    assert.equal(tlsSeen[0]?.sni, serverName);
  });

  it('without it, a certificate for another name is refused', async () => {
    const client = await clientFor(writeKubeconfig({ server: `https://127.0.0.1:${tlsPort}`, 'certificate-authority-data': caData() }, { token: 't' }));
    await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => err instanceof ApiError && err.code === 0 && /altnames|127\.0\.0\.1/.test(err.message));
  });
});

describe('proxy-url', () => {
  it('tunnels https through CONNECT, TLS end to end, one kept-alive tunnel, proxy credentials sent', async () => {
    const log: ProxyLog = { tunnels: [], forwarded: [], authorizations: [] };
    const proxy = startProxy(log);
    const proxyPort = await listen(proxy);
    closers.push(() => proxy.close());
    const client = await clientFor(
      writeKubeconfig(
        { server: `https://127.0.0.1:${tlsPort}`, 'certificate-authority-data': caData(), 'tls-server-name': serverName, 'proxy-url': `http://scott:tiger@127.0.0.1:${proxyPort}` },
        { token: 't' },
      ),
    );
    tlsSeen.length = 0;
    for (let i = 0; i < 3; i++) assert.equal((await client.get(Kinds.ConfigMap, 'x', 'ns')).metadata.name, 'x');
    assert.deepEqual(log.tunnels, [`127.0.0.1:${tlsPort}`], 'one tunnel, reused');
    assert.deepEqual(log.authorizations, [`Basic ${Buffer.from('scott:tiger').toString('base64')}`]);
    assert.deepEqual(tlsSeen.map((s) => [s.sni, s.authorization]), Array(3).fill([serverName, 'Bearer t']), 'TLS and the bearer token reached the server');
  });

  it('forwards plain-http requests by absolute URL', async () => {
    const seen: Seen[] = [];
    const api = http.createServer(apiHandler(seen, () => ['t']));
    const apiPort = await listen(api);
    const log: ProxyLog = { tunnels: [], forwarded: [], authorizations: [] };
    const proxy = startProxy(log);
    const proxyPort = await listen(proxy);
    closers.push(() => api.close(), () => proxy.close());
    const client = await clientFor(writeKubeconfig({ server: `http://127.0.0.1:${apiPort}`, 'insecure-skip-tls-verify': true, 'proxy-url': `http://127.0.0.1:${proxyPort}` }, { token: 't' }));
    await client.get(Kinds.ConfigMap, 'x', 'ns');
    assert.deepEqual(log.forwarded, [`http://127.0.0.1:${apiPort}/api/v1/namespaces/ns/configmaps/x`]);
    assert.equal(seen.length, 1);
  });

  it('a proxy refusing the tunnel fails the request with an error naming the proxy', async () => {
    const log: ProxyLog = { tunnels: [], forwarded: [], authorizations: [] };
    const proxy = startProxy(log, true);
    const proxyPort = await listen(proxy);
    closers.push(() => proxy.close());
    const client = await clientFor(writeKubeconfig({ server: `https://127.0.0.1:${tlsPort}`, 'certificate-authority-data': caData(), 'proxy-url': `http://127.0.0.1:${proxyPort}` }, { token: 't' }));
    await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => err instanceof ApiError && err.code === 0 && err.message.includes(`proxy 127.0.0.1:${proxyPort} refused the tunnel`) && err.message.includes('407'));
  });

  it('a proxy URL of an unsupported scheme is a load error, never bypassed', async () => {
    const file = writeKubeconfig({ server: `https://127.0.0.1:${tlsPort}`, 'certificate-authority-data': caData(), 'proxy-url': 'socks5://127.0.0.1:1080' }, { token: 't' });
    await assert.rejects(KubeClient.fromKubeconfig({ kubeconfigPath: file }), /proxy-url socks5:\/\/127\.0\.0\.1:1080: only http:\/\/ proxies are supported/);
  });
});

describe('credentials after a 401', () => {
  let accepted: string[] = [];
  const seen: Seen[] = [];
  let apiPort: number;
  before(async () => {
    const api = http.createServer(apiHandler(seen, () => accepted));
    apiPort = await listen(api);
    closers.push(() => api.close());
  });
  const cluster = () => ({ server: `http://127.0.0.1:${apiPort}`, 'insecure-skip-tls-verify': true });

  it('a rotated token file is read again and the request retried once with the new token', async () => {
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, 'first');
    accepted = ['first'];
    const client = await clientFor(writeKubeconfig(cluster(), { 'token-file': tokenFile }));
    await client.get(Kinds.ConfigMap, 'x', 'ns');
    writeFileSync(tokenFile, 'second');
    accepted = ['second'];
    seen.length = 0;
    assert.equal((await client.get(Kinds.ConfigMap, 'x', 'ns')).metadata.name, 'x');
    assert.deepEqual(seen.map((s) => s.authorization), ['Bearer first', 'Bearer second']);
  });

  it('a 401 that persists after re-reading is returned after one attempt, not retried with the same token', async () => {
    const tokenFile = path.join(dir, 'token-refused');
    writeFileSync(tokenFile, 'refused');
    accepted = ['something-else'];
    const client = await clientFor(writeKubeconfig(cluster(), { 'token-file': tokenFile }));
    seen.length = 0;
    await assert.rejects(client.get(Kinds.ConfigMap, 'x', 'ns'), (err: unknown) => err instanceof ApiError && err.code === 401 && err.reason === 'Unauthorized');
    assert.deepEqual(seen.map((s) => s.authorization), ['Bearer refused']);
  });

  it('an exec plugin is run again once for concurrent 401s, and every request succeeds with its new token', async () => {
    const tokenFile = path.join(dir, 'exec-token');
    const runs = path.join(dir, 'exec-runs');
    const plugin = path.join(dir, 'credential-plugin.sh');
    writeFileSync(runs, '');
    writeFileSync(tokenFile, 'exec-first');
    writeFileSync(
      plugin,
      `#!/bin/sh\necho run >> '${runs}'\nprintf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"2999-01-01T00:00:00Z"}}' "$(cat '${tokenFile}')"\n`,
    );
    await chmod(plugin, 0o755);
    accepted = ['exec-first'];
    const client = await clientFor(writeKubeconfig(cluster(), { exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: plugin } }));
    await client.get(Kinds.ConfigMap, 'x', 'ns');
    writeFileSync(tokenFile, 'exec-second');
    accepted = ['exec-second'];
    seen.length = 0;
    const answers = await Promise.all(Array.from({ length: 5 }, () => client.get(Kinds.ConfigMap, 'x', 'ns')));
    assert.equal(answers.length, 5);
    assert.equal(readFileSync(runs, 'utf8').trim().split('\n').length, 2, 'the plugin ran at load and once after the 401s');
    assert.equal(seen.filter((s) => s.authorization === 'Bearer exec-second').length, 5);
  });
});
