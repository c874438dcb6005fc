/**
 * Ownership of a Ptemplate's children.
 *
 * Guarantees: `ownerReferenceTo(pt)` is the controller ownerReference every child carries (the
 * runtime's `controllerReference`: the API server garbage-collects children with their
 * Ptemplate and child events reach it); `ptemplateLabels(name)` are the labels every child and
 * consumer pod carries.
 */

import { controllerReference, type OwnerReference } from '@iot-operator/runtime';
import { Ptemplate, type PtemplateObject } from '../api/ptemplate.ts';

/** Label naming the Ptemplate a child or consumer pod belongs to. */
export const INSTANCE_LABEL = 'pt.example.com/ptemplate';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const OPERATOR_NAME = 'ptemplate-operator';

export function ownerReferenceTo(pt: PtemplateObject): OwnerReference {
  return controllerReference(Ptemplate, pt);
}

export function ptemplateLabels(name: string): Record<string, string> {
  return { [MANAGED_BY_LABEL]: OPERATOR_NAME, [INSTANCE_LABEL]: name };
}
