/**
 * Per instance whose `spec.gateway.tls.issuerRef` names a cert-manager issuer, the gateway's server
 * certificate as cert-manager issues it (resources/gateway-certificate.ts): the Certificate written
 * in the landscape namespace, its readiness, and what it issued, copied into the instance's
 * children by the reconcile.
 *
 * Guarantees:
 * - cert-manager's Certificates not served by the API server (its CRDs absent, as the cache's
 *   optional informer sees it, or a write answered 404) is a `CertManagerNotInstalled` failure,
 *   with no other request made.
 * - The Certificate is applied (server-side, the operator's field manager) only when the cache
 *   lacks it or shows another desired form (the hash stamp of `stamp`, which also adds a shard's
 *   label): a Certificate deleted, or edited, is written again at the next reconcile, which its
 *   watch brings at once.
 * - The Secret cert-manager issued into is read (one GET) only when the Certificate's UID or
 *   `status.revision` (cert-manager counts each issuance) differs from those of the copy
 *   remembered, or none is remembered; so a renewal is copied after cert-manager reports it, and
 *   an unchanged Certificate costs no request.
 * - Ready for its current generation and what it issued usable: `ready`, with that material (the
 *   issuer's ca.crt as the CA devices trust). Not Ready: the issuer is looked up (one GET of the
 *   Issuer in the landscape, or the ClusterIssuer); missing or not Ready, or cert-manager's last
 *   issuance failed, is a `CertificateNotReady` failure naming the Certificate, cert-manager's
 *   message and the issuer's state; otherwise `waiting` (reason `WaitingForCertificate`) with
 *   cert-manager's Ready message, and the material issued before, if any, to keep rendering. Ready
 *   but what it issued is unusable (no ca.crt, a key not of the certificate): `CertificateNotReady`.
 *   No message contains anything that changes between reconciles but what cert-manager says.
 * - `remove` deletes an instance's Certificate (by its UID) and the Secret it issued into (only when
 *   that Secret carries the instance's labels) when the cache holds such a Certificate labelled for
 *   the instance: for an
 *   instance no longer using issuerRef, and when its IoTService is deleted. Without one it makes no
 *   request.
 * - Every call goes through `permitted`, so a 403 names the permission; API errors other than
 *   those above are thrown as they came.
 */
import type { V1Secret } from '@kubernetes/client-node';
import { Kinds, firstDifference, ifFound, isApiError, isNotFound, type CacheReader, type KubeApi, type KubeObject } from '@iot-operator/runtime';
import { apiRefusedFailure, certificateNotReadyFailure, certManagerNotInstalledFailure, type Failure, type RefusedRequest } from './failure.ts';
import { CertificateType, ClusterIssuerType, FIELD_MANAGER, IssuerType } from './iotservice-types.ts';
import {
  certificateRef,
  certificateState,
  desiredGatewayCertificate,
  gatewayCertificateName,
  instanceIdOf,
  issuedMaterial,
  issuedSecretName,
  issuerState,
  type GatewayCertificate,
  type GatewayTlsMaterial,
  type Instance,
  type InstanceIdentity,
  type IssuerRef,
} from './resources/index.ts';
import type { Waiting } from './status/status.ts';

export interface IssuedContext {
  client: KubeApi;
  cache: Pick<CacheReader, 'get' | 'served'>;
  /** Runs a call; a 403 becomes the controller's report of the permission `request` names. */
  permitted: <T>(request: RefusedRequest, call: () => Promise<T>) => Promise<T>;
  /** The Certificate as it is applied and compared: stamped with the hash of its desired form (and a shard's label). */
  stamp: (certificate: GatewayCertificate) => KubeObject;
}

/** What cert-manager's certificate gives the reconcile now. */
export type IssuedResult =
  | { kind: 'ready'; material: GatewayTlsMaterial }
  | { kind: 'waiting'; waiting: Waiting; material?: GatewayTlsMaterial }
  | { kind: 'failed'; failure: Failure };

interface Copied {
  /** The Certificate's UID and status.revision when its Secret was copied. */
  uid: string;
  revision: number | undefined;
  material: GatewayTlsMaterial;
}

const CERTIFICATES = 'certificates.cert-manager.io';

export class IssuedCertificates {
  private readonly byInstance = new Map<string, Copied>();

  async material(ctx: IssuedContext, key: string, instance: Instance, issuerRef: IssuerRef, names: readonly string[]): Promise<IssuedResult> {
    if (!ctx.cache.served(CertificateType)) return { kind: 'failed', failure: certManagerNotInstalledFailure() };
    const name = gatewayCertificateName(instance);
    const desired = ctx.stamp(desiredGatewayCertificate(instance, issuerRef, names));
    let certificate = ctx.cache.get<GatewayCertificate>(CertificateType, name, instance.landscape);
    if (!certificate || firstDifference(desired, certificate) !== undefined) {
      const write = { verb: 'patch', resource: CERTIFICATES, namespace: instance.landscape, purpose: `write Certificate ${name}, the gateway's server certificate from cert-manager` };
      try {
        certificate = await ctx.permitted(write, () => ctx.client.apply<GatewayCertificate>(CertificateType, desired as GatewayCertificate, { fieldManager: FIELD_MANAGER, force: true }));
      } catch (err) {
        if (isNotFound(err)) return { kind: 'failed', failure: certManagerNotInstalledFailure() };
        if (isApiError(err, 'Invalid')) return { kind: 'failed', failure: apiRefusedFailure('Invalid', { kind: 'Certificate', name, namespace: instance.landscape }, err.message) };
        throw err;
      }
    }
    const copied = await this.copy(ctx, key, instance, certificate);
    const state = certificateState(certificate);
    const ref = certificateRef(instance);
    if (state.ready) {
      if (copied.ok) return { kind: 'ready', material: copied.material };
      return { kind: 'failed', failure: certificateNotReadyFailure(ref, `cert-manager reports it Ready, but Secret ${instance.landscape}/${issuedSecretName(instance)} it issued into is unusable: ${copied.problem}`) };
    }
    const said = state.message ?? 'cert-manager has not reported on it yet (is its controller running?)';
    const issuer = await this.issuer(ctx, instance, issuerRef);
    const issuerName = `${issuerRef.kind} ${issuerRef.name}${issuerRef.kind === 'Issuer' ? ` in namespace ${instance.landscape}` : ''}`;
    if (!issuer.exists) return { kind: 'failed', failure: certificateNotReadyFailure(ref, `${said}; ${issuerName} does not exist: create it, or name an existing one in spec.gateway.tls.issuerRef`) };
    if (!issuer.ready) return { kind: 'failed', failure: certificateNotReadyFailure(ref, `${said}; ${issuerName} is not ready${issuer.message ? `: ${issuer.message}` : ''}`) };
    if (state.issuanceFailed) return { kind: 'failed', failure: certificateNotReadyFailure(ref, `${said}; cert-manager's last issuance failed: ${state.issuanceFailed}`) };
    const waiting: Waiting = { reason: 'WaitingForCertificate', message: `Waiting for cert-manager to issue Certificate ${ref} (spec.gateway.tls.issuerRef ${issuerName}): ${said.replace(/\.?$/, '.')}` };
    return { kind: 'waiting', waiting, ...(copied.ok ? { material: copied.material } : {}) };
  }

  /** Deletes the instance's Certificate and the Secret it issued into, when the cache holds the Certificate. */
  async remove(ctx: Pick<IssuedContext, 'client' | 'cache' | 'permitted'>, key: string, identity: InstanceIdentity): Promise<void> {
    this.byInstance.delete(key);
    const name = gatewayCertificateName(identity);
    const certificate = ctx.cache.get<GatewayCertificate>(CertificateType, name, identity.landscape);
    if (!certificate || instanceIdOf(certificate.metadata.labels, identity.landscape) !== identity.id) return;
    const gone = (err: unknown) => (isNotFound(err) || isApiError(err, 'Conflict') ? undefined : Promise.reject(err));
    const purpose = 'remove what cert-manager issued for spec.gateway.tls.issuerRef, no longer used';
    await ctx.permitted({ verb: 'delete', resource: CERTIFICATES, namespace: identity.landscape, purpose }, () =>
      ctx.client.delete(CertificateType, name, identity.landscape, { preconditions: { uid: certificate.metadata.uid } }).catch(gone),
    );
    const secretName = issuedSecretName(identity);
    const secret = await ctx.permitted({ verb: 'get', resource: 'secrets', namespace: identity.landscape, purpose }, () =>
      ctx.client.get<V1Secret & KubeObject>(Kinds.Secret, secretName, identity.landscape).catch(gone),
    );
    if (!secret || instanceIdOf(secret.metadata.labels, identity.landscape) !== identity.id) return;
    await ctx.permitted({ verb: 'delete', resource: 'secrets', namespace: identity.landscape, purpose }, () =>
      ctx.client.delete(Kinds.Secret, secretName, identity.landscape, { preconditions: { uid: secret.metadata.uid } }).catch(gone),
    );
  }

  forget(key: string): void {
    this.byInstance.delete(key);
  }

  /** What cert-manager issued for `certificate`: the copy remembered for its revision, else read from its Secret. */
  private async copy(ctx: IssuedContext, key: string, instance: Instance, certificate: GatewayCertificate): Promise<{ ok: true; material: GatewayTlsMaterial } | { ok: false; problem: string }> {
    const uid = certificate.metadata.uid ?? '';
    const revision = certificate.status?.revision;
    const remembered = this.byInstance.get(key);
    if (remembered && remembered.uid === uid && remembered.revision === revision) return { ok: true, material: remembered.material };
    const secretName = issuedSecretName(instance);
    const secret = await ctx.permitted({ verb: 'get', resource: 'secrets', namespace: instance.landscape, purpose: `read Secret ${secretName}, which cert-manager issued the gateway's certificate into` }, () =>
      ifFound(ctx.client.get<V1Secret & KubeObject>(Kinds.Secret, secretName, instance.landscape)),
    );
    const read = issuedMaterial(secret);
    if (!read.ok) return read;
    this.byInstance.set(key, { uid, revision, material: read.material });
    return read;
  }

  /** The issuer spec.gateway.tls.issuerRef names, as it is now. */
  private async issuer(ctx: IssuedContext, instance: Instance, issuerRef: IssuerRef) {
    const cluster = issuerRef.kind === 'ClusterIssuer';
    const type = cluster ? ClusterIssuerType : IssuerType;
    const request = { verb: 'get', resource: `${type.plural}.${type.group}`, ...(cluster ? {} : { namespace: instance.landscape }), purpose: `look up ${issuerRef.kind} ${issuerRef.name}, which has not issued the gateway's certificate` };
    const found = await ctx.permitted(request, () => ifFound(ctx.client.get(type, issuerRef.name, cluster ? undefined : instance.landscape)));
    return issuerState(found);
  }
}
