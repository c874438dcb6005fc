/**
 * Where a fault suite starts: the shared TestEnv and a FaultProxy in front of its API server,
 * through which the suite's operators and clients talk.
 *
 * Guarantees: `startProxiedEnv()` starts the proxy on the test cluster. `stopProxiedEnv` SIGKILLs
 * the operator processes the suite spawned (`spawned`), then stops the proxy and deletes the
 * env's namespaces; parts never started are passed over.
 */
import { localTestEnv } from '@iot-operator/local-cluster';
import { FaultProxy, type OperatorProcess, type TestEnv } from '../../src/testing/index.ts';

export interface ProxiedEnv {
  env: TestEnv;
  proxy: FaultProxy;
}

export async function startProxiedEnv(): Promise<ProxiedEnv> {
  const env = await localTestEnv();
  return { env, proxy: await FaultProxy.start({ kubeconfigPath: env.kubeconfigPath }) };
}

export async function stopProxiedEnv({ env, proxy, spawned = [] }: Partial<ProxiedEnv> & { spawned?: readonly OperatorProcess[] }): Promise<void> {
  for (const child of spawned) child.kill('SIGKILL');
  await proxy?.stop();
  await env?.cleanup();
}
