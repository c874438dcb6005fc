/**
 * Assembles a memcached operator: a manager whose cache holds Memcached objects, Deployments
 * and memcached pods (label `app=memcached`, held as metadata and phase) of the watched namespace,
 * with the controllers of controllers.ts registered.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process (each has its own manager, client, cache and metrics);
 * `watchNamespace` undefined or empty means every namespace.
 */

import { Kinds, Manager, keepFields, operatorManagerOptions, type OperatorProcessOptions } from '@iot-operator/runtime';
import { OPERATOR_NAME, POD_CACHE_SELECTOR } from './controller.ts';
import { registerControllers } from './controllers.ts';

/** Kubeconfig, watched namespace (undefined or "" = all), HTTP address, leader election, logging. */
export type MemcachedOperatorOptions = OperatorProcessOptions;

export async function createMemcachedOperator(options: MemcachedOperatorOptions = {}): Promise<Manager> {
  // Of a pod, status.nodes needs its name, deletion mark and phase: the cache keeps no more.
  const podCache = { type: Kinds.Pod, labelSelector: POD_CACHE_SELECTOR, transform: keepFields('status.phase') };
  const mgr = await Manager.create(operatorManagerOptions(OPERATOR_NAME, options, { byType: [podCache] }));
  registerControllers(mgr);
  return mgr;
}
