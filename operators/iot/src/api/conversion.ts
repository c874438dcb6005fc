/**
 * Conversion of IoTService objects between cp.iotservices.io/v1alpha1 and v1beta1, as the API
 * server asks for it through the CRD's conversion webhook.
 *
 * Guarantees:
 * - Lossless both ways: converting an object to the other version and back gives the object it
 *   was (the round-trip property tests check this on generated objects). The one difference is a
 *   component's `nodeSelector`, `tolerations` and `affinity`: beside its other fields in
 *   v1alpha1, under its `placement` in v1beta1; a v1beta1 `placement` always holds at least one of
 *   them (the schema's minProperties), so no empty placement exists to be lost.
 * - Only `apiVersion` and those fields change: metadata, status and every other field pass through
 *   as they are (the API server refuses a conversion that changes metadata beyond labels and
 *   annotations).
 * - An object of a version other than these two, or a request for one, is an error: the API
 *   server then fails the whole request with its message.
 */
import type { KubeObject } from '@iot-operator/runtime';
import { COMPONENTS, IOTSERVICE_API_VERSION } from './iotservice.ts';
import { IOTSERVICE_V1ALPHA1_API_VERSION } from './v1alpha1.ts';

const PLACEMENT_FIELDS = ['nodeSelector', 'tolerations', 'affinity'] as const;
const VERSIONS: readonly string[] = [IOTSERVICE_V1ALPHA1_API_VERSION, IOTSERVICE_API_VERSION];

type Fields = Record<string, unknown>;

function isFields(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A v1alpha1 component's fields with its scheduling fields moved under `placement`. */
function groupPlacement(component: Fields): Fields {
  const placement: Fields = {};
  const rest: Fields = {};
  for (const [key, value] of Object.entries(component)) {
    if ((PLACEMENT_FIELDS as readonly string[]).includes(key)) placement[key] = value;
    else rest[key] = value;
  }
  return Object.keys(placement).length > 0 ? { ...rest, placement } : rest;
}

/** A v1beta1 component's fields with its `placement` fields moved up beside the others. */
function flattenPlacement(component: Fields): Fields {
  const { placement, ...rest } = component;
  return isFields(placement) ? { ...rest, ...placement } : rest;
}

function convertSpec(spec: unknown, convertComponent: (component: Fields) => Fields): unknown {
  if (!isFields(spec)) return spec;
  const converted: Fields = { ...spec };
  for (const name of COMPONENTS) {
    if (isFields(spec[name])) converted[name] = convertComponent(spec[name]);
  }
  return converted;
}

/** `object` (an IoTService of either version) as `desiredAPIVersion`. */
export function convertIoTService(object: KubeObject, desiredAPIVersion: string): KubeObject {
  if (!VERSIONS.includes(desiredAPIVersion)) throw new Error(`cannot convert an IoTService to ${desiredAPIVersion}: only ${VERSIONS.join(' and ')} exist`);
  if (!VERSIONS.includes(object.apiVersion ?? '')) throw new Error(`cannot convert an IoTService of ${object.apiVersion}: only ${VERSIONS.join(' and ')} exist`);
  if (object.apiVersion === desiredAPIVersion) return object;
  const convertComponent = desiredAPIVersion === IOTSERVICE_API_VERSION ? groupPlacement : flattenPlacement;
  const { spec, ...rest } = object as KubeObject & { spec?: unknown };
  return { ...rest, apiVersion: desiredAPIVersion, ...(spec === undefined ? {} : { spec: convertSpec(spec, convertComponent) }) } as KubeObject;
}
