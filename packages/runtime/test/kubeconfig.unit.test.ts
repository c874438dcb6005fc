// How the kubeconfig loader picks files, merges them and reads a context, as kubectl does.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { kubeconfigFiles, loadConnection } from '../src/client/kubeconfig.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'kubeconfig-test-'));
let count = 0;

function write(doc: Record<string, unknown>, where = dir): string {
  const file = path.join(where, `config-${++count}`);
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'Config', ...doc }));
  return file;
}

function config(context: string, server: string, user: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    clusters: [{ name: context, cluster: { server, ...extra } }],
    users: [{ name: context, user }],
    contexts: [{ name: context, context: { cluster: context, user: context } }],
    'current-context': context,
  };
}

describe('kubeconfig files', () => {
  it('uses the explicit file, else $KUBECONFIG (missing files skipped), else nothing when ~/.kube/config is absent', () => {
    const a = write({});
    const missing = path.join(dir, 'missing');
    assert.deepEqual(kubeconfigFiles(a, { KUBECONFIG: missing }), [a]);
    assert.deepEqual(kubeconfigFiles(undefined, { KUBECONFIG: [missing, a].join(path.delimiter) }), [a]);
  });
});

describe('loading a connection', () => {
  it('reads server, CA, skip-verify, server name, proxy and a bearer token from the current context', async () => {
    writeFileSync(path.join(dir, 'ca.pem'), 'CA');
    const file = write(
      config('one', 'https://10.0.0.1:6443', { token: 'secret', as: 'alice' }, {
        'certificate-authority': 'ca.pem',
        'tls-server-name': 'api.test',
        'proxy-url': 'http://proxy:3128',
      }),
    );
    const c = await loadConnection(file, {});
    assert.equal(c.server, 'https://10.0.0.1:6443');
    assert.equal(String(c.tls.ca), 'CA', 'a relative CA path is resolved against the kubeconfig file');
    assert.equal(c.tls.servername, 'api.test');
    assert.equal(c.proxyUrl, 'http://proxy:3128');
    assert.deepEqual(await c.credentials.current(), { Authorization: 'Bearer secret', 'Impersonate-User': 'alice' });
  });

  it('reads a client certificate from inline data and basic auth from username and password', async () => {
    const file = write(
      config('cert', 'https://h', {
        'client-certificate-data': Buffer.from('CERT').toString('base64'),
        'client-key-data': Buffer.from('KEY').toString('base64'),
        username: 'u',
        password: 'p',
      }, { 'insecure-skip-tls-verify': true }),
    );
    const c = await loadConnection(file, {});
    assert.equal(String(c.tls.cert), 'CERT');
    assert.equal(String(c.tls.key), 'KEY');
    assert.equal(c.tls.rejectUnauthorized, false);
    assert.deepEqual(await c.credentials.current(), { Authorization: `Basic ${Buffer.from('u:p').toString('base64')}` });
  });

  it('re-reads a token file on reload', async () => {
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, 'one\n');
    const c = await loadConnection(write(config('tf', 'https://h', { tokenFile })), {});
    assert.deepEqual(await c.credentials.current(), { Authorization: 'Bearer one' });
    writeFileSync(tokenFile, 'two\n');
    assert.deepEqual(await c.credentials.reload(), { Authorization: 'Bearer two' });
  });

  it('merges $KUBECONFIG files: the first file naming an entry or a current-context wins', async () => {
    const first = write({ ...config('shared', 'https://first', { token: 'first' }) });
    const second = write({ ...config('shared', 'https://second', { token: 'second' }), 'current-context': 'other' });
    const c = await loadConnection(undefined, { KUBECONFIG: [first, second].join(path.delimiter) });
    assert.equal(c.server, 'https://first');
    assert.deepEqual(await c.credentials.current(), { Authorization: 'Bearer first' });
  });

  it('names the file and the missing entry when the context cannot be used', async () => {
    const noContext = write({ ...config('a', 'https://h', {}), 'current-context': 'b' });
    await assert.rejects(loadConnection(noContext, {}), new RegExp(`kubeconfig ${noContext}: current-context "b" is not among its contexts`));
    const noServer = write({ ...config('a', '', {}) });
    await assert.rejects(loadConnection(noServer, {}), /context "a" names no cluster with a server/);
    await assert.rejects(loadConnection(undefined, { KUBECONFIG: path.join(dir, 'missing') }), /no Kubernetes cluster configured/);
  });

  it('hands exec-plugin users to @kubernetes/client-node, which runs the plugin', async () => {
    const plugin = path.join(dir, 'plugin.sh');
    writeFileSync(
      plugin,
      '#!/bin/sh\necho \'{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"from-plugin"}}\'\n',
      { mode: 0o755 },
    );
    const sub = path.join(dir, 'exec');
    mkdirSync(sub, { recursive: true });
    const file = write(config('x', 'https://h', { exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: plugin } }), sub);
    const c = await loadConnection(file, {});
    assert.equal(c.server, 'https://h');
    assert.deepEqual(await c.credentials.current(), { Authorization: 'Bearer from-plugin' });
  });
});
