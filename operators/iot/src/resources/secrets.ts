/**
 * The instance's Secrets: the image-pull-secret copy and the generated iot-credentials.
 *
 * Guarantees: the image-pull-secret copy has the source's `type` and `data` (nothing else of the
 * source: its labels and annotations stay behind) and this instance's labels, so it changes exactly
 * when the source's content changes. `generateCredentials` draws 32 bytes per credential from the
 * injected source of randomness (crypto-grade by default) and encodes them base64url. The
 * credentials Secret is created with every key of CREDENTIAL_KEYS; afterwards `credentialsPatch`
 * says what to write to it as it is: the keys it lacks (an instance made before a key existed),
 * with fresh values, and never a key it has — existing credentials are never changed (a key no
 * longer in CREDENTIAL_KEYS, such as the one broker password of earlier versions, is left as it
 * is and read by nothing). Nothing here logs or returns credentials in any other form.
 */

import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { instanceLabels } from './labels.ts';

export const IMAGE_PULL_SECRET_NAME = 'image-pull-secret';
export const CREDENTIALS_SECRET_NAME = 'iot-credentials';
export const CREDENTIAL_BYTES = 32;

/** Keys of the iot-credentials Secret. */
export const CREDENTIAL_KEYS = {
  databasePassword: 'database-password',
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

/** The iot-credentials Secret holding `credentials` (as it is created; see the module comment and `credentialsPatch`). */
export function desiredCredentialsSecret(instance: Instance, credentials: IoTCredentials): V1Secret {
  const keys = (Object.keys(CREDENTIAL_KEYS) as CredentialName[]).sort((a, b) => CREDENTIAL_KEYS[a].localeCompare(CREDENTIAL_KEYS[b]));
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: CREDENTIALS_SECRET_NAME, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'Opaque',
    data: Object.fromEntries(keys.map((name) => [CREDENTIAL_KEYS[name], Buffer.from(credentials[name], 'utf8').toString('base64')])),
  };
}

/**
 * The merge patch that brings the credentials Secret as it is (`existing`, read from the API
 * server) to hold every key of `desired` (`desiredCredentialsSecret` with fresh credentials): the
 * keys it lacks, with `desired`'s values, under `existing`'s resourceVersion (so a write of
 * someone else meanwhile makes it fail rather than be overwritten). Undefined when it lacks none:
 * a key it has is never part of the patch.
 */
export function credentialsPatch(existing: V1Secret, desired: V1Secret): { metadata: { resourceVersion?: string }; data: Record<string, string> } | undefined {
  const has = existing.data ?? {};
  const missing = Object.entries(desired.data ?? {}).filter(([key]) => has[key] === undefined);
  if (missing.length === 0) return undefined;
  return { metadata: { resourceVersion: existing.metadata?.resourceVersion }, data: Object.fromEntries(missing) };
}
