// The webhook certificate kept in a Secret of the real API server: created once and then reused
// (a restart keeps the CA), one certificate for replicas starting together, a Secret for other
// names or holding garbage replaced with its other keys kept, and the files written from it
// served by an HTTPS server that a client trusting ca.crt accepts.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { localTestEnv } from '@iot-operator/local-cluster';
import { ensureWebhookCertificateSecret, Kinds, makeWebhookCertificate, usableCertificate, writeWebhookCertificate, type KubeObject } from '../src/index.ts';
import type { TestEnv } from '../src/testing/index.ts';

type Secret = KubeObject & { type?: string; data?: Record<string, string> };

let env: TestEnv;
let ns: string;
const names = ['DNS:operator-webhook.ops.svc', 'IP:127.0.0.1'];
const decode = (secret: Secret, key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');
const ensure = (name: string) => ensureWebhookCertificateSecret(env.client, { namespace: ns, name, names, managedBy: 'iot-operator' });

before(async () => {
  env = await localTestEnv();
  ns = await env.namespace('rt-webhook-cert');
});
after(async () => {
  await env?.cleanup();
});

describe('the webhook certificate in a Secret', () => {
  it('is created once, then read back unchanged', async () => {
    const first = await ensure('webhook-cert');
    assert.ok(usableCertificate(first, names));
    const secret = await env.client.get<Secret>(Kinds.Secret, 'webhook-cert', ns);
    assert.equal(secret.type, 'kubernetes.io/tls');
    assert.equal(secret.metadata.labels?.['app.kubernetes.io/managed-by'], 'iot-operator');
    assert.deepEqual({ ca: decode(secret, 'ca.crt'), cert: decode(secret, 'tls.crt'), key: decode(secret, 'tls.key') }, first);

    const second = await ensure('webhook-cert');
    assert.deepEqual(second, first, 'the same certificate, so the same CA');
    const reread = await env.client.get<Secret>(Kinds.Secret, 'webhook-cert', ns);
    assert.equal(reread.metadata.resourceVersion, secret.metadata.resourceVersion, 'not written again');
  });

  it('is one certificate for replicas starting together', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => ensure('raced-cert')));
    for (const result of results) assert.deepEqual(result, results[0], 'every caller got the same certificate');
    const secret = await env.client.get<Secret>(Kinds.Secret, 'raced-cert', ns);
    assert.equal(decode(secret, 'tls.crt'), results[0]!.cert, 'the one in the Secret');
    const managed = await env.client.list(Kinds.Secret, { namespace: ns, labelSelector: 'app.kubernetes.io/managed-by=iot-operator' });
    assert.deepEqual(managed.items.map((s) => s.metadata.name).sort(), ['raced-cert', 'webhook-cert']);
  });

  it('replaces a certificate for other names, keeping the Secret\'s other keys and labels', async () => {
    const old = makeWebhookCertificate(['DNS:someone-else.ops.svc']);
    await env.client.create<Secret>(Kinds.Secret, {
      metadata: { name: 'other-names', namespace: ns, labels: { team: 'ops' } },
      type: 'kubernetes.io/tls',
      stringData: { 'ca.crt': old.ca, 'tls.crt': old.cert, 'tls.key': old.key, 'extra.txt': 'kept' },
    });
    const made = await ensure('other-names');
    assert.notEqual(made.ca, old.ca, 'a new CA');
    assert.ok(usableCertificate(made, names));
    const secret = await env.client.get<Secret>(Kinds.Secret, 'other-names', ns);
    assert.equal(decode(secret, 'tls.crt'), made.cert);
    assert.equal(decode(secret, 'extra.txt'), 'kept');
    assert.equal(secret.metadata.labels?.team, 'ops');
  });

  it('replaces garbage, keeping the Secret\'s other keys', async () => {
    await env.client.create<Secret>(Kinds.Secret, { metadata: { name: 'garbage', namespace: ns }, type: 'Opaque', stringData: { 'tls.crt': 'not a certificate', 'config.yml': 'a: 1' } });
    const made = await ensure('garbage');
    assert.ok(usableCertificate(made, names));
    const secret = await env.client.get<Secret>(Kinds.Secret, 'garbage', ns);
    assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ['ca.crt', 'config.yml', 'tls.crt', 'tls.key']);
    assert.equal(decode(secret, 'tls.key'), made.key);
    assert.equal(decode(secret, 'config.yml'), 'a: 1');
  });

  it('written to files, is served over HTTPS to a client trusting ca.crt, and only to one', async () => {
    const certificate = await ensure('webhook-cert');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'webhook-cert-files-'));
    const file = (name: string) => readFileSync(path.join(dir, name));
    writeWebhookCertificate(dir, certificate);
    const server = https.createServer({ cert: file('tls.crt'), key: file('tls.key') }, (_req, res) => res.end('served'));
    try {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const get = (ca: Buffer | string) =>
        new Promise<string>((resolve, reject) => {
          https.get({ host: '127.0.0.1', port, path: '/', ca, agent: false }, (res) => {
            let body = '';
            res.on('data', (chunk: Buffer) => (body += chunk.toString()));
            res.on('end', () => resolve(body));
          }).on('error', reject);
        });
      assert.equal(await get(file('ca.crt')), 'served');
      await assert.rejects(get(makeWebhookCertificate(names).ca), /self[- ]signed|unable to verify|certificate/i, 'another CA is not trusted');
      assert.equal(new X509Certificate(file('tls.crt')).checkIP('127.0.0.1'), '127.0.0.1');
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
