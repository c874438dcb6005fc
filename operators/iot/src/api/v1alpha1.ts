/**
 * The seed's version of the IoTService API, cp.iotservices.io/v1alpha1, still served: the v1beta1
 * spec (iotservice.ts) with each component's `placement` fields (`nodeSelector`, `tolerations`,
 * `affinity`) beside its other fields instead.
 *
 * Guarantees: `IoTServiceV1alpha1SpecSchema` is derived from the v1beta1 spec schema and differs
 * from it in that one place only, so the two versions cannot drift apart; conversion.ts converts
 * objects between them without loss, and the CRD serves both (crd.ts, crd-schema.ts).
 */

import type { TSchema } from '@sinclair/typebox';
import { API_GROUP, COMPONENTS, IoTServiceSpecSchema, type ComponentName, type IoTServiceSpec } from './iotservice.ts';

/** The seed's version, still served: converted to and from v1beta1 by conversion.ts. */
export const API_VERSION_V1ALPHA1 = 'v1alpha1';
export const IOTSERVICE_V1ALPHA1_API_VERSION = `${API_GROUP}/${API_VERSION_V1ALPHA1}` as const;

/**
 * The v1alpha1 spec: the v1beta1 spec with each component's `placement` fields moved up beside
 * its other fields (the one difference between the versions).
 */
export const IoTServiceV1alpha1SpecSchema: TSchema = (() => {
  type ObjectSchema = TSchema & { properties: Record<string, ObjectSchema> };
  const spec = IoTServiceSpecSchema as unknown as ObjectSchema;
  const properties = { ...spec.properties };
  for (const component of COMPONENTS) {
    const { placement, ...fields } = properties[component]!.properties;
    properties[component] = { ...properties[component]!, properties: { ...fields, ...placement!.properties } };
  }
  return { ...spec, properties };
})();

/** A v1alpha1 spec: each component's placement fields beside its other fields. */
export type IoTServiceV1alpha1Spec = {
  [K in keyof IoTServiceSpec]: K extends ComponentName ? Omit<NonNullable<IoTServiceSpec[K]>, 'placement'> & NonNullable<NonNullable<IoTServiceSpec[K]>['placement']> : IoTServiceSpec[K];
};
