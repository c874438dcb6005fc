/**
 * Why an instance is Failed, as a typed value.
 *
 * Guarantees: every failure has a stable CamelCase `reason` (used as condition reason and Event
 * reason, safe to alert on) and a `message`: one sentence a user can act on, containing no
 * secret and nothing that changes from one reconcile to the next (so status is not rewritten
 * while the failure persists): the figures of an ingestion failure are those of status.ingestion,
 * read when the ingestion's state changed.
 *
 * The stuck window is the operator's --stuck-pod-timeout (default 5 minutes): how long a pod may
 * fail to pull, crash or stay unschedulable before the instance is Failed.
 */
import type { IngestionStatus } from './api/iotservice.ts';

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
  /** A toleration names a taint the operator does not allow, or every taint (--allowed-toleration-keys). */
  | 'TolerationNotAllowed'
  /** A nodeSelector, node affinity or topology key uses a node label the operator does not allow (--allowed-node-label-keys). */
  | 'NodeLabelNotAllowed'
  /** A pod (anti-)affinity term may select pods outside the instance namespace. */
  | 'PodAffinityNotAllowed'
  /** spec.quota asks for more than the operator allows (--max-quota). */
  | 'QuotaAboveLimit'
  /** The landscape's image-pull-secret is missing from the operator namespace. */
  | 'ImagePullSecretMissing'
  /** The ConfigMap spec.gateway.tls.clientCA names is missing or has no ca.crt. */
  | 'ClientCANotFound'
  /** spec.gateway.tls.issuerRef names an issuer, but the API server does not serve cert-manager's Certificates. */
  | 'CertManagerNotInstalled'
  /** cert-manager cannot issue the Certificate of spec.gateway.tls.issuerRef (its issuer missing or not ready, the issuance failed), or what it issued is unusable. */
  | 'CertificateNotReady'
  /** The API server refused a write with 403: RBAC does not allow it. */
  | 'Forbidden'
  /** The API server refused a child as invalid (422) or the change as not allowed. */
  | 'Invalid'
  /** A Deployment reports ProgressDeadlineExceeded. */
  | 'ProgressDeadlineExceeded'
  /** A pod has been unable to pull its image for longer than the stuck window: the registry has no such image (tag or repository). */
  | 'ImageNotFound'
  /** A pod has been unable to pull its image for longer than the stuck window: the registry refused the image-pull-secret's credentials (401/403). */
  | 'ImagePullUnauthorized'
  /** A pod has been unable to pull its image for longer than the stuck window, for any other reason (registry unreachable, TLS, ...). */
  | 'ImagePullFailing'
  /** A container keeps exiting and its pod has not been ready for longer than the stuck window. */
  | 'CrashLooping'
  /** A pod's volume claim names a StorageClass (spec.<component>.storageClassName) that does not exist. */
  | 'StorageClassNotFound'
  /** A pod cannot be scheduled for more than five minutes because its volume claim is not bound. */
  | 'VolumeNotBound'
  /** spec.restore.from names no IoTService of the landscape. */
  | 'RestoreSourceNotFound'
  /** spec.restore.from names this IoTService itself, or one the operator cannot run. */
  | 'RestoreSourceInvalid'
  /** spec.restore.from names an IoTService without spec.backup. */
  | 'RestoreSourceNotBackedUp'
  /** The Secret spec.backup.target.s3.credentialsSecret names is missing or lacks a key. */
  | 'BackupCredentialsNotFound'
  /** The restore of the database from the source's backups failed (its init container's message). */
  | 'RestoreFailed'
  /** Messages wait in the broker and processing has stored none for a minute (ingestion.ts). */
  | 'IngestionStalled'
  /** The broker's backlog is at its limit: the gateway slows devices down (ingestion.ts). */
  | 'StorageFull';

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

export function clientCANotFoundFailure(configMap: string, namespace: string): Failure {
  return {
    reason: 'ClientCANotFound',
    message: `ConfigMap ${configMap} in namespace ${namespace} (spec.gateway.tls.clientCA) is missing or has no ca.crt; create it with the CAs of the devices' client certificates, or remove spec.gateway.tls.clientCA.`,
  };
}

/** The S3 credentials Secret `secret` of `namespace` is missing (`missing` undefined) or lacks the keys `missing`. */
export function backupCredentialsNotFoundFailure(secret: string, namespace: string, missing: readonly string[] | undefined): Failure {
  const what = missing ? `has no ${missing.join(' and ')}` : 'is missing';
  return {
    reason: 'BackupCredentialsNotFound',
    message: `Secret ${secret} in namespace ${namespace} (spec.backup.target.s3.credentialsSecret) ${what}; create it with the keys accessKeyId and secretAccessKey of the S3 endpoint (and ca.crt for a private CA); looked for again every 30 s.`,
  };
}

export function certManagerNotInstalledFailure(): Failure {
  return {
    reason: 'CertManagerNotInstalled',
    message:
      'cert-manager is not installed: the API server does not serve certificates.cert-manager.io/v1, which spec.gateway.tls.issuerRef needs; ' +
      'install cert-manager (its CRDs and its controller), or remove spec.gateway.tls.issuerRef to have the instance CA sign the certificate.',
  };
}

/** cert-manager cannot issue the gateway's Certificate (`landscape/name`), and why. */
export function certificateNotReadyFailure(certificate: string, why: string): Failure {
  return { reason: 'CertificateNotReady', message: `Certificate ${certificate} (spec.gateway.tls.issuerRef) is not ready: ${why.replace(/\.?$/, '.')}` };
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

/** A duration as the messages give it: `5 minutes`, `1 minute`, `20 seconds`, `1500 ms`. */
export function durationText(ms: number): string {
  const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`;
  if (ms % 60_000 === 0) return plural(ms / 60_000, 'minute');
  if (ms % 1000 === 0) return plural(ms / 1000, 'second');
  return `${ms} ms`;
}

/** What a pod's pull of one component image runs into, and where the user fixes it. */
export interface ImagePull {
  image: string;
  component: string;
  /** The image is `spec.<component>.image`, not `<registry>/iot-<component>:<version>`. */
  overridden: boolean;
}

/** The registry says the image does not exist: a `spec.version` (or registry, or image) that was never published. */
export function imageNotFoundFailure(pull: ImagePull): Failure {
  const fix = pull.overridden ? `correct spec.${pull.component}.image` : 'set spec.version to a version published there (or correct spec.registry)';
  return { reason: 'ImageNotFound', message: `Image ${pull.image} of component ${pull.component} does not exist in its registry: ${fix}.` };
}

/** The registry refused the pull with the landscape's image-pull-secret, which the operator copies into the instance namespace. */
export function imagePullUnauthorizedFailure(pull: ImagePull, secretName: string, landscape: string | undefined, instanceNamespace: string): Failure {
  const where = landscape ? `in namespace ${landscape}` : "in the operator's namespace";
  return {
    reason: 'ImagePullUnauthorized',
    message:
      `The registry refused to serve image ${pull.image} of component ${pull.component} with the credentials of Secret ${secretName}: ` +
      `put valid credentials for that registry into Secret ${secretName} ${where} (the operator copies it into namespace ${instanceNamespace} and restarts the pods waiting for their image).`,
  };
}

/** A pull failing for any other reason (unreachable registry, TLS, ...): where to see the kubelet's error. */
export function imagePullFailingFailure(pull: ImagePull, pod: string, namespace: string, window: number): Failure {
  return {
    reason: 'ImagePullFailing',
    message:
      `Pod ${pod} has not been able to pull image ${pull.image} for more than ${durationText(window)}; see why with kubectl describe pod -n ${namespace} ${pod}, ` +
      "then check spec.version, spec.registry (or the component's image) and the image-pull-secret.",
  };
}

/** A component's container keeps exiting: which one, and where its last words are. */
export function crashLoopingFailure(component: string, pod: string, container: string, namespace: string, window: number): Failure {
  return {
    reason: 'CrashLooping',
    message:
      `Component ${component} is in a crash loop: container ${container} of pod ${pod} keeps exiting and has not been ready for more than ${durationText(window)}; ` +
      `see why with kubectl logs -n ${namespace} ${pod} -c ${container} --previous, then fix its image (spec.version or spec.${component}.image) or what it depends on.`,
  };
}

/** A size as the messages give it: `168 B`, `4.2 KiB`, `5.1 MiB`, `1.2 GiB`. */
export function bytesText(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Telemetry waits in the broker and processing stores none of it. */
export function ingestionStalledFailure(ingestion: IngestionStatus, namespace: string): Failure {
  const stored = ingestion.lastStoredSecondsAgo === undefined ? 'processing has stored none yet' : `processing has stored none for ${ingestion.lastStoredSecondsAgo} s`;
  return {
    reason: 'IngestionStalled',
    message:
      `Ingestion stalled: ${ingestion.backlogMessages} messages (${bytesText(ingestion.backlogBytes)}) wait in the broker, the oldest for ${ingestion.oldestUnstoredSeconds} s, and ${stored}; ` +
      `check processing's pods and logs (kubectl -n ${namespace} logs deploy/processing) and the database.`,
  };
}

/** The broker's backlog is at its limit. */
export function storageFullFailure(ingestion: IngestionStatus, namespace: string): Failure {
  const limit = ingestion.backlogLimitBytes === undefined ? '' : ` of ${bytesText(ingestion.backlogLimitBytes)}`;
  return {
    reason: 'StorageFull',
    message:
      `The broker's backlog is full (${bytesText(ingestion.backlogBytes)}${limit}, ${ingestion.backlogMessages} messages): devices are slowed or refused until processing catches up; ` +
      `raise spec.broker.maxBacklog (or spec.broker.storage) or spec.processing.replicas, and check processing (kubectl -n ${namespace} logs deploy/processing).`,
  };
}
