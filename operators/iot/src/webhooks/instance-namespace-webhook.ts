/**
 * The IoTService validating admission webhook: an IoTService whose instance namespace
 * `<landscape>-<name>` already exists and is not this landscape's is refused at creation, with
 * the sentence the operator would otherwise report as `Failed` (`NamespaceNotOwned`), so
 * `kubectl create` answers at once instead of leaving a Failed object behind. CEL cannot make
 * this check: it needs another object (the namespace).
 *
 * Guarantees:
 * - Only CREATE of an IoTService in the landscape is checked; anything else (an update: an
 *   existing object's namespace is its own) is allowed without reading anything.
 * - Refused: the namespace exists, is not being deleted, and does not carry this landscape's
 *   labels for this instance with an owner UID — a namespace someone made or merely labelled.
 * - Allowed: no such namespace; one being deleted (the operator creates the instance once it is
 *   gone); one this landscape's operator created for an IoTService of this name (that IoTService
 *   still exists, so the API server answers AlreadyExists, or it is gone and the operator deletes
 *   the orphaned namespace); a name that makes no valid namespace name (the operator reports it).
 * - The namespace is read from the API server, not a cache (the operator caches only its own
 *   namespaces); a read that fails refuses the request with the API server's error.
 */
import type { V1Namespace } from '@kubernetes/client-node';
import { allow, deny, isNotFound, Kinds, validatingWebhook, type AdmissionRequest, type KubeApi, type KubeObject, type Manager, type Verdict } from '@iot-operator/runtime';
import type { IoTService } from '../api/iotservice.ts';
import { namespaceNotOwnedFailure } from '../failure.ts';
import { hasLabels, instanceLabels } from '../resources/labels.ts';
import { OWNER_UID_ANNOTATION, instanceNamespaceName } from '../resources/namespace.ts';

/** Where the operator serves the webhook (the chart's ValidatingWebhookConfiguration calls it). */
export const IOTSERVICE_WEBHOOK_PATH = '/validate-cp-iotservices-io-v1alpha1-iotservice';

type IoTServiceObject = IoTService & KubeObject;

/** Whether a CREATE of `request`'s IoTService in `landscape` may proceed, given the namespace of its name as it exists (undefined: none). */
export function admitInstanceNamespace(landscape: string, request: AdmissionRequest<IoTServiceObject>, existing: V1Namespace | undefined): Verdict {
  const target = instanceNamespaceTarget(landscape, request);
  if (!target || !existing || existing.metadata?.deletionTimestamp) return allow();
  const claimed = hasLabels(existing.metadata?.labels, instanceLabels({ landscape, id: target.id })) && !!existing.metadata?.annotations?.[OWNER_UID_ANNOTATION];
  return claimed ? allow() : deny(namespaceNotOwnedFailure(target.namespace).message);
}

/** The instance id and namespace a request must be checked for; undefined when it needs no check. */
function instanceNamespaceTarget(landscape: string, request: AdmissionRequest<IoTServiceObject>): { id: string; namespace: string } | undefined {
  if (request.operation !== 'CREATE' || request.namespace !== landscape) return undefined;
  const id = request.object?.metadata?.name ?? request.name ?? '';
  const namespace = instanceNamespaceName(landscape, id);
  return namespace.ok ? { id, namespace: namespace.name } : undefined;
}

/** The validating handler: reads the namespace a new IoTService would get, then decides. */
export function instanceNamespaceWebhook(landscape: string, client: Pick<KubeApi, 'get'>) {
  return validatingWebhook<IoTServiceObject>(async (request) => {
    const target = instanceNamespaceTarget(landscape, request);
    if (!target) return allow();
    const existing = await client.get<V1Namespace & KubeObject>(Kinds.Namespace, target.namespace).catch((err: unknown) => (isNotFound(err) ? undefined : Promise.reject(err)));
    return admitInstanceNamespace(landscape, request, existing);
  });
}

export function registerInstanceNamespaceWebhook(mgr: Manager, landscape: string): void {
  mgr.addWebhook(IOTSERVICE_WEBHOOK_PATH, instanceNamespaceWebhook(landscape, mgr.client));
}
