/**
 * Assembles a memcached operator: a manager whose cache holds Memcached objects, Deployments
 * and memcached pods (label `app=memcached`) of the watched namespace, with the Memcached
 * controller registered.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process (each has its own manager, client, cache and metrics);
 * `watchNamespace` undefined or empty means every namespace.
 */

import { Kinds, Manager, type LeaderElectionOptions } from '@iot-operator/runtime';
import type { Logger } from 'pino';
import { OPERATOR_NAME, POD_CACHE_SELECTOR, registerMemcachedController } from './controller.ts';

export interface MemcachedOperatorOptions {
  /** Kubeconfig file; undefined = $KUBECONFIG, ~/.kube/config or the in-cluster service account. */
  kubeconfigPath?: string;
  /** Namespace to watch; undefined or "" = all namespaces. */
  watchNamespace?: string;
  /** host:port of /healthz, /readyz and /metrics; undefined = no HTTP server. */
  httpAddress?: string;
  leaderElection?: LeaderElectionOptions;
  logger?: Logger;
  logLevel?: string;
}

export async function createMemcachedOperator(options: MemcachedOperatorOptions = {}): Promise<Manager> {
  const mgr = await Manager.create({
    name: OPERATOR_NAME,
    kubeconfigPath: options.kubeconfigPath,
    httpAddress: options.httpAddress,
    leaderElection: options.leaderElection,
    logger: options.logger,
    logLevel: options.logLevel,
    cache: {
      defaultNamespace: options.watchNamespace || undefined,
      byType: [{ type: Kinds.Pod, labelSelector: POD_CACHE_SELECTOR }],
    },
  });
  registerMemcachedController(mgr);
  return mgr;
}
