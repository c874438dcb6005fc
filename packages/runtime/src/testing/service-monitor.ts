/**
 * Test support: the Prometheus Operator's ServiceMonitor API on the test cluster, from a
 * stand-in CRD of this project's own (`fixtures/monitoring.coreos.com_servicemonitors.yml`: the
 * same group, version, kind and scope, any spec kept), so tests can show what an operator or chart
 * does with and without that API.
 *
 * Guarantees: `installServiceMonitorApi` returns once the API is served; `removeServiceMonitorApi`
 * deletes only the stand-in (label `iot-operator.test/stand-in=true`) and waits until it is gone,
 * and refuses, with an error, to touch a ServiceMonitor CRD that is not the stand-in.
 */
import { fileURLToPath } from 'node:url';
import { isNotFound } from '../client/errors.ts';
import { Kinds } from '../client/resource.ts';
import type { TestEnv } from './env.ts';

export const SERVICE_MONITOR_CRD = 'servicemonitors.monitoring.coreos.com';
const standInFile = fileURLToPath(new URL('fixtures/monitoring.coreos.com_servicemonitors.yml', import.meta.url));

export async function installServiceMonitorApi(env: TestEnv): Promise<void> {
  await env.installCrd(standInFile);
}

export async function removeServiceMonitorApi(env: TestEnv): Promise<void> {
  const crd = await env.client.get(Kinds.CustomResourceDefinition, SERVICE_MONITOR_CRD).catch((err: unknown) => {
    if (isNotFound(err)) return undefined;
    throw err;
  });
  if (!crd) return;
  if (crd.metadata.labels?.['iot-operator.test/stand-in'] !== 'true') throw new Error(`${SERVICE_MONITOR_CRD} is installed and is not this project's stand-in: not touching it`);
  await env.uninstallCrd(SERVICE_MONITOR_CRD);
  await env.waitFor(`CRD ${SERVICE_MONITOR_CRD} gone`, async () => {
    const gone = await env.client.get(Kinds.CustomResourceDefinition, SERVICE_MONITOR_CRD).then(
      () => false,
      (err: unknown) => {
        if (isNotFound(err)) return true;
        throw err;
      },
    );
    return { done: gone, value: true };
  });
}
