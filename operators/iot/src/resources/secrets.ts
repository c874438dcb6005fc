/**
 * The instance's Secrets: the image-pull-secret copy and the generated iot-credentials.
 *
 * Guarantees: the image-pull-secret copy has the source's `type` and `data` (nothing else of the
 * source: its labels and annotations stay behind) and this instance's labels, so it changes exactly
 * when the source's content changes. `generateCredentials` draws 32 bytes per credential from the
 * injected source of randomness (crypto-grade by default) and encodes them base64url. The
 * credentials Secret is created with every key of CREDENTIAL_KEYS; afterwards `credentialsPatch`
 * says what to write to it as it is: the keys it lacks (an instance made before a key existed),
 * with fresh values, and never a key it has — existing credentials are never changed — except on
 * a rotation: when the rotation asked for (`credentialsRotation`: the IoTService's annotation
 * ROTATE_CREDENTIALS_ANNOTATION) differs from the one the Secret records
 * (CREDENTIALS_ROTATION_ANNOTATION), every key is written afresh and the new rotation recorded,
 * in one write. A key no longer in CREDENTIAL_KEYS, such as the one broker password of earlier
 * versions, is left as it is and read by nothing. Nothing here logs or returns credentials in any
 * other form.
 */

import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { instanceLabels } from './labels.ts';

export const IMAGE_PULL_SECRET_NAME = 'image-pull-secret';
export const CREDENTIALS_SECRET_NAME = 'iot-credentials';
export const CREDENTIAL_BYTES = 32;
/** On the IoTService: set it to a new value to have every credential of iot-credentials made afresh. */
export const ROTATE_CREDENTIALS_ANNOTATION = 'cp.iotservices.io/rotate-credentials';
/** On iot-credentials and every pod template: the rotation the credentials were last made for. */
export const CREDENTIALS_ROTATION_ANNOTATION = 'cp.iotservices.io/credentials-rotation';

/** Keys of the iot-credentials Secret. */
export const CREDENTIAL_KEYS = {
  /** The database's superuser, who may log in over the database pod's local socket alone. */
  databasePassword: 'database-password',
  /** The database roles' passwords, one per component that uses the database (their rights: the database image's database.sh). */
  databaseCorePassword: 'database-core-password',
  databaseProcessingPassword: 'database-processing-password',
  /** The standbys' replication from the primary, and pg_rewind (three database replicas). */
  databaseReplicationPassword: 'database-replication-password',
  /** core's api token: every route of core's API. */
  apiToken: 'api-token',
  /** The gateway's token: core's device check, nothing else. */
  deviceCheckToken: 'device-check-token',
  /** The broker users' passwords, one per component (each user's permissions: the broker image's broker.sh). */
  brokerGatewayPassword: 'broker-gateway-password',
  brokerProcessingPassword: 'broker-processing-password',
  brokerCorePassword: 'broker-core-password',
  /** The brokers' routes to each other (three brokers). */
  brokerRoutePassword: 'broker-route-password',
} as const;

/** A credential of iot-credentials, by its name in code. */
export type CredentialName = keyof typeof CREDENTIAL_KEYS;

/** Credentials of one instance, each a base64url string of 32 random bytes. */
export type IoTCredentials = Record<CredentialName, string>;

export type RandomBytes = (size: number) => Uint8Array;

/** Fresh credentials, drawn in the order of CREDENTIAL_KEYS. */
export function generateCredentials(randomBytes: RandomBytes = cryptoRandomBytes): IoTCredentials {
  const credential = () => Buffer.from(randomBytes(CREDENTIAL_BYTES)).toString('base64url');
  return Object.fromEntries(Object.keys(CREDENTIAL_KEYS).map((name) => [name, credential()])) as IoTCredentials;
}

/** The copy of the landscape's image-pull-secret in the instance namespace. */
export function desiredImagePullSecret(instance: Instance, source: V1Secret): V1Secret {
  const data = source.data ?? {};
  const keys = Object.keys(data).sort();
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: IMAGE_PULL_SECRET_NAME, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: source.type ?? 'Opaque',
    ...(keys.length > 0 ? { data: Object.fromEntries(keys.map((k) => [k, data[k] ?? ''])) } : {}),
  };
}

/**
 * The rotation the credentials are to be made for: the IoTService's ROTATE_CREDENTIALS_ANNOTATION
 * (`requested`) when set, else the one iot-credentials records (`recorded`), so removing the
 * annotation rotates nothing; undefined when neither is set.
 */
export function credentialsRotation(requested: string | undefined, recorded: string | undefined): string | undefined {
  return requested || recorded || undefined;
}

/**
 * The iot-credentials Secret holding `credentials`, recording `rotation` when there is one (as it
 * is created; see the module comment and `credentialsPatch`).
 */
export function desiredCredentialsSecret(instance: Instance, credentials: IoTCredentials, rotation?: string): V1Secret {
  const keys = (Object.keys(CREDENTIAL_KEYS) as CredentialName[]).sort((a, b) => CREDENTIAL_KEYS[a].localeCompare(CREDENTIAL_KEYS[b]));
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: CREDENTIALS_SECRET_NAME,
      namespace: instance.namespace,
      labels: instanceLabels(instance),
      ...(rotation !== undefined ? { annotations: { [CREDENTIALS_ROTATION_ANNOTATION]: rotation } } : {}),
    },
    type: 'Opaque',
    data: Object.fromEntries(keys.map((name) => [CREDENTIAL_KEYS[name], Buffer.from(credentials[name], 'utf8').toString('base64')])),
  };
}

/** A write to the credentials Secret: a merge patch, and whether it rotates them all. */
export interface CredentialsPatch {
  patch: { metadata: { resourceVersion?: string; annotations?: Record<string, string> }; data: Record<string, string> };
  /** Every credential made afresh (a rotation), rather than only the missing ones added. */
  rotates: boolean;
}

/**
 * The write that brings the credentials Secret as it is (`existing`, read from the API server) to
 * `desired` (`desiredCredentialsSecret` with fresh credentials and the rotation asked for): when
 * `desired` records a rotation `existing` does not, every key with `desired`'s values and the
 * rotation recorded; otherwise the keys it lacks, with `desired`'s values. Always under
 * `existing`'s resourceVersion, so a write of someone else meanwhile makes it fail rather than be
 * overwritten. Undefined when there is nothing to write: outside a rotation, a key it has is
 * never part of the patch.
 */
export function credentialsPatch(existing: V1Secret, desired: V1Secret): CredentialsPatch | undefined {
  const resourceVersion = existing.metadata?.resourceVersion;
  const rotation = desired.metadata?.annotations?.[CREDENTIALS_ROTATION_ANNOTATION];
  if (rotation !== undefined && rotation !== existing.metadata?.annotations?.[CREDENTIALS_ROTATION_ANNOTATION]) {
    return { patch: { metadata: { resourceVersion, annotations: { [CREDENTIALS_ROTATION_ANNOTATION]: rotation } }, data: { ...desired.data } }, rotates: true };
  }
  const has = existing.data ?? {};
  const missing = Object.entries(desired.data ?? {}).filter(([key]) => has[key] === undefined);
  if (missing.length === 0) return undefined;
  return { patch: { metadata: { resourceVersion }, data: Object.fromEntries(missing) }, rotates: false };
}
