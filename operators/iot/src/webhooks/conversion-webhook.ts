/**
 * The IoTService conversion webhook: the API server calls it to turn stored v1beta1 objects into
 * v1alpha1 for clients of the old version, and v1alpha1 writes into the stored v1beta1
 * (api/conversion.ts does the converting).
 *
 * Guarantees:
 * - Served at `/convert` by any webhook server the operator runs; conversion reads nothing from
 *   the cluster, so any replica of any landscape's operator answers for every IoTService.
 */
import { conversionWebhook, type Manager } from '@iot-operator/runtime';
import { convertIoTService } from '../api/conversion.ts';
import { IOTSERVICE_CONVERSION_PATH } from '../api/crd.ts';

export function iotServiceConversionWebhook() {
  return conversionWebhook((object, desiredAPIVersion) => convertIoTService(object, desiredAPIVersion));
}

export function registerConversionWebhook(mgr: Manager): void {
  mgr.addWebhook(IOTSERVICE_CONVERSION_PATH, iotServiceConversionWebhook());
}
