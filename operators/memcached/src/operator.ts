/**
 * Assembles a memcached operator: a manager whose cache holds Memcached objects, Deployments
 * and memcached pods (label `app=memcached`) of the watched namespace, with the controllers of
 * controllers.ts registered.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process (each has its own manager, client, cache and metrics);
 * `watchNamespace` undefined or empty means every namespace.
 */

import { Kinds, Manager, operatorManagerOptions, type OperatorProcessOptions } from '@iot-operator/runtime';
import { OPERATOR_NAME, POD_CACHE_SELECTOR } from './controller.ts';
import { registerControllers } from './controllers.ts';

/** Kubeconfig, watched namespace (undefined or "" = all), HTTP address, leader election, logging. */
export type MemcachedOperatorOptions = OperatorProcessOptions;

export async function createMemcachedOperator(options: MemcachedOperatorOptions = {}): Promise<Manager> {
  const mgr = await Manager.create(operatorManagerOptions(OPERATOR_NAME, options, { byType: [{ type: Kinds.Pod, labelSelector: POD_CACHE_SELECTOR }] }));
  registerControllers(mgr);
  return mgr;
}
