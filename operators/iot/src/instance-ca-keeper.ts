/**
 * Per instance, an instance CA and its leaf certificate (resources/instance-ca.ts) as the reconcile
 * uses them: read back from their two Secrets, kept or renewed, remembered between reconciles. The
 * one keeper of what the gateway's own CA (gateway-certificates.ts) and the backups' mutual TLS
 * (backup-certificates.ts) have alike; each names its Secrets, its profile and its Events.
 *
 * Guarantees:
 * - The Secrets' bodies (the cache holds their metadata only) are read through ChildBodies only
 *   when the cache shows either Secret at another resourceVersion than when the material was last
 *   judged, or nothing is remembered (after a restart); otherwise the remembered material is
 *   judged again (renewal time, names) without a read. So the CA in the Secret is kept across
 *   reconciles and restarts. With nothing remembered and neither Secret in the cache, both are
 *   got from the API server before anything is made: a shard that has just taken an instance over,
 *   or a cache still catching up, keeps the CA the peers trust instead of making a new one.
 * - A CA Secret edited into something unusable is replaced by the CA remembered from before or,
 *   without one, a new CA; a Warning Event (`events.caReplaced`) says what was wrong. A missing
 *   Secret (not created yet, or created a moment ago and not cached yet) makes no new CA while
 *   one is remembered. The leaf's Secret gone from the cache after it was seen there was deleted
 *   (a cache loses a Secret no other way): a new leaf is issued by the same CA, as deleting a
 *   certificate's Secret asks for (a key thought exposed); a deleted CA Secret is restored with
 *   the CA remembered. Every leaf issued is recorded as a Normal Event (`events.issued`) saying
 *   why (a new CA, other names, renewal due, unreadable).
 * - Errors of the API (reads) are thrown as they came; nothing is written here: the material
 *   becomes children that the reconcile writes like any other.
 */
import { createHash } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { Kinds, ifFound, type CacheReader, type KubeApi, type KubeObject } from '@iot-operator/runtime';
import type { ChildBodies } from './child-bodies.ts';
import { caOfSecret, caProblem, certificateExpiry, keepOrIssue, serverOfSecret, type CaCertificates, type CertificateProfile, type CurrentCertificates, type Instance } from './resources/index.ts';

/** What one kind of instance CA is: its Secrets, how its certificates are made, and its Events. */
export interface InstanceCaKind {
  /** The Secret of the CA (ca.crt, ca.key). */
  caSecret: string;
  /** The Secret of the leaf (tls.crt, tls.key). */
  leafSecret: string;
  profile: CertificateProfile;
  events: {
    /** Warning: the CA Secret was unusable. */
    caReplaced: string;
    /** Normal: a leaf was issued. */
    issued: string;
  };
  /** What the leaf is, in an Event: e.g. "the gateway's server certificate". */
  leaf: string;
  /** The Event's last sentence when the CA Secret is restored with the CA remembered. */
  restored: string;
  /** The Event's last sentence when a new CA replaced an unusable one. */
  replaced: string;
}

interface Remembered {
  certificates: CaCertificates;
  /** The resourceVersions of the CA's and the leaf's Secrets in the cache when they were last judged. */
  observed: string;
}

export interface CaKeeperContext {
  client: KubeApi;
  cache: Pick<CacheReader, 'get'>;
  /** Records an Event on the IoTService. */
  event: (type: 'Normal' | 'Warning', reason: string, message: string) => void;
}

export class InstanceCaKeeper {
  private readonly byInstance = new Map<string, Remembered>();

  constructor(
    private readonly bodies: ChildBodies,
    private readonly kind: InstanceCaKind,
  ) {}

  forget(key: string): void {
    this.byInstance.delete(key);
  }

  /** The CA and the leaf for `names` of `instance` (the IoTService `key`) now. */
  async certificates(ctx: CaKeeperContext, key: string, instance: Instance, names: readonly string[], now: Date): Promise<CaCertificates> {
    const { caSecret: caName, leafSecret: leafName } = this.kind;
    const cached = (name: string) => ctx.cache.get<V1Secret & KubeObject>(Kinds.Secret, name, instance.namespace);
    const [caSecret, leafSecret] = [cached(caName), cached(leafName)];
    const observed = `${caSecret?.metadata.resourceVersion ?? ''}/${leafSecret?.metadata.resourceVersion ?? ''}`;
    const remembered = this.byInstance.get(key);
    /** Seen in the cache when last judged, absent now: deleted. */
    const leafDeleted = !leafSecret && remembered !== undefined && remembered.observed.split('/')[1] !== '';
    let current: CurrentCertificates = remembered ? { ca: remembered.certificates.ca, ...(leafDeleted ? {} : { server: remembered.certificates.server }) } : {};
    if (!remembered || (remembered.observed !== observed && (caSecret || leafSecret))) {
      // Our own write read back, or someone's edit.
      const read = async (name: string, secret: KubeObject | undefined): Promise<V1Secret | undefined> => {
        if (secret) return (await this.bodies.read(ctx.client, Kinds.Secret, secret)) as V1Secret | undefined;
        if (remembered) return undefined;
        // Neither cached nor remembered: the API server may still hold it (an instance a shard has
        // just taken over, a cache catching up), with the CA the peers trust. Asked before making one.
        return ifFound(ctx.client.get<V1Secret & KubeObject>(Kinds.Secret, name, instance.namespace));
      };
      const [ca, server] = [caOfSecret(await read(caName, caSecret)), serverOfSecret(await read(leafName, leafSecret))];
      const unusable = ca && caProblem(ca, now);
      if (unusable && remembered) {
        ctx.event('Warning', this.kind.events.caReplaced, `Secret ${caName} of namespace ${instance.namespace} is restored: ${unusable}. ${this.kind.restored}`);
      } else {
        current = { ca: ca ?? current.ca, server: server ?? current.server };
      }
    }
    const decision = keepOrIssue(current, names, now, this.kind.profile);
    if (decision.caReplaced) {
      ctx.event('Warning', this.kind.events.caReplaced, `Secret ${caName} of namespace ${instance.namespace} was replaced by a new CA: ${decision.caReplaced}. ${this.kind.replaced}`);
    }
    if (decision.serverIssued) {
      const expiry = certificateExpiry(decision.certificates.server.cert).toISOString();
      const why = leafDeleted && current.ca === decision.certificates.ca ? `Secret ${leafName} was deleted` : decision.serverIssued;
      ctx.event('Normal', this.kind.events.issued, `Issued ${this.kind.leaf} for ${names.join(', ')}, valid until ${expiry}: ${why}.`);
    }
    this.byInstance.set(key, { certificates: decision.certificates, observed });
    return decision.certificates;
  }
}

/** Changes exactly when `material` (certificates and keys) does: for the reconcile's rendering key. */
export function materialFingerprint(material: unknown): string {
  return createHash('sha256').update(JSON.stringify(material)).digest('base64url').slice(0, 22);
}
