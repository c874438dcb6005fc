/**
 * Test support: a throwaway CA and a server certificate for the given subject alternative names
 * (e.g. `DNS:api.cluster.test`, `IP:127.0.0.1`), made with the openssl command line, valid for
 * two days. Files live in `dir`; the PEM texts are returned.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface TestCertificates {
  ca: string;
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
}

export function makeCertificates(dir: string, subjectAltNames: string[]): TestCertificates {
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-subj', '/CN=test-ca', '-days', '2');
  openssl('req', ...ec, '-keyout', file('tls.key'), '-out', file('tls.csr'), '-subj', '/CN=test-server');
  writeFileSync(file('san.ext'), `subjectAltName=${subjectAltNames.join(',')}\n`);
  openssl('x509', '-req', '-in', file('tls.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-out', file('tls.crt'), '-days', '2', '-extfile', file('san.ext'));
  return { ca: readFileSync(file('ca.crt'), 'utf8'), cert: readFileSync(file('tls.crt'), 'utf8'), key: readFileSync(file('tls.key'), 'utf8'), certFile: file('tls.crt'), keyFile: file('tls.key') };
}
