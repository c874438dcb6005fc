/**
 * Labels that tie every child to its landscape and instance.
 *
 * Guarantees: every object the operator creates carries `instanceLabels` (managed-by, landscape,
 * instance); workloads and their pods additionally carry the app.kubernetes.io recommended labels
 * from `componentLabels`. `landscapeSelector` selects exactly this landscape's objects, so watches
 * scoped by it never see another landscape's (or a developer's local operator's) children.
 * Selectors of workloads (`componentSelector`) never include anything that changes over an
 * instance's life (workload selectors are immutable).
 */

import type { ComponentName } from '../api/iotservice.ts';

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'iot-operator';
export const LANDSCAPE_LABEL = 'cp.iotservices.io/landscape';
export const INSTANCE_LABEL = 'cp.iotservices.io/instance';
export const NAME_LABEL = 'app.kubernetes.io/name';
export const APP_INSTANCE_LABEL = 'app.kubernetes.io/instance';
export const COMPONENT_LABEL = 'app.kubernetes.io/component';
export const PART_OF_LABEL = 'app.kubernetes.io/part-of';
export const PART_OF_VALUE = 'iot-service';

/** Who owns a child: the landscape (OPERATOR_NAME) and the instance id (IoTService name). */
export interface InstanceIdentity {
  landscape: string;
  id: string;
}

/** The three labels on every object the operator creates. */
export function instanceLabels(identity: InstanceIdentity): Record<string, string> {
  return {
    [MANAGED_BY_LABEL]: MANAGED_BY_VALUE,
    [LANDSCAPE_LABEL]: identity.landscape,
    [INSTANCE_LABEL]: identity.id,
  };
}

/** Labels of a workload, its pod template and its Service. */
/** What runs in an instance's pods: a component of the spec, or the backup repository host (backup.ts). */
export type WorkloadName = ComponentName | 'backup';

export function componentLabels(identity: InstanceIdentity, component: WorkloadName): Record<string, string> {
  return {
    ...instanceLabels(identity),
    [NAME_LABEL]: `iot-${component}`,
    [APP_INSTANCE_LABEL]: identity.id,
    [COMPONENT_LABEL]: component,
    [PART_OF_LABEL]: PART_OF_VALUE,
  };
}

/** The (immutable) pod selector of a component's workload and Service. */
export function componentSelector(identity: InstanceIdentity, component: WorkloadName): Record<string, string> {
  return { [INSTANCE_LABEL]: identity.id, [COMPONENT_LABEL]: component };
}

/** Label selector string for watches of secondary resources: this landscape's objects only. */
export function landscapeSelector(landscape: string): string {
  return `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${LANDSCAPE_LABEL}=${landscape}`;
}

/**
 * The instance id a child belongs to, read from its labels, or undefined when the object is not
 * a child of this landscape. Used to map child events back to the IoTService key.
 */
export function instanceIdOf(labels: Readonly<Record<string, string>> | undefined, landscape: string): string | undefined {
  if (!labels) return undefined;
  if (labels[MANAGED_BY_LABEL] !== MANAGED_BY_VALUE || labels[LANDSCAPE_LABEL] !== landscape) return undefined;
  const id = labels[INSTANCE_LABEL];
  return id === undefined || id === '' ? undefined : id;
}

/** True when `labels` contain every label of `required` with the same value. */
export function hasLabels(labels: Readonly<Record<string, string>> | undefined, required: Readonly<Record<string, string>>): boolean {
  return Object.entries(required).every(([k, v]) => labels?.[k] === v);
}
