/**
 * The gateway's server certificate from cert-manager, for an instance whose
 * `spec.gateway.tls.issuerRef` names an Issuer or ClusterIssuer: the Certificate the operator
 * writes, and how it reads back what cert-manager made of it.
 *
 * Guarantees: every function here is pure. `desiredGatewayCertificate` is a cert-manager.io/v1
 * Certificate `<instance>-gateway` in the landscape namespace (the IoTService's, where a namespaced
 * Issuer must be: cert-manager issues from an Issuer of the Certificate's own namespace only),
 * labelled with the instance labels and controlled by the IoTService (it goes with it), for Secret
 * `<instance>-gateway-tls` (the instance labels go onto it through secretTemplate), covering
 * exactly the names of `gatewayCertificateNames` (DNS names and IP addresses), for server auth,
 * 90 days, renewed 30 days before it expires, issued by the issuerRef's issuer (group
 * cert-manager.io). `certificateState` says whether cert-manager reports it Ready for its current
 * generation, with cert-manager's own messages. `issuedMaterial` reads what cert-manager issued
 * (tls.crt, tls.key, ca.crt) or says what it lacks; `issuerState` reads an Issuer's or
 * ClusterIssuer's readiness.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { V1OwnerReference, V1Secret } from '@kubernetes/client-node';
import type { KubeObject } from '@iot-operator/runtime';
import { IOTSERVICE_API_VERSION, IOTSERVICE_KIND, type IssuerKind } from '../api/iotservice.ts';
import type { GatewayTlsMaterial } from './gateway-tls.ts';
import { RENEW_BEFORE_MS, SERVER_VALIDITY_DAYS } from './instance-ca.ts';
import { instanceLabels, type InstanceIdentity } from './labels.ts';
import type { Instance } from './instance.ts';

export const CERT_MANAGER_GROUP = 'cert-manager.io';
/** How long a certificate cert-manager issues lasts, and how long before its end it is renewed: as the instance CA's server certificates. */
export const ISSUED_DURATION = `${SERVER_VALIDITY_DAYS * 24}h`;
export const ISSUED_RENEW_BEFORE = `${RENEW_BEFORE_MS / 3_600_000}h`;

/** spec.gateway.tls.issuerRef. */
export interface IssuerRef {
  kind: IssuerKind;
  name: string;
}

/** A cert-manager condition as it reports it. */
interface CertManagerCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

/** The parts of a cert-manager Certificate the operator writes and reads. */
export interface GatewayCertificate extends KubeObject {
  spec: {
    secretName: string;
    secretTemplate: { labels: Record<string, string> };
    dnsNames?: string[];
    ipAddresses?: string[];
    duration: string;
    renewBefore: string;
    usages: string[];
    issuerRef: { group: string; kind: IssuerKind; name: string };
  };
  status?: { conditions?: CertManagerCondition[]; revision?: number; notAfter?: string };
}

/** The Certificate of an instance: `<instance>-gateway`. */
export function gatewayCertificateName(identity: InstanceIdentity): string {
  return `${identity.id}-gateway`;
}

/** The Secret cert-manager issues into: `<instance>-gateway-tls`, in the landscape namespace. */
export function issuedSecretName(identity: InstanceIdentity): string {
  return `${identity.id}-gateway-tls`;
}

/** `landscape/name` of the instance's Certificate, as messages name it. */
export function certificateRef(identity: InstanceIdentity): string {
  return `${identity.landscape}/${gatewayCertificateName(identity)}`;
}

/** The IoTService as the controlling owner of what the operator writes in the landscape. */
function ownerReference(instance: Instance): V1OwnerReference {
  return { apiVersion: IOTSERVICE_API_VERSION, kind: IOTSERVICE_KIND, name: instance.id, uid: instance.ownerUid, controller: true };
}

/** The Certificate for `names` (`DNS:<name>` and `IP:<address>` entries, gatewayCertificateNames) from `issuerRef`. */
export function desiredGatewayCertificate(instance: Instance, issuerRef: IssuerRef, names: readonly string[]): GatewayCertificate {
  const labels = instanceLabels(instance);
  const dnsNames = names.filter((n) => n.startsWith('DNS:')).map((n) => n.slice(4));
  const ipAddresses = names.filter((n) => n.startsWith('IP:')).map((n) => n.slice(3));
  return {
    apiVersion: `${CERT_MANAGER_GROUP}/v1`,
    kind: 'Certificate',
    metadata: { name: gatewayCertificateName(instance), namespace: instance.landscape, labels, ownerReferences: [ownerReference(instance)] },
    spec: {
      secretName: issuedSecretName(instance),
      secretTemplate: { labels },
      ...(dnsNames.length > 0 ? { dnsNames } : {}),
      ...(ipAddresses.length > 0 ? { ipAddresses } : {}),
      duration: ISSUED_DURATION,
      renewBefore: ISSUED_RENEW_BEFORE,
      usages: ['server auth', 'digital signature', 'key encipherment'],
      issuerRef: { group: CERT_MANAGER_GROUP, kind: issuerRef.kind, name: issuerRef.name },
    },
  };
}

/** What cert-manager says of a Certificate. */
export interface CertificateState {
  /** Ready=True for the Certificate's current generation: its Secret holds what the spec asks for. */
  ready: boolean;
  /** Its Ready condition's message; undefined when cert-manager has not reported on it (yet). */
  message?: string;
  /** Set when cert-manager's last issuance failed (condition Issuing False, reason Failed): its message. */
  issuanceFailed?: string;
}

export function certificateState(certificate: GatewayCertificate): CertificateState {
  const conditions = certificate.status?.conditions ?? [];
  const generation = certificate.metadata.generation;
  const current = (c: CertManagerCondition) => generation === undefined || c.observedGeneration === undefined || c.observedGeneration === generation;
  const ready = conditions.find((c) => c.type === 'Ready' && current(c));
  const issuing = conditions.find((c) => c.type === 'Issuing' && current(c));
  return {
    ready: ready?.status === 'True',
    ...(ready?.message ? { message: ready.message } : {}),
    ...(issuing?.status === 'False' && issuing.reason === 'Failed' ? { issuanceFailed: issuing.message ?? 'the issuance failed' } : {}),
  };
}

/** What an Issuer or ClusterIssuer reports: absent, Ready, or not ready with its message. */
export type IssuerState = { exists: false } | { exists: true; ready: boolean; message?: string };

export function issuerState(issuer: KubeObject | undefined): IssuerState {
  if (!issuer) return { exists: false };
  const ready = ((issuer as { status?: { conditions?: CertManagerCondition[] } }).status?.conditions ?? []).find((c) => c.type === 'Ready');
  return { exists: true, ready: ready?.status === 'True', ...(ready?.message ? { message: ready.message } : {}) };
}

const text = (secret: V1Secret, key: string) => {
  const value = secret.data?.[key];
  return value ? Buffer.from(value, 'base64').toString('utf8') : undefined;
};

/** The material in the Secret cert-manager issued into, or what keeps it from being used. */
export function issuedMaterial(secret: V1Secret | undefined): { ok: true; material: GatewayTlsMaterial } | { ok: false; problem: string } {
  if (!secret) return { ok: false, problem: 'it does not exist' };
  const [cert, key, caCert] = [text(secret, 'tls.crt'), text(secret, 'tls.key'), text(secret, 'ca.crt')];
  if (!cert || !key) return { ok: false, problem: 'it holds no tls.crt and tls.key' };
  if (!caCert) return { ok: false, problem: "it holds no ca.crt: the issuer does not say which CA devices are to trust (use a CA, SelfSigned or Vault issuer)" };
  try {
    const leaf = new X509Certificate(cert);
    if (!leaf.checkPrivateKey(createPrivateKey(key))) return { ok: false, problem: 'its tls.key does not belong to its tls.crt' };
    new X509Certificate(caCert);
  } catch (err) {
    return { ok: false, problem: `it does not hold PEM certificates and a key: ${(err as Error).message}` };
  }
  return { ok: true, material: { caCert, server: { cert, key } } };
}
