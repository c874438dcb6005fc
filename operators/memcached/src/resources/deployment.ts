/**
 * The desired memcached Deployment of a Memcached object: a pure function of the object.
 *
 * Guarantees: `desiredDeployment(m)` names the Deployment after the Memcached, in its
 * namespace, with `replicas = spec.size`, one container running image `memcached:1.6-alpine`
 * with command `memcached -m=64 -o modern -v` and port 11211/TCP, pods labelled
 * `app=memcached,memcached_cr=<name>` (the labels the walkthrough uses and the operator lists
 * pods by) and a controller ownerReference to the Memcached, so that deleting the Memcached
 * garbage-collects the Deployment. Every field is in the form the API server returns, so a
 * Deployment that matches is recognised by `childDifference` and not written again; the
 * desired-hash stamp (`withDesiredHash`) makes a field dropped from this form a difference too.
 */

import type { V1DeploymentSpec, V1DeploymentStatus } from '@kubernetes/client-node';
import { controllerReference, withDesiredHash, type KubeObject } from '@iot-operator/runtime';
import { Memcached, type MemcachedObject } from '../api/memcached.ts';

export const MEMCACHED_IMAGE = 'memcached:1.6-alpine';
export const MEMCACHED_COMMAND: readonly string[] = ['memcached', '-m=64', '-o', 'modern', '-v'];
export const MEMCACHED_PORT = 11211;
/** Label every memcached pod carries, whatever its Memcached. */
export const APP_LABEL = 'app';
export const APP_VALUE = 'memcached';
/** Label naming the Memcached a pod belongs to. */
export const INSTANCE_LABEL = 'memcached_cr';

/** A Deployment as sent and cached (metadata typed as on the wire: timestamps are strings). */
export interface DeploymentObject extends KubeObject {
  spec?: V1DeploymentSpec;
  status?: V1DeploymentStatus;
}

/** Labels of the pods (and the Deployment) of one Memcached. */
export function labelsForMemcached(name: string): Record<string, string> {
  return { [APP_LABEL]: APP_VALUE, [INSTANCE_LABEL]: name };
}

export function desiredDeployment(m: MemcachedObject): DeploymentObject {
  const name = m.metadata.name ?? '';
  const labels = labelsForMemcached(name);
  return withDesiredHash<DeploymentObject>({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name,
      namespace: m.metadata.namespace,
      labels,
      ownerReferences: [controllerReference(Memcached, m)],
    },
    spec: {
      replicas: m.spec.size,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          containers: [
            {
              name: 'memcached',
              image: MEMCACHED_IMAGE,
              command: [...MEMCACHED_COMMAND],
              ports: [{ name: 'memcached', containerPort: MEMCACHED_PORT, protocol: 'TCP' }],
            },
          ],
        },
      },
    },
  });
}
