/**
 * The desired consumer DaemonSet of a Ptemplate: a pure function of the object.
 *
 * Guarantees: `desiredConsumerDaemonSet(pt)` is a DaemonSet `<name>-consumer` in the
 * Ptemplate's namespace, with a controller ownerReference to it, running one pod per node
 * matching `selector` (as its nodeSelector; none when the selector is empty) with one container
 * `consumer` of image `consumerimage` that requests and is limited to `requiredDevices` of the
 * extended resource `example.com/ptemplate` (no resources at all when 0, so such pods schedule
 * on nodes without the device plugin), pulling with `imageRepoSecret` when given. Pods carry
 * the Ptemplate's labels plus `app.kubernetes.io/name=ptemplate-consumer`. It carries the
 * desired-hash stamp (`withDesiredHash`), so a field dropped from it is a difference for
 * `childDifference`.
 */

import type { V1DaemonSetSpec, V1DaemonSetStatus } from '@kubernetes/client-node';
import { withDesiredHash, type KubeObject } from '@iot-operator/runtime';
import type { PtemplateObject } from '../api/ptemplate.ts';
import { ownerReferenceTo, ptemplateLabels } from './owner.ts';

/** The extended resource the pt device plugin advertises. */
export const DEVICE_RESOURCE = 'example.com/ptemplate';
export const CONSUMER_APP_LABEL = 'app.kubernetes.io/name';
export const CONSUMER_APP = 'ptemplate-consumer';

export interface DaemonSetObject extends KubeObject {
  spec?: V1DaemonSetSpec;
  status?: V1DaemonSetStatus;
}

export function consumerDaemonSetName(ptemplateName: string): string {
  return `${ptemplateName}-consumer`;
}

/** Labels of a Ptemplate's consumer pods (also the DaemonSet's selector). */
export function consumerPodLabels(ptemplateName: string): Record<string, string> {
  return { ...ptemplateLabels(ptemplateName), [CONSUMER_APP_LABEL]: CONSUMER_APP };
}

export function desiredConsumerDaemonSet(pt: PtemplateObject): DaemonSetObject {
  const name = pt.metadata.name ?? '';
  const labels = consumerPodLabels(name);
  const devices = pt.spec.requiredDevices;
  const quantity = { [DEVICE_RESOURCE]: String(devices) };
  const nodeSelector = Object.keys(pt.spec.selector).length > 0 ? { ...pt.spec.selector } : undefined;
  return withDesiredHash<DaemonSetObject>({
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: consumerDaemonSetName(name), namespace: pt.metadata.namespace, labels, ownerReferences: [ownerReferenceTo(pt)] },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          ...(nodeSelector ? { nodeSelector } : {}),
          ...(pt.spec.imageRepoSecret ? { imagePullSecrets: [{ name: pt.spec.imageRepoSecret.name }] } : {}),
          containers: [
            {
              name: 'consumer',
              image: pt.spec.consumerimage,
              ...(devices > 0 ? { resources: { limits: quantity, requests: { ...quantity } } } : {}),
            },
          ],
        },
      },
    },
  });
}
