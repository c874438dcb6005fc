/**
 * The webhooks of an operator run out of cluster (`npm start`, `operator-ts webhook local`): the
 * API server calls https://127.0.0.1:<port> with the CA of a certificate kept in a directory of
 * the machine's temporary directory, one per operator.
 *
 * Guarantees: `startLocalWebhooks` makes or reuses that certificate and applies the URL
 * configurations (deploy-worker.ts `webhook-local`) before it returns the operator's flags;
 * `stop` deletes the configurations, so no request is refused by a webhook that no longer runs;
 * when applying fails half-way, what was applied is deleted before the error is passed on.
 */
import os from 'node:os';
import path from 'node:path';
import { moduleFile, runProjectWorker } from '../project-process.ts';

const deployWorker = moduleFile(import.meta.url, '../deploy/deploy-worker');

/** Where the certificate of an operator's local webhook server lives. */
export function localWebhookCertDir(operatorName: string): string {
  return path.join(os.tmpdir(), `${operatorName}-webhook-server`, 'serving-certs');
}

export async function startLocalWebhooks(projectDir: string, operatorName: string, kubeconfig: string, port: number) {
  const certDir = localWebhookCertDir(operatorName);
  const options = JSON.stringify({ kubeconfig, namespace: 'default', port, certDir });
  const stop = async () => void process.stderr.write(await runProjectWorker(projectDir, deployWorker, ['webhook-local-delete', options], 'deleting the local webhook configurations failed'));
  try {
    process.stderr.write(await runProjectWorker(projectDir, deployWorker, ['webhook-local', options], 'starting the local webhooks failed'));
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  return { args: ['--webhook-bind-address', `127.0.0.1:${port}`, '--webhook-cert-dir', certDir], stop };
}
