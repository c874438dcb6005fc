/**
 * An instance's own CA and the one leaf certificate it signs, kept or made anew: the one home of
 * what the gateway's TLS (gateway-tls.ts) and the backups' mutual TLS (backup.ts) have alike.
 *
 * Guarantees: `keepOrIssue` keeps a CA that reads back whole (a CA certificate matching its key,
 * valid beyond the next leaf certificate's lifetime) and a leaf that it signed, whose key
 * matches, that covers exactly the names asked (`DNS:` and `IP:` entries), that is a client's
 * certificate too when the profile asks for one, and whose renewal time (30 days before it
 * expires) has not come; otherwise it makes what is needed (a CA of 10 years named as the profile
 * says, a leaf of 90 days; ECDSA P-256 keys, the runtime's certificates.ts) and says why. tls.crt carries
 * the chain: the leaf, then the CA. Every function here is pure but `keepOrIssue`, which draws
 * new keys.
 */

import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { issueCertificate, makeCertificateAuthority, type CertificateAuthority } from '@iot-operator/runtime';

const DAY_MS = 24 * 3600 * 1000;
export const CA_VALIDITY_DAYS = 3650;
export const SERVER_VALIDITY_DAYS = 90;
/** A server certificate is renewed this long before it expires. */
export const RENEW_BEFORE_MS = 30 * DAY_MS;

/** A server certificate and its key, PEM. */
export interface ServerCertificate {
  cert: string;
  key: string;
}

/** An instance CA and the leaf certificate it signed. */
export interface CaCertificates {
  ca: CertificateAuthority;
  server: ServerCertificate;
}

/** What a CA and its leaf are made as. */
export interface CertificateProfile {
  /** The CA's common name. */
  caName: string;
  /** The leaf's common name (what pgBackRest's tls-server-auth authorises a client by). */
  leafName: string;
  /** The leaf is a client's certificate too (extendedKeyUsage clientAuth besides serverAuth): mutual TLS. */
  clientAuth: boolean;
}

/** extendedKeyUsage clientAuth. */
const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';

/** The first certificate of a PEM text (a chain lists the leaf first); undefined when there is none or it does not parse. */
function firstCertificate(pem: string | undefined): X509Certificate | undefined {
  const block = pem?.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)?.[0];
  if (!block) return undefined;
  try {
    return new X509Certificate(block);
  } catch {
    return undefined;
  }
}

function keyMatches(cert: X509Certificate, key: string | undefined): boolean {
  if (!key) return false;
  try {
    return cert.checkPrivateKey(createPrivateKey(key));
  } catch {
    return false;
  }
}

/** When the leaf of `cert` (PEM, the leaf first) expires. */
export function certificateExpiry(cert: string): Date {
  const leaf = firstCertificate(cert);
  if (!leaf) throw new Error('not a certificate');
  return new Date(leaf.validTo);
}

/** When `cert` is due for renewal: 30 days before it expires. */
export function renewalTime(cert: string): Date {
  return new Date(certificateExpiry(cert).getTime() - RENEW_BEFORE_MS);
}

/** Why `ca` cannot sign the next server certificate; undefined when it can. */
export function caProblem(ca: Partial<CertificateAuthority>, now: Date): string | undefined {
  const cert = firstCertificate(ca.cert);
  if (!cert || !cert.ca || !cert.verify(cert.publicKey)) return 'its ca.crt is not a self-signed CA certificate';
  if (!keyMatches(cert, ca.key)) return 'its ca.key does not belong to its ca.crt';
  if (new Date(cert.validTo).getTime() - now.getTime() < (SERVER_VALIDITY_DAYS + 1) * DAY_MS) return `its CA expires ${cert.validTo}, before a new server certificate would`;
  return undefined;
}

/** Why `server` must be issued anew under `ca` for `names`; undefined when it stays. */
function serverProblem(server: Partial<ServerCertificate>, ca: CertificateAuthority, names: readonly string[], now: Date, profile: CertificateProfile): string | undefined {
  const cert = firstCertificate(server.cert);
  const caCert = firstCertificate(ca.cert)!;
  if (!cert) return 'there is none';
  if (!cert.checkIssued(caCert) || !cert.verify(caCert.publicKey)) return 'it was not signed by the instance CA';
  if (!keyMatches(cert, server.key)) return 'its tls.key does not belong to its tls.crt';
  if (profile.clientAuth && !(cert.keyUsage ?? []).includes(CLIENT_AUTH_OID)) return 'it is not for client authentication';
  const covered = names.every((name) => (name.startsWith('IP:') ? cert.checkIP(name.slice(3)) : cert.checkHost(name.slice(4), { wildcards: false })) !== undefined);
  const entries = cert.subjectAltName?.split(', ').length ?? 0;
  if (!covered || entries !== names.length) return `the names changed to ${names.join(', ')}`;
  if (now.getTime() >= renewalTime(server.cert!).getTime()) return `it expires ${cert.validTo}, in less than 30 days`;
  return undefined;
}

/** Certificates as read back: any part may be missing. */
export interface CurrentCertificates {
  ca?: Partial<CertificateAuthority>;
  server?: Partial<ServerCertificate>;
}

/** What `keepOrIssue` decided: the certificates and, for what it made anew, why. */
export interface TlsDecision {
  certificates: CaCertificates;
  /** Set when a CA was there but could not be kept. */
  caReplaced?: string;
  /** Set when a server certificate was issued. */
  serverIssued?: string;
}

/**
 * The material for `names`: `current`'s CA and server certificate where they can stay (see the
 * module comment), new ones made as `profile` says where not. A new CA always comes with a new
 * server certificate.
 */
export function keepOrIssue(current: CurrentCertificates, names: readonly string[], now: Date, profile: CertificateProfile): TlsDecision {
  const problem = current.ca ? caProblem(current.ca, now) : 'there is none';
  const ca = problem === undefined ? (current.ca as CertificateAuthority) : makeCertificateAuthority(profile.caName, CA_VALIDITY_DAYS);
  const serverIssued = problem === undefined ? serverProblem(current.server ?? {}, ca, names, now, profile) : 'the CA is new';
  const server = serverIssued === undefined ? (current.server as ServerCertificate) : issueServer(ca, names, profile);
  return {
    certificates: { ca, server },
    ...(current.ca && problem !== undefined ? { caReplaced: problem } : {}),
    ...(serverIssued !== undefined ? { serverIssued } : {}),
  };
}

/** A server certificate signed by `ca` for `names`; tls.crt carries the chain: it, then the CA. */
function issueServer(ca: CertificateAuthority, names: readonly string[], profile: CertificateProfile): ServerCertificate {
  const issued = issueCertificate(ca, names, SERVER_VALIDITY_DAYS, profile.leafName, { clientAuth: profile.clientAuth });
  return { cert: `${issued.cert.trimEnd()}\n${ca.cert.trimEnd()}\n`, key: issued.key };
}

/** A Secret's `key` as text, or undefined when it has none. */
function decoded(secret: V1Secret, key: string): string | undefined {
  const value = secret.data?.[key];
  return value ? Buffer.from(value, 'base64').toString('utf8') : undefined;
}

/** Reads a CA back from its Secret's data (base64: ca.crt, ca.key). */
export function caOfSecret(secret: V1Secret | undefined): Partial<CertificateAuthority> | undefined {
  return secret && { cert: decoded(secret, 'ca.crt'), key: decoded(secret, 'ca.key') };
}

/** Reads a leaf certificate back from its Secret's data (base64: tls.crt, tls.key). */
export function serverOfSecret(secret: V1Secret | undefined): Partial<ServerCertificate> | undefined {
  return secret && { cert: decoded(secret, 'tls.crt'), key: decoded(secret, 'tls.key') };
}

const encode = (text: string) => Buffer.from(text, 'utf8').toString('base64');

/** A Secret's data (base64) of a CA: ca.crt and ca.key. */
export function caSecretData(ca: CertificateAuthority): Record<string, string> {
  return { 'ca.crt': encode(ca.cert), 'ca.key': encode(ca.key) };
}

/** A Secret's data (base64) of a leaf: ca.crt (the CA it is checked against), tls.crt (the leaf, then its chain) and tls.key. */
export function leafSecretData(caCert: string, leaf: ServerCertificate): Record<string, string> {
  return { 'ca.crt': encode(caCert), 'tls.crt': encode(leaf.cert), 'tls.key': encode(leaf.key) };
}
