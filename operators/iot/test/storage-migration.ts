/**
 * The IoTService storage migration as users run it: every IoTService read and written back
 * unchanged through one version, so that the API server stores each in its current storage version,
 * then the CRD's status.storedVersions set to that version alone.
 *
 * Guarantees: `rewriteIoTServices` runs `kubectl get iotservices.<version>.cp.iotservices.io -A -o
 * json | kubectl replace -f -` with the project's kubectl (cluster/engines/build.sh control-plane), again when a write
 * lost a race (an object changed or deleted between the read and the write: kubectl then names it
 * and exits non-zero), and fails with kubectl's words when it never succeeds. Nothing in an
 * object's spec or status changes; its metadata.generation does not move.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { Kinds } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { repoRoot } from '@iot-operator/local-cluster';
import { IOTSERVICE_CRD_NAME } from '../src/api/crd.ts';

const run = promisify(execFile);
let binDir: Promise<string> | undefined;

/** The directory of the project's kubectl (built once by cluster/engines/build.sh control-plane, then cached). */
export function kubectlDir(): Promise<string> {
  binDir ??= run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'], { maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => stdout.trim().split('\n').at(-1)!);
  return binDir;
}

/** The kubectl pipeline that rewrites every IoTService of the cluster through `version` (e.g. v1beta1). */
export function migrationCommand(version: string): string {
  return `kubectl get iotservices.${version}.cp.iotservices.io --all-namespaces -o json | kubectl replace -f -`;
}

/** Rewrites every IoTService of the cluster through `version`; kubectl's output. */
export async function rewriteIoTServices(env: TestEnv, version: string, attempts = 5): Promise<string> {
  const options = { env: { ...process.env, KUBECONFIG: env.kubeconfigPath, PATH: `${await kubectlDir()}:${process.env.PATH}` }, maxBuffer: 64 * 1024 * 1024 };
  let failure = '';
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      const { stdout } = await run('bash', ['-o', 'pipefail', '-c', migrationCommand(version)], options);
      return stdout;
    } catch (err) {
      failure = (err as { stderr?: string }).stderr || String(err);
      if (failure.includes('no objects passed to replace')) return ''; // no IoTService at all
    }
  }
  throw new Error(`${migrationCommand(version)} failed ${attempts} times; last: ${failure}`);
}

/** Sets the IoTService CRD's status.storedVersions (the status subresource of the CRD). */
export async function setStoredVersions(env: TestEnv, versions: string[]): Promise<void> {
  await env.client.patchStatus(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME, undefined, { status: { storedVersions: versions } }, 'merge');
}
