/**
 * Certificates for the gateway's TLS tests, made with the openssl command line in a temporary
 * directory, and a directory laid out as Kubernetes mounts a Secret volume.
 *
 * Guarantees: `makeCa(name)` returns a self-signed CA; `issue(ca, cn, ipSan?)` a certificate for
 * `cn` signed by it (with the IP as subject alternative name when given); all PEM, EC P-256, valid
 * for a day; `dnsSans` adds DNS names to the subject alternative names. `secretVolume()` makes a directory whose files are symlinks through `..data`, and
 * `write` replaces all its files at once by swapping `..data` (as the kubelet does), so a reader
 * sees the old set or the new one.
 */

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface Pem {
  cert: string;
  key: string;
}

const work = mkdtempSync(path.join(tmpdir(), 'gateway-tls-'));
let serial = 0;

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export function makeCa(name: string): Pem {
  const base = path.join(work, `ca-${++serial}`);
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${base}.key`, '-out', `${base}.crt`, '-days', '1', '-subj', `/CN=${name}`]);
  return { cert: readFileSync(`${base}.crt`, 'utf8'), key: readFileSync(`${base}.key`, 'utf8') };
}

export function issue(ca: Pem, cn: string, ipSan?: string, dnsSans: readonly string[] = []): Pem {
  const base = path.join(work, `cert-${++serial}`);
  writeFileSync(`${base}-ca.crt`, ca.cert);
  writeFileSync(`${base}-ca.key`, ca.key);
  const sans = [...(ipSan ? [`IP:${ipSan}`] : []), ...dnsSans.map((name) => `DNS:${name}`)];
  writeFileSync(`${base}.ext`, sans.length > 0 ? `subjectAltName=${sans.join(',')}\n` : 'basicConstraints=CA:FALSE\n');
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${cn}`]);
  openssl(['x509', '-req', '-in', `${base}.csr`, '-CA', `${base}-ca.crt`, '-CAkey', `${base}-ca.key`, '-set_serial', String(serial), '-out', `${base}.crt`, '-days', '1', '-extfile', `${base}.ext`]);
  return { cert: readFileSync(`${base}.crt`, 'utf8'), key: readFileSync(`${base}.key`, 'utf8') };
}

export interface SecretVolume {
  dir: string;
  write(files: Record<string, string>): void;
  remove(): void;
}

export function secretVolume(): SecretVolume {
  const dir = mkdtempSync(path.join(tmpdir(), 'gateway-secret-'));
  let generation = 0;
  let names: string[] = [];
  return {
    dir,
    write: (files) => {
      const data = `..${++generation}`;
      mkdirSync(path.join(dir, data));
      for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, data, name), text);
      symlinkSync(data, path.join(dir, '..data_tmp'));
      renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
      for (const name of Object.keys(files)) {
        if (!names.includes(name)) symlinkSync(path.join('..data', name), path.join(dir, name));
      }
      for (const name of names) if (!(name in files)) rmSync(path.join(dir, name));
      names = Object.keys(files);
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
