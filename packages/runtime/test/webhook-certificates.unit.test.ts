// The webhook certificate made in the process: a CA and a serving certificate it signed that
// node:crypto and openssl both verify for exactly the names asked for; the files written whole and
// only when they change; the Secret-keeping gives up naming the Secret when other writers keep
// winning with certificates it cannot use.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ApiError, type KubeObject } from '../src/index.ts';
import { ensureWebhookCertificateSecret } from '../src/webhook/certificate-secret.ts';
import { ensureWebhookCertificate, issueCertificate, makeCertificateAuthority, makeWebhookCertificate, usableCertificate, writeWebhookCertificate } from '../src/webhook/certificates.ts';

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const names = ['DNS:iot-operator-webhook.iot-system.svc', 'DNS:iot-operator-webhook.iot-system.svc.cluster.local', 'IP:127.0.0.1'];
const made = makeWebhookCertificate(names);
const dir = mkdtempSync(path.join(os.tmpdir(), 'webhook-certificates-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('the serving certificate is signed by its CA and covers each name, IP or DNS', () => {
  const ca = new X509Certificate(made.ca);
  const cert = new X509Certificate(made.cert);
  assert.ok(cert.checkIssued(ca), 'issued by the CA');
  assert.ok(cert.verify(ca.publicKey), "the CA's signature verifies");
  assert.ok(ca.verify(ca.publicKey), 'the CA is self-signed');
  assert.equal(ca.ca, true, 'the CA is a CA');
  assert.equal(cert.ca, false, 'the serving certificate is not a CA');
  assert.deepEqual(cert.keyUsage, [SERVER_AUTH], 'for TLS servers');
  assert.equal(cert.checkHost('iot-operator-webhook.iot-system.svc'), 'iot-operator-webhook.iot-system.svc');
  assert.equal(cert.checkHost('iot-operator-webhook.iot-system.svc.cluster.local'), 'iot-operator-webhook.iot-system.svc.cluster.local');
  assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
  assert.equal(cert.checkHost('other.iot-system.svc'), undefined);
  assert.equal(cert.checkIP('10.0.0.1'), undefined);
  assert.ok(cert.checkPrivateKey(createPrivateKey(made.key)), 'tls.key is the key of tls.crt');
  for (const key of [ca.publicKey, cert.publicKey]) assert.equal(key.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'ECDSA P-256 keys');
  const year = new Date(cert.validTo).getTime() - Date.now();
  assert.ok(year > 364 * 86_400_000 && year <= 365 * 86_400_000, `valid for a year, until ${cert.validTo}`);
  assert.ok(new Date(cert.validFrom).getTime() <= Date.now(), `valid already, from ${cert.validFrom}`);
});

test('each certificate made has a CA and serial numbers of its own', () => {
  const again = makeWebhookCertificate(names);
  assert.notEqual(again.ca, made.ca);
  assert.notEqual(new X509Certificate(again.cert).serialNumber, new X509Certificate(made.cert).serialNumber);
  assert.equal(new X509Certificate(again.cert).checkIssued(new X509Certificate(made.ca)), false);
});

test('usable for its names only, and only with its own CA and key present', () => {
  assert.equal(usableCertificate(made, names), true);
  assert.equal(usableCertificate(made, ['IP:127.0.0.1']), true, 'some of its names');
  assert.equal(usableCertificate(made, [...names, 'DNS:other.iot-system.svc']), false, 'one more name');
  assert.equal(usableCertificate(made, ['IP:10.0.0.1']), false);
  assert.equal(usableCertificate({ ...made, ca: makeWebhookCertificate(names).ca }, names), false, 'signed by another CA');
  assert.equal(usableCertificate({ ...made, cert: 'garbage' }, names), false);
  assert.equal(usableCertificate({ ca: made.ca, cert: made.cert }, names), false, 'no key');
});

test('a CA valid beyond 2049 states its expiry as such (GeneralizedTime)', () => {
  const ca = new X509Certificate(makeCertificateAuthority('long-lived CA', 40 * 365).cert);
  const years = (new Date(ca.validTo).getTime() - Date.now()) / (365 * 86_400_000);
  assert.ok(years > 39.9 && years < 40.1, `valid for 40 years, until ${ca.validTo}`);
  assert.ok(ca.verify(ca.publicKey), 'self-signed');
});

test('a name that is neither IP: nor DNS: is refused', () => {
  assert.throws(() => makeWebhookCertificate(['webhook.svc']), /webhook\.svc.*IP:<address> or DNS:<name>/);
});

test('openssl verify accepts the certificate against its CA', () => {
  const files = mkdtempSync(path.join(dir, 'openssl-'));
  writeWebhookCertificate(files, made);
  const out = execFileSync('openssl', ['verify', '-CAfile', path.join(files, 'ca.crt'), '-purpose', 'sslserver', path.join(files, 'tls.crt')], { encoding: 'utf8' });
  assert.match(out, /tls\.crt: OK/);
});

test('a CA with an RSA key (as earlier versions made them) still issues certificates openssl verifies', () => {
  const files = mkdtempSync(path.join(dir, 'rsa-ca-'));
  const [caCert, caKey] = [path.join(files, 'ca.crt'), path.join(files, 'ca.key')];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', caKey, '-out', caCert, '-days', '30', '-subj', '/CN=earlier CA'], { stdio: 'ignore' });
  const ca = { cert: readFileSync(caCert, 'utf8'), key: readFileSync(caKey, 'utf8') };
  const leaf = issueCertificate(ca, ['DNS:gateway.tenant-a.svc'], 90, 'gateway', { clientAuth: true });
  writeWebhookCertificate(files, { ca: ca.cert, ...leaf });
  const out = execFileSync('openssl', ['verify', '-CAfile', caCert, '-purpose', 'sslserver', path.join(files, 'tls.crt')], { encoding: 'utf8' });
  assert.match(out, /tls\.crt: OK/);
  assert.equal(new X509Certificate(leaf.cert).publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'the new key is ECDSA P-256');
});

test('the files are written whole, the key 0600, and left alone when they already hold the certificate', () => {
  const files = path.join(dir, 'files');
  assert.equal(writeWebhookCertificate(files, made), true);
  assert.deepEqual(readdirSync(files).sort(), ['ca.crt', 'tls.crt', 'tls.key'], 'no temporary file left');
  assert.deepEqual([readFileSync(path.join(files, 'ca.crt'), 'utf8'), readFileSync(path.join(files, 'tls.crt'), 'utf8'), readFileSync(path.join(files, 'tls.key'), 'utf8')], [made.ca, made.cert, made.key]);
  assert.equal(statSync(path.join(files, 'tls.key')).mode & 0o777, 0o600);
  const inodes = readdirSync(files).map((name) => statSync(path.join(files, name)).ino);
  assert.equal(writeWebhookCertificate(files, made), false, 'nothing to write');
  assert.deepEqual(readdirSync(files).map((name) => statSync(path.join(files, name)).ino), inodes, 'the same files');
  assert.equal(ensureWebhookCertificate(files, names).cert, made.cert, 'a usable certificate there is kept');
  const other = ensureWebhookCertificate(files, ['DNS:elsewhere.svc']);
  assert.notEqual(other.ca, made.ca, 'remade for other names');
  assert.equal(readFileSync(path.join(files, 'tls.crt'), 'utf8'), other.cert);
  assert.deepEqual(readdirSync(files).sort(), ['ca.crt', 'tls.crt', 'tls.key']);
});

test('the Secret is given up on, naming it, when other writers keep winning with unusable certificates', async () => {
  const garbage: KubeObject = { metadata: { name: 'webhook-cert', namespace: 'ops', resourceVersion: '1' }, type: 'kubernetes.io/tls', data: { 'tls.crt': 'Z2FyYmFnZQ==' } };
  let writes = 0;
  const client = {
    get: async <T extends KubeObject>() => structuredClone(garbage) as T,
    create: async (): Promise<never> => {
      throw new ApiError(409, 'AlreadyExists', 'secrets "webhook-cert" already exists');
    },
    replace: async (): Promise<never> => {
      writes++;
      throw new ApiError(409, 'Conflict', 'the object has been modified');
    },
  };
  await assert.rejects(ensureWebhookCertificateSecret(client, { namespace: 'ops', name: 'webhook-cert', names, managedBy: 'iot-operator' }), /Secret ops\/webhook-cert/);
  assert.ok(writes > 1, 'tried again after losing a race');
});

test('an error other than a lost race is thrown as the API server sent it', async () => {
  const forbidden = new ApiError(403, 'Forbidden', 'secrets "webhook-cert" is forbidden');
  const client = {
    get: async (): Promise<never> => {
      throw new ApiError(404, 'NotFound', 'secrets "webhook-cert" not found');
    },
    create: async (): Promise<never> => {
      throw forbidden;
    },
    replace: async (): Promise<never> => assert.fail('nothing to replace'),
  };
  await assert.rejects(ensureWebhookCertificateSecret(client, { namespace: 'ops', name: 'webhook-cert', names, managedBy: 'iot-operator' }), (err) => err === forbidden);
});
