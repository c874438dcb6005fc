/**
 * The gateway's TLS material: the instance CA and the server certificate it signs, and the
 * children that hold them.
 *
 * Guarantees: `gatewayCertificateNames` lists what the server certificate covers: the gateway
 * Service's four in-cluster names, its addresses once it has them (cluster IPs, a load
 * balancer's IPs) and `spec.gateway.tls.hostnames` (an IP address as `IP:`), each once. `keepOrIssue` keeps a CA that reads back whole (a CA certificate matching its key,
 * valid beyond the next server certificate's lifetime) and a server certificate that it signed,
 * whose key matches, that covers exactly those names and whose renewal time (30 days before it
 * expires) has not come; otherwise it makes what is needed (a CA of 10 years, a server
 * certificate of 90 days; RSA 2048, the runtime's certificates.ts) and says why. The material of
 * the children is either that (`instanceCaMaterial`) or a certificate cert-manager issued
 * (gateway-certificate.ts, for `spec.gateway.tls.issuerRef`), which has no instance CA. Children:
 * Secret `gateway-ca` (ca.crt, ca.key; mounted nowhere; only with an instance CA), Secret
 * `gateway-tls` (kubernetes.io/tls: tls.crt the server certificate followed by its chain — the
 * instance CA's certificate, or what cert-manager put there —, tls.key, ca.crt, and client-ca.crt
 * when `spec.gateway.tls.clientCA` names one; what the gateway reads), ConfigMap `gateway-ca`
 * (ca.crt, for devices) — made only for an instance that `servesTls`. Every function here is pure
 * but `keepOrIssue`, which draws new keys.
 */

import { X509Certificate, createPrivateKey } from 'node:crypto';
import { isIP } from 'node:net';
import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import { issueCertificate, makeCertificateAuthority, type CertificateAuthority } from '@iot-operator/runtime';
import type { Instance } from './instance.ts';
import { instanceLabels } from './labels.ts';

export const GATEWAY_CA_SECRET = 'gateway-ca';
export const GATEWAY_TLS_SECRET = 'gateway-tls';
export const GATEWAY_CA_CONFIGMAP = 'gateway-ca';
/** Where the gateway pods find Secret gateway-tls. */
export const GATEWAY_TLS_DIR = '/etc/iot/tls';
/** The gateway Service's name (services.ts names it after its component). */
export const GATEWAY_SERVICE = 'gateway';

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

/** The instance CA and the server certificate it signed. */
export interface GatewayCertificates {
  ca: CertificateAuthority;
  server: ServerCertificate;
}

/** What the gateway's TLS children are made of. */
export interface GatewayTlsMaterial {
  /** The CA certificate (PEM) devices trust the gateway by. */
  caCert: string;
  /** The server certificate (tls.crt: it, then its chain) and its key. */
  server: ServerCertificate;
  /** The instance CA when the operator keeps its own (Secret gateway-ca); absent when cert-manager issued the server certificate. */
  instanceCa?: CertificateAuthority;
  /** The PEM of `spec.gateway.tls.clientCA`'s ca.crt, when it names one. */
  clientCA?: string;
}

/** The material of a server certificate signed by the instance CA. */
export function instanceCaMaterial(certificates: GatewayCertificates): GatewayTlsMaterial {
  return { caCert: certificates.ca.cert, server: certificates.server, instanceCa: certificates.ca };
}

/**
 * Whether the instance's gateway needs TLS material: it serves mqtts or https, or checks client
 * certificates. Instances serving only plaintext protocols get no CA, no certificate and no mount.
 */
export function servesTls(instance: Instance): boolean {
  return instance.spec.gateway.protocols.some((p) => p === 'mqtts' || p === 'https') || Boolean(instance.spec.gateway.tls?.clientCA);
}

/**
 * `DNS:<name>` and `IP:<address>` entries the server certificate must cover, each once:
 * `serviceAddresses` are the gateway Service's own (its cluster IPs, a load balancer's), so a
 * device dialling the address `kubectl get service gateway` shows verifies the certificate too.
 */
export function gatewayCertificateNames(instance: Instance, serviceAddresses: readonly string[] = []): string[] {
  const service = GATEWAY_SERVICE;
  const ns = instance.namespace;
  const inCluster = [service, `${service}.${ns}`, `${service}.${ns}.svc`, `${service}.${ns}.svc.cluster.local`].map((name) => `DNS:${name}`);
  const addresses = serviceAddresses.filter((address) => isIP(address)).map((address) => `IP:${address}`);
  const outside = (instance.spec.gateway.tls?.hostnames ?? []).map((host) => (isIP(host) ? `IP:${host}` : `DNS:${host}`));
  return [...new Set([...inCluster, ...addresses, ...outside])];
}

/** The addresses of a gateway Service as read back: its cluster IPs and its load balancer's IPs. */
export function gatewayServiceAddresses(service: V1Service | undefined): string[] {
  const clusterIps = service?.spec?.clusterIPs ?? (service?.spec?.clusterIP ? [service.spec.clusterIP] : []);
  const balancer = (service?.status?.loadBalancer?.ingress ?? []).flatMap((ingress) => (ingress.ip ? [ingress.ip] : []));
  return [...clusterIps, ...balancer].filter((address) => isIP(address));
}

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
function serverProblem(server: Partial<ServerCertificate>, ca: CertificateAuthority, names: readonly string[], now: Date): string | undefined {
  const cert = firstCertificate(server.cert);
  const caCert = firstCertificate(ca.cert)!;
  if (!cert) return 'there is none';
  if (!cert.checkIssued(caCert) || !cert.verify(caCert.publicKey)) return 'it was not signed by the instance CA';
  if (!keyMatches(cert, server.key)) return 'its tls.key does not belong to its tls.crt';
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
  certificates: GatewayCertificates;
  /** Set when a CA was there but could not be kept. */
  caReplaced?: string;
  /** Set when a server certificate was issued. */
  serverIssued?: string;
}

/**
 * The material for `names`: `current`'s CA and server certificate where they can stay (see the
 * module comment), new ones where not. A new CA always comes with a new server certificate.
 */
export function keepOrIssue(current: CurrentCertificates, names: readonly string[], now: Date): TlsDecision {
  const problem = current.ca ? caProblem(current.ca, now) : 'there is none';
  const ca = problem === undefined ? (current.ca as CertificateAuthority) : makeCertificateAuthority('IoT gateway CA', CA_VALIDITY_DAYS);
  const serverIssued = problem === undefined ? serverProblem(current.server ?? {}, ca, names, now) : 'the CA is new';
  const server = serverIssued === undefined ? (current.server as ServerCertificate) : issueServer(ca, names);
  return {
    certificates: { ca, server },
    ...(current.ca && problem !== undefined ? { caReplaced: problem } : {}),
    ...(serverIssued !== undefined ? { serverIssued } : {}),
  };
}

/** A server certificate signed by `ca` for `names`; tls.crt carries the chain: it, then the CA. */
function issueServer(ca: CertificateAuthority, names: readonly string[]): ServerCertificate {
  const issued = issueCertificate(ca, names, SERVER_VALIDITY_DAYS, 'IoT gateway');
  return { cert: `${issued.cert.trimEnd()}\n${ca.cert.trimEnd()}\n`, key: issued.key };
}

const encode = (text: string) => Buffer.from(text, 'utf8').toString('base64');

/** A Secret's `key` as text, or undefined when it has none. */
function decoded(secret: V1Secret, key: string): string | undefined {
  const value = secret.data?.[key];
  return value ? Buffer.from(value, 'base64').toString('utf8') : undefined;
}

/** Reads the CA back from Secret gateway-ca's data (base64). */
export function caOfSecret(secret: V1Secret | undefined): Partial<CertificateAuthority> | undefined {
  return secret && { cert: decoded(secret, 'ca.crt'), key: decoded(secret, 'ca.key') };
}

/** Reads the server certificate back from Secret gateway-tls's data (base64). */
export function serverOfSecret(secret: V1Secret | undefined): Partial<ServerCertificate> | undefined {
  return secret && { cert: decoded(secret, 'tls.crt'), key: decoded(secret, 'tls.key') };
}

/** Secret gateway-ca: the instance CA's certificate and key. Mounted into no pod. */
export function desiredGatewayCaSecret(instance: Instance, ca: CertificateAuthority): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: GATEWAY_CA_SECRET, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'Opaque',
    data: { 'ca.crt': encode(ca.cert), 'ca.key': encode(ca.key) },
  };
}

/** Secret gateway-tls: what the gateway pods read at GATEWAY_TLS_DIR. */
export function desiredGatewayTlsSecret(instance: Instance, material: GatewayTlsMaterial): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: GATEWAY_TLS_SECRET, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'kubernetes.io/tls',
    data: {
      'ca.crt': encode(material.caCert),
      ...(material.clientCA ? { 'client-ca.crt': encode(material.clientCA) } : {}),
      'tls.crt': encode(material.server.cert),
      'tls.key': encode(material.server.key),
    },
  };
}

/** ConfigMap gateway-ca: the CA certificate devices trust the gateway by. */
export function desiredGatewayCaConfigMap(instance: Instance, material: GatewayTlsMaterial): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: GATEWAY_CA_CONFIGMAP, namespace: instance.namespace, labels: instanceLabels(instance) },
    data: { 'ca.crt': material.caCert },
  };
}
