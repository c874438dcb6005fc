/**
 * A list/watch source that receives only object metadata (the API server's
 * PartialObjectMetadata), for caches that must not hold object bodies: a Secret's or
 * ConfigMap's `data` never reaches the process, however large it is.
 *
 * Guarantees: objects carry the type's apiVersion and kind (not PartialObjectMetadata), so they
 * look like the full objects minus everything but `metadata`; errors and event types are those
 * of `clientSource`.
 */
import type { KubeClient } from '../client/client.ts';
import { apiVersionOf, type KubeObject, type ResourceType } from '../client/resource.ts';
import { decodeEvents, type ListWatchSource, type Selection } from '../watch/source.ts';

const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1';
const METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1';

export function metadataSource<T extends KubeObject>(client: KubeClient, type: ResourceType, selection: Selection = {}): ListWatchSource<T> {
  const apiVersion = apiVersionOf(type);
  const asType = (obj: KubeObject) => ({ apiVersion, kind: type.kind, metadata: obj.metadata }) as T;
  const scope = [selection.namespace && `ns=${selection.namespace}`, selection.labelSelector && `labels=${selection.labelSelector}`].filter(Boolean).join(' ');
  return {
    description: `${type.group || 'core'}/${type.version}/${type.kind} metadata${scope ? ` ${scope}` : ''}`,
    async list({ limit, continue: continueToken }) {
      const page = await client.list<KubeObject>(type, { ...selection, limit, continue: continueToken, accept: METADATA_LIST });
      return { items: (page.items ?? []).map(asType), resourceVersion: page.metadata?.resourceVersion ?? '', continue: page.metadata?.continue || undefined };
    },
    async watch({ resourceVersion, timeoutSeconds, signal }) {
      const stream = await client.watch(type, { ...selection, resourceVersion, timeoutSeconds, allowWatchBookmarks: true, signal, accept: METADATA });
      const events = decodeEvents<KubeObject>(stream.lines, () => stream.close());
      return (async function* () {
        for await (const event of events) yield { type: event.type, object: asType(event.object) };
      })();
    },
  };
}
