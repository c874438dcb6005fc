/**
 * The derive operator as a process, with leader election:
 *   KUBECONFIG=<path> NAMESPACE=<ns> IDENTITY=<name> node --import tsx packages/runtime/examples/derive-operator-main.ts
 */
import { startDeriveOperator } from './derive-operator.ts';

const mgr = await startDeriveOperator({
  kubeconfigPath: process.env.KUBECONFIG!,
  namespace: process.env.NAMESPACE!,
  leaderElection: { identity: process.env.IDENTITY ?? `derive-${process.pid}` },
  logLevel: 'info',
});
process.on('SIGTERM', () => void mgr.stop(0));
process.on('SIGINT', () => void mgr.stop(0));
process.exit(await mgr.done);
