/**
 * The webhook server's certificate: a CA of its own and a serving certificate it signed, made in
 * the process (ECDSA P-256 keys and SHA-256 signatures from node:crypto, X.509 certificates
 * assembled with node-forge's ASN.1), so an operator image needs no openssl. A P-256 key is drawn
 * in well under a millisecond where an RSA 2048 key took 50–500 ms of the event loop, and it signs
 * a TLS handshake in a fraction of RSA's time; a CA made earlier with an RSA key still signs.
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
import { X509Certificate, createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
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

/** A new ECDSA P-256 key: its private key (PKCS#8 PEM) and its SubjectPublicKeyInfo (DER). */
function ecKeyPair(): { privatePem: string; spki: Buffer } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', {
    namedCurve: 'prime256v1',
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'der' },
  });
  return { privatePem: privateKey, spki: publicKey };
}

/** The AlgorithmIdentifier OIDs of a signature with SHA-256 by the signer's key type. */
const SIGNATURE_OIDS: Record<string, string> = { ec: '1.2.840.10045.4.3.2', rsa: '1.2.840.113549.1.1.11' };

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

/** The key identifier of a SubjectPublicKeyInfo (DER): SHA-1 of its subjectPublicKey bits (RFC 5280 4.2.1.2, method 1), as a binary string. */
function keyIdentifier(spki: Buffer): string {
  // Read with the BIT STRING kept whole: forge would otherwise decode an RSA key's bits as ASN.1.
  const fromDer = forge().asn1.fromDer as unknown as (der: string, options: { decodeBitStrings: boolean }) => Forge.asn1.Asn1;
  const bits = (fromDer(spki.toString('binary'), { decodeBitStrings: false }).value as Forge.asn1.Asn1[])[1]!.value as string;
  return createHash('sha1').update(Buffer.from(bits.slice(1), 'binary')).digest('binary');
}

/** The subjectKeyIdentifier extension of a SubjectPublicKeyInfo (DER), its value given: node-forge would derive it from an RSA key. */
function subjectKeyIdentifier(spki: Buffer): object {
  const { asn1 } = forge();
  return { name: 'subjectKeyIdentifier', value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, keyIdentifier(spki)) };
}

/** The subject Name of a certificate (PEM), as ASN.1: what a certificate it signs names as its issuer. */
function subjectName(certPem: string): Forge.asn1.Asn1 {
  const { asn1 } = forge();
  const tbs = (asn1.fromDer(new X509Certificate(certPem).raw.toString('binary')).value as Forge.asn1.Asn1[])[0]!.value as Forge.asn1.Asn1[];
  const versioned = tbs[0]!.tagClass === asn1.Class.CONTEXT_SPECIFIC ? 1 : 0;
  return tbs[versioned + 4]!;
}

/** What a certificate made here holds, besides its serial number and validity. */
interface CertificateFields {
  commonName: string;
  days: number;
  /** The subject's public key: SubjectPublicKeyInfo, DER. */
  spki: Buffer;
  /** The issuer's Name (ASN.1); the subject's own for a self-signed certificate. */
  issuer?: Forge.asn1.Asn1;
  /** The issuer's private key (PKCS#8 PEM), ECDSA P-256 or RSA. */
  signingKeyPem: string;
  /** node-forge's extension descriptions (their `value` filled in here). */
  extensions: object[];
}

/**
 * An X.509 v3 certificate (PEM) valid from an hour ago for `days` days, signed with SHA-256 by
 * node:crypto: the TBSCertificate assembled with node-forge's ASN.1 (whose own certificates know
 * RSA keys only).
 */
function signedCertificate(fields: CertificateFields): string {
  const { asn1, pki, pem, util } = forge();
  const { Class, Type } = asn1;
  const signer = createPrivateKey(fields.signingKeyPem);
  const algorithm = asn1.create(Class.UNIVERSAL, Type.SEQUENCE, true, [
    asn1.create(Class.UNIVERSAL, Type.OID, false, asn1.oidToDer(SIGNATURE_OIDS[signer.asymmetricKeyType!]!).getBytes()),
    ...(signer.asymmetricKeyType === 'rsa' ? [asn1.create(Class.UNIVERSAL, Type.NULL, false, '')] : []),
  ]);
  // RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050.
  const time = (date: Date) =>
    date.getUTCFullYear() < 2050 ? asn1.create(Class.UNIVERSAL, Type.UTCTIME, false, asn1.dateToUtcTime(date)) : asn1.create(Class.UNIVERSAL, Type.GENERALIZEDTIME, false, asn1.dateToGeneralizedTime(date));
  // A forge certificate only to fill in the extensions' and the subject's encodings.
  const shape = pki.createCertificate();
  shape.setSubject([{ name: 'commonName', value: fields.commonName }]);
  shape.setExtensions(fields.extensions);
  const subject = pki.distinguishedNameToAsn1(shape.subject);
  const tbs = asn1.create(Class.UNIVERSAL, Type.SEQUENCE, true, [
    asn1.create(Class.CONTEXT_SPECIFIC, 0, true, [asn1.create(Class.UNIVERSAL, Type.INTEGER, false, asn1.integerToDer(2).getBytes())]),
    asn1.create(Class.UNIVERSAL, Type.INTEGER, false, util.hexToBytes(serialNumber())),
    algorithm,
    fields.issuer ?? subject,
    asn1.create(Class.UNIVERSAL, Type.SEQUENCE, true, [time(new Date(Date.now() - BACKDATE_MS)), time(new Date(Date.now() + fields.days * 24 * 3600 * 1000))]),
    subject,
    asn1.fromDer(fields.spki.toString('binary')),
    (pki as unknown as { certificateExtensionsToAsn1(extensions: unknown[]): Forge.asn1.Asn1 }).certificateExtensionsToAsn1(shape.extensions),
  ]);
  const tbsDer = Buffer.from(asn1.toDer(tbs).getBytes(), 'binary');
  const signature = sign('sha256', tbsDer, signer);
  const certificate = asn1.create(Class.UNIVERSAL, Type.SEQUENCE, true, [
    tbs,
    algorithm,
    asn1.create(Class.UNIVERSAL, Type.BITSTRING, false, `\0${signature.toString('binary')}`),
  ]);
  return pem.encode({ type: 'CERTIFICATE', body: asn1.toDer(certificate).getBytes() });
}

/** Makes a new self-signed CA (basicConstraints CA, keyCertSign; an ECDSA P-256 key), valid for `days` days. */
export function makeCertificateAuthority(commonName: string, days: number): CertificateAuthority {
  const keys = ecKeyPair();
  const cert = signedCertificate({
    commonName,
    days,
    spki: keys.spki,
    signingKeyPem: keys.privatePem,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
      subjectKeyIdentifier(keys.spki),
    ],
  });
  return { cert, key: keys.privatePem };
}

/**
 * Makes a new key (ECDSA P-256) and a serving certificate `ca` signed for every name in `names`
 * (`IP:<address>`, `DNS:<name>`, in its subjectAltName, extendedKeyUsage serverAuth, and
 * clientAuth too with `usage.clientAuth`: one certificate for both ends of mutual TLS), valid for
 * `days` days. `ca`'s key may be ECDSA P-256 or RSA (a CA made before keys were ECDSA).
 */
export function issueCertificate(ca: CertificateAuthority, names: readonly string[], days: number, commonName: string, usage: { clientAuth?: boolean } = {}): { cert: string; key: string } {
  const altNames = names.map(altName);
  const keys = ecKeyPair();
  const caSpki = createPublicKey(ca.key).export({ type: 'spki', format: 'der' });
  // The names are in subjectAltName (what clients check); a common name holds at most 64 characters.
  const cert = signedCertificate({
    commonName,
    days,
    spki: keys.spki,
    issuer: subjectName(ca.cert),
    signingKeyPem: ca.key,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true, ...(usage.clientAuth ? { clientAuth: true } : {}) },
      { name: 'subjectAltName', altNames },
      subjectKeyIdentifier(keys.spki),
      { name: 'authorityKeyIdentifier', keyIdentifier: keyIdentifier(caSpki) },
    ],
  });
  return { cert, key: keys.privatePem };
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
