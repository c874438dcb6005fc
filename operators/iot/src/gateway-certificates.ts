/**
 * Per instance, the gateway's TLS material (resources/gateway-tls.ts) as the reconcile uses it:
 * with `spec.gateway.tls.issuerRef`, what cert-manager issued (gateway-issued-certificates.ts);
 * otherwise the instance CA's, read back from Secrets gateway-ca and gateway-tls, kept or renewed,
 * remembered between reconciles.
 *
 * Guarantees:
 * - An instance without issuerRef (or that serves no TLS: `release`) keeps no Certificate: one it
 *   had is removed with what cert-manager issued for it (gateway-issued-certificates.ts `remove`).
 * - The certificate covers the same names whoever issues it (`gatewayCertificateNames` with the
 *   gateway Service's addresses as the cache shows them, or the API server when the cache has no
 *   Service: a shard taking an instance over issues nothing). With issuerRef the material is the
 *   issued one with the client CA added; the renewal is cert-manager's (no `renewAt`).
 *
 * Guarantees of the instance CA: those of instance-ca-keeper.ts, with Secrets gateway-ca and
 * gateway-tls, Events `GatewayCAReplaced` and `GatewayCertificateIssued`, devices trusting the CA;
 * a gateway Service made or readdressed after the certificate brings a new one.
 * - `spec.gateway.tls.clientCA` is read (one GET of the ConfigMap in the IoTService's namespace) on
 *   every call while it is set; a ConfigMap missing or without ca.crt is a `ClientCANotFound`
 *   failure, not an empty client CA.
 * - Errors of the API (reads) are thrown as they came; nothing of the instance CA's is written
 *   here: the material becomes children (resources/index.ts) that the reconcile writes like any
 *   other (with issuerRef only the Certificate is written, by gateway-issued-certificates.ts).
 */
import type { V1ConfigMap, V1Service } from '@kubernetes/client-node';
import { Kinds, ifFound, type KubeObject } from '@iot-operator/runtime';
import type { ChildBodies } from './child-bodies.ts';
import { clientCANotFoundFailure, type Failure } from './failure.ts';
import { IssuedCertificates, type IssuedContext } from './gateway-issued-certificates.ts';
import { InstanceCaKeeper, materialFingerprint, type InstanceCaKind } from './instance-ca-keeper.ts';
import {
  GATEWAY_CA_SECRET,
  GATEWAY_CERTIFICATE_PROFILE,
  GATEWAY_SERVICE,
  GATEWAY_TLS_SECRET,
  certificateExpiry,
  gatewayCertificateNames,
  gatewayServiceAddresses,
  instanceCaMaterial,
  renewalTime,
  type GatewayTlsMaterial,
  type Instance,
  type InstanceIdentity,
} from './resources/index.ts';
import type { Waiting } from './status/status.ts';

/** What a reconcile needs of the gateway's TLS. */
export interface GatewayTls {
  material: GatewayTlsMaterial;
  /** Changes exactly when the material does (for the rendering key). */
  fingerprint: string;
  /** When the instance CA's server certificate is to be renewed: the reconcile comes back then. Absent when cert-manager renews it. */
  renewAt?: Date;
  /** When the server certificate expires. */
  notAfter: Date;
}

export interface TlsContext extends IssuedContext {
  /** Records an Event on the IoTService. */
  event: (type: 'Normal' | 'Warning', reason: string, message: string) => void;
}

/** What the reconcile can make of the gateway's TLS now: material to render (while still waiting for cert-manager, perhaps), or why there is none. */
export type GatewayTlsResult =
  | { kind: 'ready'; tls: GatewayTls; waiting?: Waiting }
  | { kind: 'waiting'; waiting: Waiting }
  | { kind: 'failed'; failure: Failure };

/** The gateway's instance CA: Secrets gateway-ca and gateway-tls, a server certificate that devices trust by the CA. */
const GATEWAY_CA: InstanceCaKind = {
  caSecret: GATEWAY_CA_SECRET,
  leafSecret: GATEWAY_TLS_SECRET,
  profile: GATEWAY_CERTIFICATE_PROFILE,
  events: { caReplaced: 'GatewayCAReplaced', issued: 'GatewayCertificateIssued' },
  leaf: "the gateway's server certificate",
  restored: 'It holds the CA devices trust the gateway by again.',
  replaced: 'Devices must trust the new CA (ConfigMap gateway-ca, status.gateway.tls).',
};

export class GatewayCertificateKeeper {
  private readonly instanceCa: InstanceCaKeeper;
  private readonly issued = new IssuedCertificates();

  constructor(bodies: ChildBodies) {
    this.instanceCa = new InstanceCaKeeper(bodies, GATEWAY_CA);
  }

  /** The material of `instance` (IoTService in namespace `landscape`) now, or what keeps it from being made. */
  async material(ctx: TlsContext, key: string, instance: Instance, now: Date): Promise<GatewayTlsResult> {
    const clientCA = await this.clientCA(ctx, instance);
    if (clientCA !== undefined && !clientCA.ok) return { kind: 'failed', failure: clientCA.failure };
    // Asked of the API server when not cached (a shard that has just taken the instance over, for
    // its first reconciles until the relabelled Service reaches its cache; a Service being made):
    // without its addresses the certificate would be issued again for fewer names, then again once
    // the Service is cached.
    const service =
      ctx.cache.get<V1Service & KubeObject>(Kinds.Service, GATEWAY_SERVICE, instance.namespace) ??
      (await ifFound(ctx.client.get<V1Service & KubeObject>(Kinds.Service, GATEWAY_SERVICE, instance.namespace)));
    const names = gatewayCertificateNames(instance, gatewayServiceAddresses(service));
    const withClientCA = (material: GatewayTlsMaterial): GatewayTlsMaterial => ({ ...material, ...(clientCA?.pem ? { clientCA: clientCA.pem } : {}) });
    const issuerRef = instance.spec.gateway.tls?.issuerRef;
    if (issuerRef) {
      this.instanceCa.forget(key);
      const issued = await this.issued.material(ctx, key, instance, issuerRef, names);
      if (issued.kind === 'failed') return issued;
      if (issued.kind === 'ready') return { kind: 'ready', tls: gatewayTls(withClientCA(issued.material)) };
      // Not ready: what was issued before, if anything, is rendered meanwhile.
      if (!issued.material) return { kind: 'waiting', waiting: issued.waiting };
      return { kind: 'ready', tls: gatewayTls(withClientCA(issued.material)), waiting: issued.waiting };
    }
    await this.issued.remove(ctx, key, instance);
    const certificates = await this.instanceCa.certificates(ctx, key, instance, names, now);
    return { kind: 'ready', tls: { ...gatewayTls(withClientCA(instanceCaMaterial(certificates))), renewAt: renewalTime(certificates.server.cert) } };
  }

  /** For an instance serving no TLS, or whose IoTService is being deleted: what cert-manager issued for it is removed. */
  async release(ctx: Pick<TlsContext, 'client' | 'cache' | 'permitted'>, key: string, identity: InstanceIdentity): Promise<void> {
    this.instanceCa.forget(key);
    await this.issued.remove(ctx, key, identity);
  }

  forget(key: string): void {
    this.instanceCa.forget(key);
    this.issued.forget(key);
  }

  /** The client CA's PEM when spec.gateway.tls.clientCA names one. */
  private async clientCA(ctx: TlsContext, instance: Instance): Promise<{ ok: true; pem: string } | { ok: false; failure: Failure } | undefined> {
    const name = instance.spec.gateway.tls?.clientCA;
    if (!name) return undefined;
    const configMap = await ifFound(ctx.client.get<V1ConfigMap & KubeObject>(Kinds.ConfigMap, name, instance.landscape));
    const pem = configMap?.data?.['ca.crt'];
    return pem ? { ok: true, pem } : { ok: false, failure: clientCANotFoundFailure(name, instance.landscape) };
  }
}

/** The material with its fingerprint and the server certificate's expiry. */
function gatewayTls(material: GatewayTlsMaterial): GatewayTls {
  return { material, fingerprint: materialFingerprint(material), notAfter: certificateExpiry(material.server.cert) };
}
