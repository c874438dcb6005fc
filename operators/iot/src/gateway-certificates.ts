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
 * Guarantees of the instance CA:
 * - The Secrets' bodies (the cache holds their metadata only) are read through ChildBodies only
 *   when the cache shows either Secret at another resourceVersion than when the material was last
 *   judged, or nothing is remembered (after a restart); otherwise the remembered material is
 *   judged again (renewal time, names) without a read. So the CA in the Secret is kept across
 *   reconciles and restarts. With nothing remembered and neither Secret in the cache, both are
 *   got from the API server before anything is made: a shard that has just taken an instance over,
 *   or a cache still catching up, keeps the CA devices trust instead of making a new one. A gateway Service made or
 *   readdressed after the certificate brings a new one.
 * - A CA Secret edited into something unusable is replaced by the CA remembered from before or,
 *   without one, a new CA; a Warning Event `GatewayCAReplaced` says what was wrong. A missing
 *   Secret (not created yet, or created a moment ago and not cached yet) makes no new CA while
 *   one is remembered. Secret gateway-tls gone from the cache after it was seen there was deleted
 *   (a cache loses a Secret no other way): a new server certificate is issued by the same CA, as
 *   deleting a certificate's Secret asks for (a key thought exposed); a deleted gateway-ca is
 *   restored with the CA remembered, which devices trust. Every server certificate issued is
 *   recorded as a Normal Event `GatewayCertificateIssued` saying why (a new CA, other names,
 *   renewal due, unreadable).
 * - `spec.gateway.tls.clientCA` is read (one GET of the ConfigMap in the IoTService's namespace) on
 *   every call while it is set; a ConfigMap missing or without ca.crt is a `ClientCANotFound`
 *   failure, not an empty client CA.
 * - Errors of the API (reads) are thrown as they came; nothing of the instance CA's is written
 *   here: the material becomes children (resources/index.ts) that the reconcile writes like any
 *   other (with issuerRef only the Certificate is written, by gateway-issued-certificates.ts).
 */
import { createHash } from 'node:crypto';
import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import { Kinds, ifFound, type KubeObject } from '@iot-operator/runtime';
import type { ChildBodies } from './child-bodies.ts';
import { clientCANotFoundFailure, type Failure } from './failure.ts';
import { IssuedCertificates, type IssuedContext } from './gateway-issued-certificates.ts';
import {
  GATEWAY_CA_SECRET,
  GATEWAY_SERVICE,
  GATEWAY_TLS_SECRET,
  caOfSecret,
  caProblem,
  certificateExpiry,
  gatewayCertificateNames,
  gatewayServiceAddresses,
  instanceCaMaterial,
  keepOrIssue,
  renewalTime,
  serverOfSecret,
  type CurrentCertificates,
  type GatewayCertificates,
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

interface Remembered {
  certificates: GatewayCertificates;
  /** The resourceVersions of gateway-ca and gateway-tls in the cache when they were last judged. */
  observed: string;
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

export class GatewayCertificateKeeper {
  private readonly byInstance = new Map<string, Remembered>();
  private readonly issued = new IssuedCertificates();

  constructor(private readonly bodies: ChildBodies) {}

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
      this.byInstance.delete(key);
      const issued = await this.issued.material(ctx, key, instance, issuerRef, names);
      if (issued.kind === 'failed') return issued;
      if (issued.kind === 'ready') return { kind: 'ready', tls: gatewayTls(withClientCA(issued.material)) };
      // Not ready: what was issued before, if anything, is rendered meanwhile.
      if (!issued.material) return { kind: 'waiting', waiting: issued.waiting };
      return { kind: 'ready', tls: gatewayTls(withClientCA(issued.material)), waiting: issued.waiting };
    }
    await this.issued.remove(ctx, key, instance);
    const certificates = await this.certificates(ctx, key, instance, names, now);
    return { kind: 'ready', tls: { ...gatewayTls(withClientCA(instanceCaMaterial(certificates))), renewAt: renewalTime(certificates.server.cert) } };
  }

  /** For an instance serving no TLS, or whose IoTService is being deleted: what cert-manager issued for it is removed. */
  async release(ctx: Pick<TlsContext, 'client' | 'cache' | 'permitted'>, key: string, identity: InstanceIdentity): Promise<void> {
    this.byInstance.delete(key);
    await this.issued.remove(ctx, key, identity);
  }

  forget(key: string): void {
    this.byInstance.delete(key);
    this.issued.forget(key);
  }

  private async certificates(ctx: TlsContext, key: string, instance: Instance, names: readonly string[], now: Date): Promise<GatewayCertificates> {
    const cached = (name: string) => ctx.cache.get<V1Secret & KubeObject>(Kinds.Secret, name, instance.namespace);
    const [caSecret, tlsSecret] = [cached(GATEWAY_CA_SECRET), cached(GATEWAY_TLS_SECRET)];
    const observed = `${caSecret?.metadata.resourceVersion ?? ''}/${tlsSecret?.metadata.resourceVersion ?? ''}`;
    const remembered = this.byInstance.get(key);
    /** Seen in the cache when last judged, absent now: deleted. */
    const tlsDeleted = !tlsSecret && remembered !== undefined && remembered.observed.split('/')[1] !== '';
    let current: CurrentCertificates = remembered ? { ca: remembered.certificates.ca, ...(tlsDeleted ? {} : { server: remembered.certificates.server }) } : {};
    if (!remembered || (remembered.observed !== observed && (caSecret || tlsSecret))) {
      // Our own write read back, or someone's edit.
      const read = async (name: string, secret: KubeObject | undefined): Promise<V1Secret | undefined> => {
        if (secret) return (await this.bodies.read(ctx.client, Kinds.Secret, secret)) as V1Secret | undefined;
        if (remembered) return undefined;
        // Neither cached nor remembered: the API server may still hold it (an instance a shard has
        // just taken over, a cache catching up), with the CA devices trust. Asked before making one.
        return ifFound(ctx.client.get<V1Secret & KubeObject>(Kinds.Secret, name, instance.namespace));
      };
      const [ca, server] = [caOfSecret(await read(GATEWAY_CA_SECRET, caSecret)), serverOfSecret(await read(GATEWAY_TLS_SECRET, tlsSecret))];
      const unusable = ca && caProblem(ca, now);
      if (unusable && remembered) {
        ctx.event('Warning', 'GatewayCAReplaced', `Secret ${GATEWAY_CA_SECRET} of namespace ${instance.namespace} is restored: ${unusable}. It holds the CA devices trust the gateway by again.`);
      } else {
        current = { ca: ca ?? current.ca, server: server ?? current.server };
      }
    }
    const decision = keepOrIssue(current, names, now);
    if (decision.caReplaced) {
      ctx.event('Warning', 'GatewayCAReplaced', `Secret ${GATEWAY_CA_SECRET} of namespace ${instance.namespace} was replaced by a new CA: ${decision.caReplaced}. Devices must trust the new CA (ConfigMap gateway-ca, status.gateway.tls).`);
    }
    if (decision.serverIssued) {
      const expiry = certificateExpiry(decision.certificates.server.cert).toISOString();
      const why = tlsDeleted && current.ca === decision.certificates.ca ? `Secret ${GATEWAY_TLS_SECRET} was deleted` : decision.serverIssued;
      ctx.event('Normal', 'GatewayCertificateIssued', `Issued the gateway's server certificate for ${names.join(', ')}, valid until ${expiry}: ${why}.`);
    }
    this.byInstance.set(key, { certificates: decision.certificates, observed });
    return decision.certificates;
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
  const fingerprint = createHash('sha256').update(JSON.stringify(material)).digest('base64url').slice(0, 22);
  return { material, fingerprint, notAfter: certificateExpiry(material.server.cert) };
}
