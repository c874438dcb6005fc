/**
 * What the local cluster's API server really stored: IoTService objects read from its etcd, not
 * through the API server (which converts every read to the version asked for).
 *
 * Guarantees: `localEtcd(kubeconfigPath)` finds the etcd of the kwok cluster whose kubeconfig that
 * is (kwok.yaml beside it: etcd's client URL, the API server's --etcd-prefix), or says why not;
 * `storedIoTServices` returns every IoTService under the prefix, parsed from the stored JSON (the
 * API server stores custom resources as JSON), by its key. It reads through etcd's v3 JSON gateway
 * on the client URL, so no etcdctl is needed.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { API_GROUP, IOTSERVICE_PLURAL } from '../src/api/iotservice.ts';

export interface LocalEtcd {
  /** etcd's client URL, e.g. http://127.0.0.1:32765. */
  url: string;
  /** The API server's --etcd-prefix, e.g. /registry. */
  prefix: string;
}

interface KwokComponent {
  name: string;
  args?: string[];
}

function flag(component: KwokComponent | undefined, name: string): string | undefined {
  return component?.args?.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

/** The etcd of the kwok cluster of `kubeconfigPath`, or the reason it cannot be read. */
export function localEtcd(kubeconfigPath: string): LocalEtcd | { reason: string } {
  const config = path.join(path.dirname(kubeconfigPath), 'kwok.yaml');
  if (!existsSync(config)) return { reason: `no kwok.yaml beside ${kubeconfigPath}: not the local cluster, whose etcd this test reads` };
  const components = parseAllDocuments(readFileSync(config, 'utf8'))
    .map((d) => d.toJSON() as { components?: KwokComponent[] } | null)
    .flatMap((d) => d?.components ?? []);
  const url = flag(components.find((c) => c.name === 'etcd'), 'advertise-client-urls')?.split(',')[0];
  if (!url?.startsWith('http://')) return { reason: `${config} names no plain-HTTP etcd client URL (${url ?? 'none'})` };
  return { url, prefix: flag(components.find((c) => c.name === 'kube-apiserver'), 'etcd-prefix') ?? '/registry' };
}

const base64 = (text: string) => Buffer.from(text).toString('base64');

/** Every IoTService etcd holds, by key (`<prefix>/cp.iotservices.io/iotservices/<namespace>/<name>`), as stored. */
export async function storedIoTServices(etcd: LocalEtcd): Promise<Map<string, { apiVersion?: string; metadata?: { namespace?: string; name?: string } }>> {
  const keyPrefix = `${etcd.prefix}/${API_GROUP}/${IOTSERVICE_PLURAL}/`;
  // range_end: the prefix with its last byte incremented, i.e. every key that starts with it
  const end = keyPrefix.slice(0, -1) + String.fromCharCode(keyPrefix.charCodeAt(keyPrefix.length - 1) + 1);
  const response = await fetch(`${etcd.url}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: base64(keyPrefix), range_end: base64(end) }) });
  if (!response.ok) throw new Error(`etcd ${etcd.url}/v3/kv/range: HTTP ${response.status} ${await response.text()}`);
  const { kvs = [] } = (await response.json()) as { kvs?: Array<{ key: string; value: string }> };
  return new Map(kvs.map((kv) => [Buffer.from(kv.key, 'base64').toString('utf8'), JSON.parse(Buffer.from(kv.value, 'base64').toString('utf8'))]));
}

/** The etcd key of one IoTService. */
export function iotServiceKey(etcd: LocalEtcd, namespace: string, name: string): string {
  return `${etcd.prefix}/${API_GROUP}/${IOTSERVICE_PLURAL}/${namespace}/${name}`;
}
