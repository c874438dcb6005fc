/**
 * Why an instance is Failed, as a typed value.
 *
 * Guarantees: every failure has a stable CamelCase `reason` (used as condition reason and Event
 * reason, safe to alert on) and a `message`: one sentence a user can act on, containing no
 * secret and nothing that changes from one reconcile to the next (so status is not rewritten
 * while the failure persists).
 */

export type FailureReason =
  /** The spec violates the schema (possible only if the CRD's validation was bypassed). */
  | 'InvalidSpec'
  /** `<OPERATOR_NAME>-<id>` is not a DNS-1123 label (too long or bad characters). */
  | 'NamespaceNameInvalid'
  /** The instance namespace exists but was not created by this operator for this IoTService (labels and owner UID). */
  | 'NamespaceNotOwned'
  /** An image would come from a registry the operator does not allow (--allowed-registries). */
  | 'RegistryNotAllowed'
  /** The gateway Service type is not allowed by the operator (--allowed-service-types). */
  | 'ServiceTypeNotAllowed'
  /** spec.quota asks for more than the operator allows (--max-quota). */
  | 'QuotaAboveLimit'
  /** The landscape's image-pull-secret is missing from the operator namespace. */
  | 'ImagePullSecretMissing'
  /** The API server refused a write with 403: RBAC does not allow it. */
  | 'Forbidden'
  /** The API server refused a child as invalid (422) or the change as not allowed. */
  | 'Invalid'
  /** A Deployment reports ProgressDeadlineExceeded. */
  | 'ProgressDeadlineExceeded'
  /** A pod cannot pull its image for more than five minutes. */
  | 'ImagePullFailing'
  /** A container keeps crashing for more than five minutes. */
  | 'CrashLooping'
  /** A pod's volume claim names a StorageClass (spec.<component>.storageClassName) that does not exist. */
  | 'StorageClassNotFound'
  /** A pod cannot be scheduled for more than five minutes because its volume claim is not bound. */
  | 'VolumeNotBound';

export interface Failure {
  reason: FailureReason;
  message: string;
}

export function invalidSpecFailure(errors: readonly string[]): Failure {
  return { reason: 'InvalidSpec', message: `The spec is invalid: ${errors.join('; ')}.` };
}

export function namespaceNotOwnedFailure(namespace: string): Failure {
  return {
    reason: 'NamespaceNotOwned',
    message:
      `Namespace ${namespace} already exists and was not created by this operator for this IoTService ` +
      '(its labels or its cp.iotservices.io/owner-uid annotation do not match); it is never adopted or deleted: remove it or rename the IoTService.',
  };
}

export function imagePullSecretMissingFailure(secretName: string, operatorNamespace: string): Failure {
  return {
    reason: 'ImagePullSecretMissing',
    message: `Secret ${secretName} is missing in namespace ${operatorNamespace}; create it (see deploy/namespace.yml) and the instance recovers by itself.`,
  };
}

/** A request the API server refused with 403, and what the operator needed it for. */
export interface RefusedRequest {
  verb: string;
  /** `<plural>` for core resources, `<plural>.<group>` otherwise. */
  resource: string;
  namespace?: string;
  /** What the operator could not do, e.g. `delete the instance namespace ls-a`. */
  purpose: string;
}

/**
 * A permission the operator lacks, named as RBAC names it (verb, resource, namespace). While the
 * IoTService is being deleted the message says that its deletion waits for the permission.
 */
export function permissionMissingFailure(request: RefusedRequest, serverMessage: string, deleting: boolean): Failure {
  const where = request.namespace ? ` in namespace ${request.namespace}` : '';
  const waits = deleting ? ' Deletion of this IoTService waits until it is granted.' : '';
  return {
    reason: 'Forbidden',
    message:
      `The operator is missing permission: ${request.verb} ${request.resource}${where}, needed to ${request.purpose}; ` +
      `grant it in the operator's RBAC.${waits} The API server said: ${serverMessage.replace(/\.?$/, '.')}`,
  };
}

/** A write the API server refused in a way retrying will not fix (403 or 422). */
export function apiRefusedFailure(
  refusal: 'Forbidden' | 'Invalid',
  child: { kind: string; name: string; namespace?: string },
  serverMessage: string,
): Failure {
  const where = child.namespace ? ` in namespace ${child.namespace}` : '';
  const what = refusal === 'Forbidden' ? 'is not allowed to write' : 'refused as invalid';
  const sentence =
    refusal === 'Forbidden'
      ? `The operator ${what} ${child.kind} ${child.name}${where}; check its ClusterRole: ${serverMessage}`
      : `The API server ${what} ${child.kind} ${child.name}${where}: ${serverMessage}`;
  return { reason: refusal, message: sentence.replace(/\.?$/, '.') };
}
