/**
 * The proxy that `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` name for an API server, read as Go's
 * http.ProxyFromEnvironment reads them (client-go's default transport; kubectl and
 * controller-runtime operators behave this way, in a pod too).
 *
 * Guarantees:
 * - An https server uses `HTTPS_PROXY` (or `https_proxy`), a plain-http one `HTTP_PROXY` (or
 *   `http_proxy`); the upper-case name wins. A value without a scheme means `http://`.
 * - No proxy for `localhost` and loopback addresses, nor for a host `NO_PROXY` (or `no_proxy`)
 *   matches: `*` (everything); an IP address; a CIDR block (`10.0.0.0/8`, matching IP hosts in
 *   it — in a pod KUBERNETES_SERVICE_HOST is an IP); a domain (`example.com` matches it and its
 *   subdomains, `.example.com` its subdomains only); any of these with `:port` applies to that
 *   port only. Entries are comma-separated, spaces ignored, case-insensitive.
 * - A kubeconfig cluster's `proxy-url` takes precedence over the environment (kubeconfig.ts).
 */
import net from 'node:net';

/** The proxy URL the environment names for `server`, or undefined for a direct connection. */
export function proxyFromEnvironment(server: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const url = new URL(server);
  const https = url.protocol === 'https:';
  const configured = https ? env.HTTPS_PROXY || env.https_proxy : env.HTTP_PROXY || env.http_proxy;
  if (!configured) return undefined;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = url.port || (https ? '443' : '80');
  if (host === 'localhost' || isLoopback(host)) return undefined;
  if (noProxyMatches(host, port, env.NO_PROXY ?? env.no_proxy ?? '')) return undefined;
  return configured.includes('://') ? configured : `http://${configured}`;
}

/** Whether a NO_PROXY list exempts `host` (a name or an IP address, no brackets) on `port`. */
export function noProxyMatches(host: string, port: string, noProxy: string): boolean {
  const ipType = net.isIP(host);
  for (const raw of noProxy.split(',')) {
    let entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') return true;
    if (entry.includes('/')) {
      const [base, bits] = entry.split('/') as [string, string];
      const family = net.isIP(base);
      if (ipType === 0 || family !== ipType || !/^\d+$/.test(bits)) continue;
      const block = new net.BlockList();
      block.addSubnet(base, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
      if (block.check(host, ipType === 4 ? 'ipv4' : 'ipv6')) return true;
      continue;
    }
    const withPort = /^(.*):(\d+)$/.exec(entry);
    if (withPort && net.isIP(entry) !== 6) {
      if (withPort[2] !== port) continue;
      entry = withPort[1]!;
    }
    entry = entry.replace(/^\[(.*)\]$/, '$1');
    if (net.isIP(entry)) {
      if (ipType !== 0 && sameAddress(entry, host)) return true;
      continue;
    }
    if (entry.startsWith('*.')) entry = entry.slice(1);
    if (entry.startsWith('.')) {
      if (host.endsWith(entry)) return true;
    } else if (host === entry || host.endsWith(`.${entry}`)) {
      return true;
    }
  }
  return false;
}

function isLoopback(host: string): boolean {
  const type = net.isIP(host);
  if (type === 4) return host.startsWith('127.');
  if (type === 6) return sameAddress(host, '::1');
  return false;
}

function sameAddress(a: string, b: string): boolean {
  const block = new net.BlockList();
  const type = net.isIP(a) === 4 ? 'ipv4' : 'ipv6';
  block.addAddress(a, type);
  return net.isIP(b) === net.isIP(a) && block.check(b, type);
}
