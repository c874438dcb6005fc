/**
 * Test support: a KubeClient for cache tests that answers a list with the objects `list` gives for
 * the type (an error it throws is the API server's answer, e.g. a 404 for a type not served) and
 * keeps every watch open and silent until it is aborted, so a synced cache holds exactly what was
 * listed.
 */
import type { KubeClient } from '../src/client/client.ts';
import type { KubeObject, ResourceType } from '../src/client/resource.ts';

export function listOnlyClient(list: (type: ResourceType) => KubeObject[]): KubeClient {
  return {
    list: async (type: ResourceType) => ({ items: list(type), metadata: { resourceVersion: '1' } }),
    watch: async (_type: unknown, options: { signal: AbortSignal }) => ({
      code: 200,
      headers: {},
      lines: (async function* () {
        await new Promise((resolve) => options.signal.addEventListener('abort', resolve, { once: true }));
      })(),
      close: () => undefined,
    }),
  } as unknown as KubeClient;
}
