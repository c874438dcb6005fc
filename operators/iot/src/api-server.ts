/**
 * Where pods reach the API server: the addresses and ports behind Service `kubernetes` in
 * namespace `default`, as its EndpointSlices list them.
 *
 * Guarantees: `discoverApiServer` reads them once (the operator's start) and returns each
 * address-and-port pair once, sorted, so the policy rendered from them is the same at every start
 * while the API server stays where it is. A NetworkPolicy must name these rather than the
 * Service's cluster IP: policies are enforced on the translated destination. Should the API
 * server move, the operator's next start renders the new addresses. An empty list (none
 * published) admits nothing.
 */
import { Kinds, type KubeApi, type KubeObject } from '@iot-operator/runtime';

export interface ApiServerEndpoint {
  address: string;
  port: number;
}

type EndpointSlice = KubeObject & { endpoints?: Array<{ addresses?: string[] }>; ports?: Array<{ port?: number }> };

export async function discoverApiServer(client: KubeApi): Promise<ApiServerEndpoint[]> {
  const slices = await client.list<EndpointSlice>(Kinds.EndpointSlice, { namespace: 'default', labelSelector: 'kubernetes.io/service-name=kubernetes' });
  const pairs = new Map<string, ApiServerEndpoint>();
  for (const slice of slices.items) {
    for (const port of slice.ports ?? []) {
      for (const address of (slice.endpoints ?? []).flatMap((e) => e.addresses ?? [])) {
        if (port.port !== undefined) pairs.set(`${address}:${port.port}`, { address, port: port.port });
      }
    }
  }
  return [...pairs.keys()].sort().map((key) => pairs.get(key)!);
}
