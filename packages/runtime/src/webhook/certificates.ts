/**
 * The webhook server's certificate: a CA of its own and a serving certificate it signed, made in
 * the process (RSA 2048 keys and signatures from node:crypto, X.509 certificates built by
 * node-forge, signed with SHA-256), so an operator image needs no openssl.
 *
 * Guarantees: `makeWebhookCertificate(names)` returns a new CA (basicConstraints CA, keyCertSign)
 * and a certificate it signed for every name in `names` (`IP:127.0.0.1`, `DNS:svc.ns.svc`, in its
 * subjectAltName, extendedKeyUsage serverAuth), both valid for a year (from an hour ago, so a
 * clock a little behind still accepts them), with random serial numbers; a name without one of
 * those prefixes is refused. `makeCertificateAuthority` and `issueCertificate` are its two halves,
 * for a CA kept apart from the certificates it signs. `ensureWebhookCertificate(dir, names)` leaves `dir` holding ca.crt,
 * tls.crt and tls.key (the names the webhook server and a kubernetes.io/tls Secret use); files
 * already there are kept when they cover those names and stay valid for 30 more days, so a
 * restart does not change the caBundle. `usableCertificate` is the same check on PEM texts.
 * `writeWebhookCertificate` replaces those files whole (never half-written) and only when changed.
 * node-forge is loaded by the first certificate made, not by importing the runtime: an operator
 * that never makes one does not carry it in memory.
 */
import { createRequire } from 'node:module';
import { X509Certificate, constants, generateKeyPairSync, privateEncrypt, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type Forge from 'node-forge';

const DAYS = 365;
const RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;
const BACKDATE_MS = 3600 * 1000;

export interface WebhookCertificate {
  ca: string;
  cert: string;
  key: string;
}

/** True when `cert` was signed by `ca`, covers every name and is valid for 30 more days. */
export function usableCertificate(certificate: Partial<WebhookCertificate>, names: readonly string[]): boolean {
  if (!certificate.ca || !certificate.cert || !certificate.key) return false;
  try {
    const ca = new X509Certificate(certificate.ca);
    const cert = new X509Certificate(certificate.cert);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
    if (new Date(cert.validTo).getTime() - Date.now() < RENEW_BEFORE_MS) return false;
    return names.every((name) => (name.startsWith('IP:') ? cert.checkIP(name.slice(3)) !== undefined : cert.checkHost(name.replace(/^DNS:/, '')) !== undefined));
  } catch {
    return false;
  }
}

/**
 * node-forge, loaded on first use. A bundler sees the literal `require('node-forge')` and puts
 * forge in the bundle, run only when called; plain Node ESM (the runtime's compiled dist) has no
 * `require` and resolves forge from node_modules.
 */
function forge(): typeof Forge {
  return typeof require === 'function' ? require('node-forge') : createRequire(import.meta.url)('node-forge');
}

/** A subjectAltName entry of node-forge for `IP:<address>` or `DNS:<name>`. */
function altName(name: string): { type: number; ip?: string; value?: string } {
  if (name.startsWith('IP:')) return { type: 7, ip: name.slice(3) };
  if (name.startsWith('DNS:')) return { type: 2, value: name.slice(4) };
  throw new Error(`webhook certificate name "${name}": expected IP:<address> or DNS:<name>`);
}

function rsaKeyPair(): { privatePem: string; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privatePem: privateKey, publicPem: publicKey };
}

// DER of DigestInfo { sha256, NULL } followed by the 32-byte digest (RFC 8017, 9.2 note 1).
const SHA256_DIGEST_INFO = Buffer.from('3031300d060960864801650304020105000420', 'hex');

/**
 * The signing key node-forge's certificate signing calls with the SHA-256 digest it computed of
 * the certificate: RSASSA-PKCS1-v1_5 done by node:crypto (native), where forge's JavaScript RSA
 * takes ≈ 0.7 s per signature under the operators' --no-opt.
 */
function signingKey(privatePem: string): Forge.pki.rsa.PrivateKey {
  const sign = (digest: Forge.md.MessageDigest) =>
    privateEncrypt({ key: privatePem, padding: constants.RSA_PKCS1_PADDING }, Buffer.concat([SHA256_DIGEST_INFO, Buffer.from(digest.digest().getBytes(), 'binary')])).toString('binary');
  return { sign } as unknown as Forge.pki.rsa.PrivateKey;
}

/** A positive 128-bit serial number, in hex. */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x40;
  return bytes.toString('hex');
}

/** A CA: its certificate and private key (PKCS#8), in PEM. */
export interface CertificateAuthority {
  cert: string;
  key: string;
}

/** A certificate with the validity every certificate made here has: from an hour ago to `days` days from now. */
function newCertificate(publicPem: string, commonName: string, days: number): Forge.pki.Certificate {
  const { pki } = forge();
  const cert = pki.createCertificate();
  cert.publicKey = pki.publicKeyFromPem(publicPem);
  cert.serialNumber = serialNumber();
  cert.validity.notBefore = new Date(Date.now() - BACKDATE_MS);
  cert.validity.notAfter = new Date(Date.now() + days * 24 * 3600 * 1000);
  cert.setSubject([{ name: 'commonName', value: commonName }]);
  return cert;
}

/** Makes a new self-signed CA (basicConstraints CA, keyCertSign), valid for `days` days. */
export function makeCertificateAuthority(commonName: string, days: number): CertificateAuthority {
  const { pki, md } = forge();
  const keys = rsaKeyPair();
  const ca = newCertificate(keys.publicPem, commonName, days);
  ca.setIssuer(ca.subject.attributes);
  ca.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  ca.sign(signingKey(keys.privatePem), md.sha256.create());
  return { cert: pki.certificateToPem(ca), key: keys.privatePem };
}

/**
 * Makes a new key and a serving certificate `ca` signed for every name in `names` (`IP:<address>`,
 * `DNS:<name>`, in its subjectAltName, extendedKeyUsage serverAuth, and clientAuth too with
 * `usage.clientAuth`: one certificate for both ends of mutual TLS), valid for `days` days.
 */
export function issueCertificate(ca: CertificateAuthority, names: readonly string[], days: number, commonName: string, usage: { clientAuth?: boolean } = {}): { cert: string; key: string } {
  const altNames = names.map(altName);
  const { pki, md } = forge();
  const caCert = pki.certificateFromPem(ca.cert);
  const keys = rsaKeyPair();
  // The names are in subjectAltName (what clients check); a common name holds at most 64 characters.
  const serving = newCertificate(keys.publicPem, commonName, days);
  serving.setIssuer(caCert.subject.attributes);
  serving.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true, ...(usage.clientAuth ? { clientAuth: true } : {}) },
    { name: 'subjectAltName', altNames },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  serving.sign(signingKey(ca.key), md.sha256.create());
  return { cert: pki.certificateToPem(serving), key: keys.privatePem };
}

/** Makes a new CA and a certificate it signed for `names`; returns the PEM texts. */
export function makeWebhookCertificate(names: readonly string[]): WebhookCertificate {
  const ca = makeCertificateAuthority('webhook CA', DAYS);
  const serving = issueCertificate(ca, names, DAYS, 'webhook');
  return { ca: ca.cert, cert: serving.cert, key: serving.key };
}

/** ca.crt, tls.crt and tls.key in `dir` for `names`: those there when usable, else new ones. */
export function ensureWebhookCertificate(dir: string, names: readonly string[]): WebhookCertificate {
  const read = (name: string) => (existsSync(path.join(dir, name)) ? readFileSync(path.join(dir, name), 'utf8') : undefined);
  const current = { ca: read('ca.crt'), cert: read('tls.crt'), key: read('tls.key') };
  if (usableCertificate(current, names)) return current as WebhookCertificate;
  const made = makeWebhookCertificate(names);
  writeWebhookCertificate(dir, made);
  return made;
}

/**
 * Writes `certificate` into `dir` as ca.crt, tls.crt and tls.key (that one mode 0600), each through a
 * temporary file renamed over it, so a reader (the webhook server's certificate watcher) never
 * sees half a file; a file already holding its text is left alone. Returns whether any changed.
 */
export function writeWebhookCertificate(dir: string, certificate: WebhookCertificate): boolean {
  mkdirSync(dir, { recursive: true });
  let changed = false;
  for (const [name, text, mode] of [['ca.crt', certificate.ca, 0o644], ['tls.key', certificate.key, 0o600], ['tls.crt', certificate.cert, 0o644]] as const) {
    const file = path.join(dir, name);
    if (existsSync(file) && readFileSync(file, 'utf8') === text) continue;
    const temporary = path.join(dir, `.${name}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      writeFileSync(temporary, text, { mode });
      renameSync(temporary, file);
    } catch (err) {
      rmSync(temporary, { force: true });
      throw err;
    }
    changed = true;
  }
  return changed;
}
