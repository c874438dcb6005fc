/**
 * The local cluster's private registry as its clients reach it: the files parts/registry/part.sh
 * keeps in the cluster's workdir, and what the registry serves.
 *
 * Guarantees:
 * - `registryAccess(workdir)` reads the registry's address from the cluster workdir `workdir` and
 *   names its client files there: the authfile (`docker login`'s format, rewritten at each
 *   password rotation) and the directory holding its CA (`ca.crt`); it throws when the workdir has
 *   no registry address.
 * - `servedDigest(registry, image)` is the digest the registry serves now for `image`
 *   (`<address>/<repository>:<tag>`), what a pull of that tag gets: asked with a HEAD of the tag's
 *   manifest, the authfile's credentials and the CA. It rejects naming the image when the image
 *   is not in this registry, when the registry answers anything but the digest (with its status)
 *   or does not answer within 10 s.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';

/** The registry as a client reaches it: the address image references name, the authfile with its credentials and the directory of its CA. */
export interface RegistryAccess {
  address: string;
  authFile: string;
  certDir: string;
}

export function registryAccess(workdir: string): RegistryAccess {
  const dir = path.join(workdir, 'registry');
  return { address: readFileSync(path.join(dir, 'address'), 'utf8').trim(), authFile: path.join(dir, 'auth/auth.json'), certDir: path.join(dir, 'certs') };
}

const MANIFEST_TYPES = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
];

export async function servedDigest(registry: RegistryAccess, image: string): Promise<string> {
  const match = image.startsWith(`${registry.address}/`) ? /^([^:]+):([^:/]+)$/.exec(image.slice(registry.address.length + 1)) : null;
  if (!match) throw new Error(`${image} is no tag in the cluster's registry ${registry.address}`);
  const auth = (JSON.parse(readFileSync(registry.authFile, 'utf8')) as { auths?: Record<string, { auth?: string }> }).auths?.[registry.address]?.auth;
  const [host, port] = registry.address.split(':');
  return new Promise<string>((resolve, reject) => {
    const req = https.request(
      {
        method: 'HEAD', host, port: Number(port ?? 443), path: `/v2/${match[1]}/manifests/${match[2]}`,
        ca: readFileSync(path.join(registry.certDir, 'ca.crt')),
        headers: { Accept: MANIFEST_TYPES.join(', '), ...(auth ? { Authorization: `Basic ${auth}` } : {}) },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        const digest = res.headers['docker-content-digest'];
        if (res.statusCode === 200 && typeof digest === 'string') resolve(digest);
        else reject(new Error(`the registry answered ${res.statusCode} for ${image}'s manifest`));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`the registry did not answer for ${image} within 10 s`))).on('error', reject).end();
  });
}
