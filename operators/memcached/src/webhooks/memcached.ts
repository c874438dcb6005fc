/**
 * The webhooks of Memcached (cache.example.com/v1alpha1), as the operator-sdk Go sample has them
 * (`operator-ts create webhook --kind Memcached --defaulting --validating`, then filled in): the
 * API server calls them over HTTPS as deploy/webhook.yaml says.
 *
 * - Defaulting: a Memcached whose spec.size is missing or 0 gets size 3 (the sample's
 *   `if r.Spec.Size == 0 { r.Spec.Size = 3 }`; Go cannot tell 0 from missing, so neither do we).
 * - Validating, on create and update: an even spec.size is refused with the sample's message,
 *   "Cluster size must be an odd number"; deletes are not checked.
 * Each handler is a plain function of the object, so unit tests call it directly.
 */
import { allow, deny, mutatingWebhook, validatingWebhook, type Manager } from '@iot-operator/runtime';
import type { MemcachedObject } from '../api/memcached.ts';

/** The size a Memcached without one (or with 0) is given. */
export const DEFAULT_SIZE = 3;
export const ODD_SIZE_MESSAGE = 'Cluster size must be an odd number';

/** The path of the defaulting webhook (deploy/webhook.yaml's MutatingWebhookConfiguration calls it). */
export const DEFAULT_MEMCACHED_PATH = '/mutate-cache-example-com-v1alpha1-memcached';

/** Fills in spec.size when it is missing or 0, before the Memcached is validated and stored. */
export function defaultMemcached(object: MemcachedObject): MemcachedObject {
  if (!object.spec?.size) object.spec = { ...object.spec, size: DEFAULT_SIZE };
  return object;
}

/** The path of the validating webhook (deploy/webhook.yaml's ValidatingWebhookConfiguration calls it). */
export const VALIDATE_MEMCACHED_PATH = '/validate-cache-example-com-v1alpha1-memcached';

/** Why a Memcached may not be created or updated as it is (the API server's error message), or undefined when it may. */
export function validateMemcached(object: MemcachedObject): string | undefined {
  const size = object.spec?.size;
  if (typeof size === 'number' && size % 2 === 0) return ODD_SIZE_MESSAGE;
  return undefined;
}

export function registerMemcachedWebhooks(mgr: Manager): void {
  mgr.addWebhook(DEFAULT_MEMCACHED_PATH, mutatingWebhook<MemcachedObject>((object) => defaultMemcached(object)));
  mgr.addWebhook(VALIDATE_MEMCACHED_PATH, validatingWebhook<MemcachedObject>((request) => {
    if (request.operation === 'DELETE') return allow();
    const reason = validateMemcached(request.object!);
    return reason === undefined ? allow() : deny(reason);
  }));
}
