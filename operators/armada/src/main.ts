/**
 * The Armada operator process: flags and environment → a running manager.
 *
 * Guarantees (through the runtime's `parseOperatorCommandLine`): the kubeconfig comes from
 * `--kubeconfig`, else `$KUBECONFIG`, else ~/.kube/config or the in-cluster service account
 * (Helm is given the same); the watched namespace from `--namespace`, else `$WATCH_NAMESPACE`
 * (empty = all namespaces); /healthz, /readyz and /metrics listen on `--metrics-bind-address`
 * (default 127.0.0.1:8080; `0` turns the server off); with `--leader-elect` only the holder of
 * the Lease `armada-operator-leader` reconciles; the helm binary is `--helm-binary`, else
 * `$HELM_BINARY`, else the project's build, else `helm` on PATH (a binary that does not run
 * stops the start with an error naming it); `--default-service-account` and
 * `--require-service-account` choose whose authority Helm acts with. SIGTERM/SIGINT stop gracefully
 * (exit 0); SIGHUP forces a resync.
 *
 * Run: node operators/armada/bin/armada-operator.js [flags]
 */

import { parseOperatorCommandLine } from '@iot-operator/runtime';
import { createArmadaOperator, OPERATOR_NAME } from './operator.ts';

const options = parseOperatorCommandLine({
  name: OPERATOR_NAME,
  description: 'Installs and keeps Helm releases declared as ArmadaChart, ArmadaChartGroup and ArmadaManifest objects (armada.airshipit.org/v1alpha1).',
  extraOptions: (program) => {
    program.option('--helm-binary <path>', 'the helm v3 binary (default: $HELM_BINARY, the project\'s build, else helm on PATH)', process.env.HELM_BINARY);
    program.option('--default-service-account <name>', 'the ServiceAccount (of each ArmadaChart\'s namespace) Helm acts as for charts naming none (default: $ARMADA_DEFAULT_SERVICE_ACCOUNT, else the operator itself)', process.env.ARMADA_DEFAULT_SERVICE_ACCOUNT);
    program.option('--require-service-account', 'refuse ArmadaCharts that name no ServiceAccount when there is no default (also $ARMADA_REQUIRE_SERVICE_ACCOUNT=true)', process.env.ARMADA_REQUIRE_SERVICE_ACCOUNT === 'true');
  },
});
const mgr = await createArmadaOperator({
  ...options,
  helmBinary: options.flags['helmBinary'] as string | undefined,
  defaultServiceAccount: (options.flags['defaultServiceAccount'] as string | undefined) || undefined,
  requireServiceAccount: options.flags['requireServiceAccount'] === true,
});
mgr.logger.info({ namespace: options.watchNamespace || '<all>', metrics: options.metricsBindAddress }, 'starting armada operator');
await mgr.runUntilSignal();
