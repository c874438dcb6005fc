/**
 * Assembles an Armada operator: a manager whose cache holds the three Armada kinds, Helm's
 * release Secrets (payload dropped) and the Helm-managed resources the drift check reads, with
 * the chart, group and manifest controllers of controllers.ts registered.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process (each has its own manager, Helm work directory and caches);
 * `watchNamespace` undefined or empty means every namespace. The helm binary is the one given,
 * else found by `findHelmBinary`, and is run once before anything starts: one that does not run
 * fails the creation with an error naming it. Helm acts with each chart's ServiceAccount
 * (`defaultServiceAccount`, `requireServiceAccount`: chart/authority.ts). Its temporary files
 * (sources, Helm's private directories) are removed once it has stopped.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { dropManagedFields, Manager, operatorManagerOptions, Kinds, type OperatorProcessOptions } from '@iot-operator/runtime';
import { DRIFT_KINDS, HELM_MANAGED_SELECTOR } from './chart/drift.ts';
import { SourceResolver } from './chart/source.ts';
import { registerControllers } from './controllers.ts';
import { findHelmBinary, Helm } from './helm/helm.ts';
import { HELM_STORAGE_SELECTOR, withoutPayload } from './helm/release-state.ts';

export const OPERATOR_NAME = 'armada-operator';

export interface ArmadaOperatorOptions extends OperatorProcessOptions {
  /** The helm binary; undefined = $HELM_BINARY, the project's build, else `helm` on PATH. */
  helmBinary?: string;
  /** ArmadaCharts reconciled in parallel (each may wait on Helm for minutes); default 4. */
  maxConcurrentReconciles?: number;
  /** The ServiceAccount (of each chart's namespace) Helm acts as for charts naming none (chart/authority.ts). */
  defaultServiceAccount?: string;
  /** Refuse charts naming no ServiceAccount when there is no default (Helm never acts as the operator). */
  requireServiceAccount?: boolean;
}

export async function createArmadaOperator(options: ArmadaOperatorOptions = {}): Promise<Manager> {
  const helm = new Helm({ binary: await findHelmBinary(options.helmBinary), kubeconfig: options.kubeconfigPath });
  const helmVersion = await helm.check();
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'armada-sources-'));
  const mgr = await Manager.create(
    operatorManagerOptions(OPERATOR_NAME, options, {
      byType: [
        { type: Kinds.Secret, labelSelector: HELM_STORAGE_SELECTOR, transform: (secret) => withoutPayload(dropManagedFields(secret)) },
        ...Object.values(DRIFT_KINDS).map((type) => ({ type, labelSelector: HELM_MANAGED_SELECTOR })),
      ],
    }),
  );
  registerControllers(mgr, {
    helm,
    sources: new SourceResolver({ workDir }),
    watchNamespace: options.watchNamespace,
    maxConcurrentReconciles: options.maxConcurrentReconciles,
    defaultServiceAccount: options.defaultServiceAccount,
    requireServiceAccount: options.requireServiceAccount,
  });
  mgr.logger.info({ helm: helm.binary, version: helmVersion }, 'using helm');
  // Temporary files (git checkouts, extracted archives, Helm's private directories) go with the operator.
  void mgr.done.then(() => Promise.all([rm(workDir, { recursive: true, force: true }), helm.dispose()])).catch(() => undefined);
  return mgr;
}
