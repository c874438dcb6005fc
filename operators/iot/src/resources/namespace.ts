/**
 * The instance namespace `<OPERATOR_NAME>-<id>`.
 *
 * Guarantees: `instanceNamespaceName` returns a name only if it is a valid DNS-1123 label; else a
 * typed error whose message names the 63-character limit (or the allowed characters). The desired
 * Namespace carries the instance labels and enforces the `restricted` Pod Security Standard (every
 * pod the operator creates satisfies it) and records the owning IoTService's UID in the
 * `cp.iotservices.io/owner-uid` annotation. `namespaceOwnership` calls a namespace `owned` only
 * when it carries this instance's labels *and* this IoTService's UID: a namespace someone merely
 * labelled, or one left behind by an earlier IoTService of the same name, is `foreign` and is
 * never adopted, changed or deleted.
 */

import type { V1Namespace } from '@kubernetes/client-node';
import { hasLabels, instanceLabels, type InstanceIdentity } from './labels.ts';

/** The UID of the IoTService an instance namespace was created for. */
export const OWNER_UID_ANNOTATION = 'cp.iotservices.io/owner-uid';

export const DNS1123_LABEL_MAX_LENGTH = 63;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export const POD_SECURITY_ENFORCE_LABEL = 'pod-security.kubernetes.io/enforce';

export type NamespaceNameError =
  | { kind: 'TooLong'; name: string; length: number; limit: typeof DNS1123_LABEL_MAX_LENGTH; message: string }
  | { kind: 'NotDns1123Label'; name: string; message: string };

export type NamespaceNameResult = { ok: true; name: string } | { ok: false; error: NamespaceNameError };

/** `<landscape>-<id>`, checked against the DNS-1123 label rules a namespace name must follow. */
export function instanceNamespaceName(landscape: string, id: string): NamespaceNameResult {
  const name = `${landscape}-${id}`;
  if (name.length > DNS1123_LABEL_MAX_LENGTH) {
    const room = DNS1123_LABEL_MAX_LENGTH - landscape.length - 1;
    return {
      ok: false,
      error: {
        kind: 'TooLong',
        name,
        length: name.length,
        limit: DNS1123_LABEL_MAX_LENGTH,
        message:
          `Namespace name ${name} has ${name.length} characters but a namespace name (DNS-1123 label) allows at most ` +
          `${DNS1123_LABEL_MAX_LENGTH}; in landscape ${landscape} an IoTService name may have at most ${Math.max(room, 0)} characters.`,
      },
    };
  }
  if (!DNS1123_LABEL.test(name)) {
    return {
      ok: false,
      error: {
        kind: 'NotDns1123Label',
        name,
        message:
          `Namespace name ${name} is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending ` +
          'with a letter or digit); rename the IoTService accordingly (no dots).',
      },
    };
  }
  return { ok: true, name };
}

/** Who an instance namespace belongs to: the instance and the UID of its IoTService. */
export interface NamespaceOwner extends InstanceIdentity {
  ownerUid: string;
}

export function desiredNamespace(owner: NamespaceOwner, name: string): V1Namespace {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      labels: { ...instanceLabels(owner), [POD_SECURITY_ENFORCE_LABEL]: 'restricted' },
      annotations: { [OWNER_UID_ANNOTATION]: owner.ownerUid },
    },
  };
}

/**
 * - `absent`: no such namespace; the operator may create it.
 * - `owned`: created by this operator for this instance of this landscape and this IoTService
 *   (labels and owner UID match).
 * - `foreign`: anything else; never adopted, changed or deleted.
 */
export type NamespaceOwnership = 'absent' | 'owned' | 'foreign';

export function namespaceOwnership(observed: V1Namespace | undefined, owner: NamespaceOwner): NamespaceOwnership {
  if (!observed) return 'absent';
  const labelled = hasLabels(observed.metadata?.labels, instanceLabels(owner));
  return labelled && owner.ownerUid !== '' && observed.metadata?.annotations?.[OWNER_UID_ANNOTATION] === owner.ownerUid ? 'owned' : 'foreign';
}
