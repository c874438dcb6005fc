/**
 * Assembles a ptemplate operator: a manager whose cache holds Ptemplate objects, DaemonSets
 * and consumer pods (label `app.kubernetes.io/name=ptemplate-consumer`) of the watched
 * namespace — plus KMM Modules once their API exists — with the Ptemplate controller registered.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process; `watchNamespace` undefined or empty means every namespace.
 */

import { Kinds, Manager, type LeaderElectionOptions } from '@iot-operator/runtime';
import type { Logger } from 'pino';
import { POD_CACHE_SELECTOR, registerPtemplateController, type PtemplateControllerOptions } from './controller.ts';
import { OPERATOR_NAME } from './resources/owner.ts';

export interface PtemplateOperatorOptions extends PtemplateControllerOptions {
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

export async function createPtemplateOperator(options: PtemplateOperatorOptions = {}): Promise<Manager> {
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
  registerPtemplateController(mgr, { kmmPollIntervalMs: options.kmmPollIntervalMs });
  return mgr;
}
