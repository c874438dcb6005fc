/**
 * The webhook certificate kept in a Secret of the operator's namespace, so every replica of an
 * operator serves the same certificate and the CRDs and webhook configurations trust one CA (the
 * pattern of OPA's cert-controller), without cert-manager or openssl.
 *
 * Guarantees of `ensureWebhookCertificateSecret(client, { namespace, name, names, managedBy })`:
 * - a Secret whose ca.crt, tls.crt and tls.key form a certificate `usableCertificate` accepts for
 *   `names` is returned unchanged, so a restart keeps the CA;
 * - otherwise a new certificate is made and written: a missing Secret is created (type
 *   kubernetes.io/tls, labelled app.kubernetes.io/managed-by=`managedBy`); an existing one is
 *   replaced under the resourceVersion read, its other keys, labels and annotations kept;
 * - when another writer got there first (AlreadyExists, Conflict), the Secret is read again and
 *   the winner's certificate used when usable, so concurrent replicas end with one certificate;
 *   after a few rounds lost to writers whose certificate is never usable, it fails naming the
 *   Secret; any other API error is thrown as it came;
 * - nothing is ever deleted.
 */
import type { KubeApi } from '../client/client.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../client/errors.ts';
import { Kinds, type KubeObject } from '../client/resource.ts';
import { makeWebhookCertificate, usableCertificate, type WebhookCertificate } from './certificates.ts';

const ROUNDS = 5;

export interface WebhookCertificateSecretOptions {
  namespace: string;
  name: string;
  /** The names the certificate must cover: `DNS:<service>.<namespace>.svc`, `IP:<address>`. */
  names: readonly string[];
  /** The app.kubernetes.io/managed-by label of a Secret created here, e.g. `iot-operator`. */
  managedBy: string;
}

type Secret = KubeObject & { type?: string; data?: Record<string, string> };

function certificateOf(secret: Secret | undefined): Partial<WebhookCertificate> {
  const decode = (key: string) => (secret?.data?.[key] ? Buffer.from(secret.data[key], 'base64').toString('utf8') : undefined);
  return { ca: decode('ca.crt'), cert: decode('tls.crt'), key: decode('tls.key') };
}

function dataOf(certificate: WebhookCertificate): Record<string, string> {
  const encode = (text: string) => Buffer.from(text).toString('base64');
  return { 'ca.crt': encode(certificate.ca), 'tls.crt': encode(certificate.cert), 'tls.key': encode(certificate.key) };
}

/** The certificate of Secret `name` for `names`: the one there when usable, else a new one written to it. */
export async function ensureWebhookCertificateSecret(client: Pick<KubeApi, 'get' | 'create' | 'replace'>, options: WebhookCertificateSecretOptions): Promise<WebhookCertificate> {
  const { namespace, name, names, managedBy } = options;
  for (let round = 0; ; round++) {
    const secret = await client.get<Secret>(Kinds.Secret, name, namespace).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    const current = certificateOf(secret);
    if (usableCertificate(current, names)) return current as WebhookCertificate;
    if (round === ROUNDS) break;
    const made = makeWebhookCertificate(names);
    try {
      if (secret) {
        await client.replace<Secret>(Kinds.Secret, { ...secret, data: { ...secret.data, ...dataOf(made) } });
      } else {
        const labels = { 'app.kubernetes.io/managed-by': managedBy };
        await client.create<Secret>(Kinds.Secret, { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name, namespace, labels }, data: dataOf(made) });
      }
      return made;
    } catch (err) {
      if (!isAlreadyExists(err) && !isConflict(err)) throw err;
    }
  }
  throw new Error(`Secret ${namespace}/${name}: the webhook certificate for ${names.join(', ')} lost ${ROUNDS} writes in a row to other writers, whose certificate does not cover those names (another process keeps writing this Secret?)`);
}
