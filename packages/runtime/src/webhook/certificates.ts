/**
 * The webhook server's certificate: a CA of its own and a serving certificate it signed, made
 * with the openssl command line (Node cannot issue X.509 certificates).
 *
 * Guarantees: `ensureWebhookCertificate(dir, names)` leaves `dir` holding ca.crt, tls.crt and
 * tls.key (the names the webhook server and a kubernetes.io/tls Secret use) for every name in
 * `names` (`IP:127.0.0.1`, `DNS:svc.ns.svc`), valid for a year; files already there are kept
 * when they cover those names and stay valid for 30 more days, so a restart does not change the
 * caBundle. Without openssl it fails saying so. `usableCertificate` is the same check on PEM texts.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const DAYS = 365;
const RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;

export interface WebhookCertificate {
  ca: string;
  cert: string;
  key: string;
}

/** True when `cert` was signed by `ca`, covers every name and is valid for 30 more days. */
export function usableCertificate(certificate: Partial<WebhookCertificate>, names: readonly string[]): boolean {
  if (!certificate.ca || !certificate.cert || !certificate.key) return false;
  try {
    const ca = new X509Certificate(certificate.ca);
    const cert = new X509Certificate(certificate.cert);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
    if (new Date(cert.validTo).getTime() - Date.now() < RENEW_BEFORE_MS) return false;
    return names.every((name) => (name.startsWith('IP:') ? cert.checkIP(name.slice(3)) !== undefined : cert.checkHost(name.replace(/^DNS:/, '')) !== undefined));
  } catch {
    return false;
  }
}

function openssl(args: string[]): void {
  try {
    execFileSync('openssl', args, { stdio: 'pipe' });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('the webhook certificate is made with openssl, which is not installed (Debian/Ubuntu: apt-get install openssl)');
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString().trim() ?? e.message}`);
  }
}

/** Makes a new CA and a certificate for `names` in a scratch directory under `dir`; returns the PEM texts. */
export function makeWebhookCertificate(dir: string, names: readonly string[]): WebhookCertificate {
  const work = path.join(dir, '.making');
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const file = (name: string) => path.join(work, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    openssl(['req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-subj', '/CN=webhook CA', '-days', String(DAYS)]);
    // The names are in subjectAltName (what clients check); a common name holds at most 64 characters.
    openssl(['req', ...ec, '-keyout', file('tls.key'), '-out', file('tls.csr'), '-subj', '/CN=webhook']);
    writeFileSync(file('san.ext'), `subjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth\n`);
    openssl(['x509', '-req', '-in', file('tls.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-out', file('tls.crt'), '-days', String(DAYS), '-extfile', file('san.ext')]);
    return { ca: readFileSync(file('ca.crt'), 'utf8'), cert: readFileSync(file('tls.crt'), 'utf8'), key: readFileSync(file('tls.key'), 'utf8') };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** ca.crt, tls.crt and tls.key in `dir` for `names`: those there when usable, else new ones. */
export function ensureWebhookCertificate(dir: string, names: readonly string[]): WebhookCertificate {
  const read = (name: string) => (existsSync(path.join(dir, name)) ? readFileSync(path.join(dir, name), 'utf8') : undefined);
  const current = { ca: read('ca.crt'), cert: read('tls.crt'), key: read('tls.key') };
  if (usableCertificate(current, names)) return current as WebhookCertificate;
  mkdirSync(dir, { recursive: true });
  const made = makeWebhookCertificate(dir, names);
  writeFileSync(path.join(dir, 'ca.crt'), made.ca);
  writeFileSync(path.join(dir, 'tls.key'), made.key, { mode: 0o600 });
  writeFileSync(path.join(dir, 'tls.crt'), made.cert);
  return made;
}
