/**
 * The gateway's TLS material: the instance CA and the server certificate it signs, and the
 * children that hold them.
 *
 * Guarantees: `gatewayCertificateNames` lists what the server certificate covers: the gateway
 * Service's four in-cluster names, its addresses once it has them (cluster IPs, a load
 * balancer's IPs) and `spec.gateway.tls.hostnames` (an IP address as `IP:`), each once; the
 * instance CA keeps or issues it for those names as GATEWAY_CERTIFICATE_PROFILE says
 * (instance-ca.ts `keepOrIssue`: a server certificate only). The material of
 * the children is either that (`instanceCaMaterial`) or a certificate cert-manager issued
 * (gateway-certificate.ts, for `spec.gateway.tls.issuerRef`), which has no instance CA. Children:
 * Secret `gateway-ca` (ca.crt, ca.key; mounted nowhere; only with an instance CA), Secret
 * `gateway-tls` (kubernetes.io/tls: tls.crt the server certificate followed by its chain — the
 * instance CA's certificate, or what cert-manager put there —, tls.key, ca.crt, and client-ca.crt
 * when `spec.gateway.tls.clientCA` names one; what the gateway reads), ConfigMap `gateway-ca`
 * (ca.crt, for devices) — made only for an instance that `servesTls`. Every function here is pure.
 */

import { isIP } from 'node:net';
import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import type { CertificateAuthority } from '@iot-operator/runtime';
import { caSecretData, leafSecretData, type CaCertificates, type CertificateProfile, type ServerCertificate } from './instance-ca.ts';
import type { Instance } from './instance.ts';
import { instanceLabels } from './labels.ts';

export const GATEWAY_CA_SECRET = 'gateway-ca';
export const GATEWAY_TLS_SECRET = 'gateway-tls';
export const GATEWAY_CA_CONFIGMAP = 'gateway-ca';
/** Where the gateway pods find Secret gateway-tls. */
export const GATEWAY_TLS_DIR = '/etc/iot/tls';
/** The gateway Service's name (services.ts names it after its component). */
export const GATEWAY_SERVICE = 'gateway';
/** How the instance CA's gateway certificates are made: a server certificate only. */
export const GATEWAY_CERTIFICATE_PROFILE: CertificateProfile = { caName: 'IoT gateway CA', leafName: 'IoT gateway', clientAuth: false };

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
export function instanceCaMaterial(certificates: CaCertificates): GatewayTlsMaterial {
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

/** Secret gateway-ca: the instance CA's certificate and key. Mounted into no pod. */
export function desiredGatewayCaSecret(instance: Instance, ca: CertificateAuthority): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: GATEWAY_CA_SECRET, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'Opaque',
    data: caSecretData(ca),
  };
}

/** Secret gateway-tls: what the gateway pods read at GATEWAY_TLS_DIR. */
export function desiredGatewayTlsSecret(instance: Instance, material: GatewayTlsMaterial): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: GATEWAY_TLS_SECRET, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'kubernetes.io/tls',
    // Keys in the API server's (sorted) order.
    data: Object.fromEntries(
      Object.entries({
        ...leafSecretData(material.caCert, material.server),
        ...(material.clientCA ? { 'client-ca.crt': Buffer.from(material.clientCA, 'utf8').toString('base64') } : {}),
      }).sort(([a], [b]) => a.localeCompare(b)),
    ),
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
