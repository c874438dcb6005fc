/**
 * Assembles a ptemplate operator: a manager whose cache holds Ptemplate objects, DaemonSets
 * and consumer pods (label `app.kubernetes.io/name=ptemplate-consumer`) of the watched
 * namespace — plus KMM Modules once their API exists — with the controllers of controllers.ts
 * registered.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process; `watchNamespace` undefined or empty means every namespace.
 */

import { Kinds, Manager, operatorManagerOptions, type OperatorProcessOptions } from '@iot-operator/runtime';
import { POD_CACHE_SELECTOR, type PtemplateControllerOptions } from './controller.ts';
import { registerControllers } from './controllers.ts';
import { OPERATOR_NAME } from './resources/owner.ts';

/** Kubeconfig, watched namespace (undefined or "" = all), HTTP address, leader election, logging; the KMM poll interval. */
export interface PtemplateOperatorOptions extends OperatorProcessOptions, PtemplateControllerOptions {}

export async function createPtemplateOperator(options: PtemplateOperatorOptions = {}): Promise<Manager> {
  const mgr = await Manager.create(operatorManagerOptions(OPERATOR_NAME, options, { byType: [{ type: Kinds.Pod, labelSelector: POD_CACHE_SELECTOR }] }));
  registerControllers(mgr, { kmmPollIntervalMs: options.kmmPollIntervalMs });
  return mgr;
}
