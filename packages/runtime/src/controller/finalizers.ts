/**
 * Finalizer helpers.
 *
 * Guarantees: adding or removing our finalizer never drops another party's: both use JSON
 * patches that touch only our entry, guarded by a `test` operation so that a concurrent change
 * makes the patch fail with a conflict-like error (retried by the controller) instead of
 * clobbering the list.
 */
import type { KubeApi } from '../client/client.ts';
import type { KubeObject, ResourceType } from '../client/resource.ts';

export function hasFinalizer(obj: KubeObject, finalizer: string): boolean {
  return obj.metadata.finalizers?.includes(finalizer) ?? false;
}

/** Adds the finalizer if missing; returns the updated object, or the input when nothing changed. */
export async function addFinalizer<T extends KubeObject>(client: KubeApi, type: ResourceType, obj: T, finalizer: string): Promise<T> {
  if (hasFinalizer(obj, finalizer)) return obj;
  const { name, namespace, finalizers, resourceVersion } = obj.metadata;
  const patch = finalizers === undefined
    ? [
        { op: 'test', path: '/metadata/resourceVersion', value: resourceVersion },
        { op: 'add', path: '/metadata/finalizers', value: [finalizer] },
      ]
    : [{ op: 'add', path: '/metadata/finalizers/-', value: finalizer }];
  return client.patch<T>(type, name ?? '', namespace, patch, 'json');
}

/** Removes only our finalizer; returns the updated object, or the input when it was absent. */
export async function removeFinalizer<T extends KubeObject>(client: KubeApi, type: ResourceType, obj: T, finalizer: string): Promise<T> {
  const index = obj.metadata.finalizers?.indexOf(finalizer) ?? -1;
  if (index < 0) return obj;
  const path = `/metadata/finalizers/${index}`;
  return client.patch<T>(type, obj.metadata.name ?? '', obj.metadata.namespace, [
    { op: 'test', path, value: finalizer },
    { op: 'remove', path },
  ], 'json');
}
