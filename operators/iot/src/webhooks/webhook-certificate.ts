/**
 * The operator's own webhook certificate (`--webhook-cert-secret`), for an operator deployed
 * without Helm or cert-manager (deploy/operator.yml): it makes a CA and a serving certificate for
 * its webhook Service and keeps them in a Secret of its landscape, so that every replica serves the
 * same certificate and a restart keeps the CA the CRD trusts.
 *
 * Guarantees: before the manager starts, the Secret holds a certificate valid for 30 more days for
 * the Service's names (made when missing, for other names or expiring; of two replicas racing, one
 * wins and both use its certificate) and the webhook certificate directory holds the same files.
 * Every hour both are checked again the same way, so a certificate is renewed before it expires
 * and a renewal by another replica reaches this one; the webhook server re-reads the changed
 * files, and crd-conversion.ts puts the new CA into the CRD on its next round. A failed check is
 * logged and retried the next hour; the files in use stay.
 */
import { ensureWebhookCertificateSecret, writeWebhookCertificate, type KubeApi, type Manager } from '@iot-operator/runtime';

/** How often the Secret and the files are checked after start. */
export const CERTIFICATE_CHECK_INTERVAL_MS = 3600_000;

export interface OwnWebhookCertificateOptions {
  /** The Secret, in the operator's landscape namespace. */
  namespace: string;
  name: string;
  /** Where the webhook server reads ca.crt, tls.crt and tls.key. */
  dir: string;
  /** What the serving certificate covers: `DNS:<service>.<namespace>.svc`, … */
  names: string[];
}

async function ensureCertificateFiles(client: Pick<KubeApi, 'get' | 'create' | 'replace'>, options: OwnWebhookCertificateOptions): Promise<void> {
  const certificate = await ensureWebhookCertificateSecret(client, { namespace: options.namespace, name: options.name, names: options.names, managedBy: 'iot-operator' });
  await writeWebhookCertificate(options.dir, certificate);
}

/** Ensures the certificate now (the manager's webhook server needs the files to start), then every hour while `mgr` runs. */
export async function keepWebhookCertificate(mgr: Manager, options: OwnWebhookCertificateOptions): Promise<void> {
  await ensureCertificateFiles(mgr.client, options);
  const timer = setInterval(() => {
    ensureCertificateFiles(mgr.client, options).catch((err: unknown) =>
      mgr.logger.warn({ secret: `${options.namespace}/${options.name}`, err: err instanceof Error ? err.message : String(err) }, 'could not check the webhook certificate; retrying in an hour'),
    );
  }, CERTIFICATE_CHECK_INTERVAL_MS);
  timer.unref();
  void mgr.done.then(() => clearInterval(timer));
}
