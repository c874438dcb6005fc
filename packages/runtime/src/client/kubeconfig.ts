/**
 * Connection settings of one API server, read as kubectl reads them: `--kubeconfig`, else the
 * files of `$KUBECONFIG` (merged, the first file naming an entry wins, missing files ignored),
 * else ~/.kube/config, else the in-cluster ServiceAccount.
 *
 * Guarantees:
 * - The current context's cluster gives the server, its CA (`certificate-authority[-data]`),
 *   `insecure-skip-tls-verify`, `tls-server-name` and `proxy-url`; its user gives a client
 *   certificate and key, a bearer token (`token` or `tokenFile`) or basic auth, and `as`
 *   (impersonation). Relative file
 *   paths are resolved against the kubeconfig file that names them.
 * - `credentials.reload()` reads the credentials again from their source (the kubeconfig files,
 *   the token file, the in-cluster token), so rotated tokens are picked up; a client certificate
 *   and key held in files (`client-certificate`, `client-key`) are read again by
 *   `credentials.reloadClientCertificate()`, so rotated certificates are picked up too.
 * - A user with an `exec` plugin or an `auth-provider` is handed to @kubernetes/client-node,
 *   loaded only then: its exec-plugin and auth-provider code (and its memory) is not paid by an
 *   operator that authenticates with a token or a certificate.
 * - Without a `proxy-url`, `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` choose the proxy, as Go's
 *   http.ProxyFromEnvironment does (proxy-environment.ts), for the in-cluster configuration too.
 * - An unusable configuration fails with an error naming the file and the missing entry.
 */
import { existsSync, readFileSync } from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { proxyFromEnvironment } from './proxy-environment.ts';

export type Headers = Readonly<Record<string, string>>;

export interface Credentials {
  /** Headers to send now; a cached source (an exec plugin's token) may answer from its cache. */
  current(): Promise<Headers>;
  /** Headers read again from their source (files re-read, exec plugins run again). */
  reload(): Promise<Headers>;
  /** The client certificate and key read again from their files (absent: none, or not from files). */
  reloadClientCertificate?(): https.AgentOptions;
}

export interface Connection {
  server: string;
  tls: https.AgentOptions;
  proxyUrl?: string;
  credentials: Credentials;
}

interface NamedEntry<T> {
  name: string;
  value: T;
  /** Directory of the file that defined the entry: relative paths are resolved against it. */
  dir: string;
}

interface ClusterEntry {
  server?: string;
  'certificate-authority'?: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
  'tls-server-name'?: string;
  'proxy-url'?: string;
}

interface UserEntry {
  'client-certificate'?: string;
  'client-certificate-data'?: string;
  'client-key'?: string;
  'client-key-data'?: string;
  token?: string;
  tokenFile?: string;
  /** The spelling @kubernetes/client-node reads; `tokenFile` is kubectl's. */
  'token-file'?: string;
  /** Impersonated user name. */
  as?: string;
  username?: string;
  password?: string;
  exec?: unknown;
  'auth-provider'?: unknown;
}

interface ContextEntry {
  cluster?: string;
  user?: string;
}

interface MergedConfig {
  files: string[];
  currentContext?: string;
  clusters: Map<string, NamedEntry<ClusterEntry>>;
  users: Map<string, NamedEntry<UserEntry>>;
  contexts: Map<string, NamedEntry<ContextEntry>>;
}

const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The kubeconfig files in effect: the explicit one, else $KUBECONFIG's, else ~/.kube/config. */
export function kubeconfigFiles(explicit?: string, env: NodeJS.ProcessEnv = process.env): string[] {
  if (explicit) return [explicit];
  if (env.KUBECONFIG) return env.KUBECONFIG.split(path.delimiter).filter((file) => file !== '' && existsSync(file));
  const home = path.join(os.homedir(), '.kube', 'config');
  return existsSync(home) ? [home] : [];
}

/** Loads the connection to the current context's API server (or the in-cluster one). */
export async function loadConnection(explicit?: string, env: NodeJS.ProcessEnv = process.env): Promise<Connection> {
  const files = kubeconfigFiles(explicit, env);
  if (files.length === 0) {
    if (explicit === undefined && !env.KUBECONFIG && env.KUBERNETES_SERVICE_HOST) return inClusterConnection(env);
    throw new Error('no Kubernetes cluster configured: set KUBECONFIG or run in a cluster');
  }
  const merged = readMerged(files);
  const { cluster, user } = currentEntries(merged);
  if (user && (user.value.exec !== undefined || user.value['auth-provider'] !== undefined)) return pluginConnection(files, cluster, env);
  const tls = clusterTls(cluster);
  if (user) Object.assign(tls, clientCertificate(user));
  const userName = user?.name;
  const readUser = () => (userName === undefined ? undefined : readMerged(files).users.get(userName));
  const credentials = fileCredentials(readUser);
  if (user?.value['client-certificate'] !== undefined || user?.value['client-key'] !== undefined) {
    credentials.reloadClientCertificate = () => {
      const current = readUser();
      return current ? clientCertificate(current) : {};
    };
  }
  const server = cluster.value.server!;
  return { server, tls, proxyUrl: cluster.value['proxy-url'] ?? proxyFromEnvironment(server, env), credentials };
}

function readMerged(files: string[]): MergedConfig {
  const merged: MergedConfig = { files, clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const file of files) {
    let doc: Record<string, unknown>;
    try {
      doc = (parseYaml(readFileSync(file, 'utf8')) ?? {}) as Record<string, unknown>;
    } catch (err) {
      throw new Error(`kubeconfig ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
    const dir = path.dirname(path.resolve(file));
    merged.currentContext ||= typeof doc['current-context'] === 'string' ? doc['current-context'] : undefined;
    addEntries(merged.clusters, doc.clusters, 'cluster', dir);
    addEntries(merged.users, doc.users, 'user', dir);
    addEntries(merged.contexts, doc.contexts, 'context', dir);
  }
  return merged;
}

function addEntries<T>(into: Map<string, NamedEntry<T>>, list: unknown, field: string, dir: string): void {
  if (!Array.isArray(list)) return;
  for (const item of list as Array<Record<string, unknown>>) {
    const name = item?.name;
    if (typeof name !== 'string' || into.has(name)) continue;
    into.set(name, { name, value: (item[field] ?? {}) as T, dir });
  }
}

function currentEntries(config: MergedConfig): { cluster: NamedEntry<ClusterEntry>; user?: NamedEntry<UserEntry> } {
  const where = config.files.join(path.delimiter);
  if (!config.currentContext) throw new Error(`kubeconfig ${where}: no current-context`);
  const context = config.contexts.get(config.currentContext);
  if (!context) throw new Error(`kubeconfig ${where}: current-context "${config.currentContext}" is not among its contexts`);
  const cluster = context.value.cluster === undefined ? undefined : config.clusters.get(context.value.cluster);
  if (!cluster?.value.server) throw new Error(`kubeconfig ${where}: context "${context.name}" names no cluster with a server`);
  const user = context.value.user === undefined ? undefined : config.users.get(context.value.user);
  return { cluster, user };
}

function resolvePath(entry: NamedEntry<unknown>, file: string): string {
  return path.resolve(entry.dir, file);
}

/** Inline base64 data, or the named file's contents. */
function dataOrFile(entry: NamedEntry<unknown>, data: string | undefined, file: string | undefined): Buffer | undefined {
  if (data) return Buffer.from(data, 'base64');
  if (file) return readFileSync(resolvePath(entry, file));
  return undefined;
}

function clusterTls(cluster: NamedEntry<ClusterEntry>): https.AgentOptions {
  const c = cluster.value;
  const tls: https.AgentOptions = {};
  const ca = dataOrFile(cluster, c['certificate-authority-data'], c['certificate-authority']);
  if (ca) tls.ca = ca;
  if (c['insecure-skip-tls-verify']) tls.rejectUnauthorized = false;
  if (c['tls-server-name']) tls.servername = c['tls-server-name'];
  return tls;
}

function clientCertificate(user: NamedEntry<UserEntry>): https.AgentOptions {
  const u = user.value;
  const cert = dataOrFile(user, u['client-certificate-data'], u['client-certificate']);
  const key = dataOrFile(user, u['client-key-data'], u['client-key']);
  return { ...(cert ? { cert } : {}), ...(key ? { key } : {}) };
}

/** Bearer token (inline or from tokenFile) or basic auth of a user entry; no headers without one. */
function userHeaders(user: NamedEntry<UserEntry> | undefined): Headers {
  if (!user) return {};
  const u = user.value;
  const headers: Record<string, string> = u.as ? { 'Impersonate-User': u.as } : {};
  const tokenFile = u.tokenFile ?? u['token-file'];
  const token = tokenFile ? readFileSync(resolvePath(user, tokenFile), 'utf8').trim() : u.token;
  if (token) headers.Authorization = `Bearer ${token}`;
  else if (u.username !== undefined || u.password !== undefined) {
    headers.Authorization = `Basic ${Buffer.from(`${u.username ?? ''}:${u.password ?? ''}`).toString('base64')}`;
  }
  return headers;
}

/** Credentials held in files: read again every time they are asked for (token files rotate). */
function fileCredentials(readUser: () => NamedEntry<UserEntry> | undefined): Credentials {
  const read = async (): Promise<Headers> => userHeaders(readUser());
  return { current: read, reload: read };
}

function inClusterConnection(env: NodeJS.ProcessEnv): Connection {
  const host = env.KUBERNETES_SERVICE_HOST!;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const tokenFile = path.join(serviceAccountDir, 'token');
  if (!existsSync(tokenFile)) throw new Error(`in-cluster configuration: ${tokenFile} does not exist (no ServiceAccount token mounted)`);
  const read = async (): Promise<Headers> => ({ Authorization: `Bearer ${readFileSync(tokenFile, 'utf8').trim()}` });
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    server,
    tls: { ca: readFileSync(path.join(serviceAccountDir, 'ca.crt')) },
    proxyUrl: proxyFromEnvironment(server, env),
    credentials: { current: read, reload: read },
  };
}

/**
 * A user authenticated by an exec plugin or an auth-provider: @kubernetes/client-node runs them
 * (and caches their tokens until expiry); `reload` loads the files anew, which runs them again.
 */
async function pluginConnection(files: string[], cluster: NamedEntry<ClusterEntry>, env: NodeJS.ProcessEnv): Promise<Connection> {
  // The config module alone: the package's index would load every generated API class too.
  const { KubeConfig } = await import('@kubernetes/client-node/dist/config.js');
  const load = (): InstanceType<typeof KubeConfig> => {
    const config = new KubeConfig();
    config.loadFromFile(files[0]!);
    for (const file of files.slice(1)) {
      const more = new KubeConfig();
      more.loadFromFile(file);
      config.mergeConfig(more, true);
    }
    return config;
  };
  let config = load();
  const headersOf = async (from: InstanceType<typeof KubeConfig>): Promise<{ headers: Headers; options: https.RequestOptions }> => {
    const options: https.RequestOptions = {};
    await from.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    if (options.headers && !Array.isArray(options.headers)) {
      for (const [k, v] of Object.entries(options.headers)) if (v !== undefined) headers[k] = String(v);
    }
    return { headers, options };
  };
  const first = await headersOf(config);
  const tls = clusterTls(cluster);
  if (first.options.cert) tls.cert = first.options.cert;
  if (first.options.key) tls.key = first.options.key;
  return {
    server: cluster.value.server!,
    tls,
    proxyUrl: cluster.value['proxy-url'] ?? proxyFromEnvironment(cluster.value.server!, env),
    credentials: {
      current: async () => (await headersOf(config)).headers,
      reload: async () => {
        config = load();
        return (await headersOf(config)).headers;
      },
    },
  };
}
