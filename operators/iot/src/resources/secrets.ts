/**
 * The instance's Secrets: the image-pull-secret copy and the generated iot-credentials.
 *
 * Guarantees: the image-pull-secret copy has the source's `type` and `data` (nothing else of the
 * source: its labels and annotations stay behind) and this instance's labels, so it changes exactly
 * when the source's content changes. `generateCredentials` draws 32 bytes per credential from the
 * injected source of randomness (crypto-grade by default) and encodes them base64url; the
 * credentials Secret is create-only: once it exists the operator never regenerates or changes it.
 * Nothing here logs or returns credentials in any other form.
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
  brokerPassword: 'broker-password',
  apiToken: 'api-token',
} as const;

/** Credentials of one instance, each a base64url string of 32 random bytes. */
export interface IoTCredentials {
  databasePassword: string;
  brokerPassword: string;
  apiToken: string;
}

export type RandomBytes = (size: number) => Uint8Array;

export function generateCredentials(randomBytes: RandomBytes = cryptoRandomBytes): IoTCredentials {
  const credential = () => Buffer.from(randomBytes(CREDENTIAL_BYTES)).toString('base64url');
  return { databasePassword: credential(), brokerPassword: credential(), apiToken: credential() };
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

/** The iot-credentials Secret holding `credentials` (create-only; see the module comment). */
export function desiredCredentialsSecret(instance: Instance, credentials: IoTCredentials): V1Secret {
  const encode = (value: string) => Buffer.from(value, 'utf8').toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: CREDENTIALS_SECRET_NAME, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'Opaque',
    data: {
      [CREDENTIAL_KEYS.apiToken]: encode(credentials.apiToken),
      [CREDENTIAL_KEYS.brokerPassword]: encode(credentials.brokerPassword),
      [CREDENTIAL_KEYS.databasePassword]: encode(credentials.databasePassword),
    },
  };
}
