/**
 * `npm start -- --real-node --exit-when-available` (docs/iotservice.md, "A working IoT service"): on the
 * embedded cluster with its real node, the reference images built and pushed to the cluster's
 * registry, the landscape's image-pull-secret holding that registry's credentials, the real-node
 * example Available with its seven pods running on the real node from the registry's images, and
 * one simulated device's messages sent through the gateway and read back from core — the last
 * line of output `device <id>: sent 2, stored 2`. The example is v1alpha1: its components' nodeSelector
 * and tolerations reach the pods through the conversion npm start serves (placement in v1beta1). Reported as not run where the cluster has no
 * real node.
 */
// run-tests: alone among the IoT files: `npm start`'s operator points the CRD's conversion at itself.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor } from '@iot-operator/runtime/testing';
import { localRegistry, localTestEnv, realNode, REAL_NODE_NAME, repoRoot } from '@iot-operator/local-cluster';
import { localWebhookCertDir } from '../src/webhooks/local-conversion.ts';
import { IoTServiceType } from '../src/iotservice-types.ts';

const run = promisify(execFile);
const env = await localTestEnv();
const node = await realNode(env);
const landscape = `qsr-${randomBytes(3).toString('hex')}`;
const instanceNamespace = `${landscape}-reference-iotservice`;

type Pod = KubeObject & { spec: { nodeName?: string }; status?: { phase?: string; containerStatuses?: Array<{ image: string; ready: boolean }> } };

describe('npm start -- --real-node (a working IoT service)', { skip: node.available ? false : node.reason }, () => {
  after(async () => {
    // The quick start's operator has stopped, and with it the conversion webhook: release the example
    // by hand through v1beta1 (stored), then remove what it made (the claims' volumes go with the
    // instance's namespace) and the certificate it kept for the landscape.
    rmSync(path.dirname(localWebhookCertDir(landscape)), { recursive: true, force: true });
    await env.client.patch(IoTServiceType, 'reference-iotservice', landscape, { metadata: { finalizers: null } }).catch(() => undefined);
    for (const ns of [landscape, instanceNamespace]) await env.client.delete(Kinds.Namespace, ns).catch(() => undefined);
    await waitFor(`namespace ${instanceNamespace} gone`, async () => ({ done: !(await env.client.get(Kinds.Namespace, instanceNamespace).catch(() => undefined)), value: undefined }), {
      timeoutMs: 180_000,
    });
  });

  it('builds and pushes the reference images, brings the example to Available on the real node and ends with a device’s messages stored', async () => {
    const { KUBECONFIG: _unused, ...withoutKubeconfig } = process.env;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/quickstart/start.ts'), '--real-node', '--exit-when-available'], {
      cwd: repoRoot,
      env: { ...withoutKubeconfig, OPERATOR_NAME: landscape },
      timeout: 900_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const lines = stdout.trim().split('\n');
    assert.match(lines.at(-1) ?? '', /^device \S+: sent 2, stored 2$/, `the last line; output:\n${stdout}`);
    assert.match(stdout, /reference-iotservice: Available 7\/7/);
    assert.match(stdout, /Secret image-pull-secret holds the credentials of the cluster's registry/);

    const registry = localRegistry(env);
    const secret = (await env.client.get(Kinds.Secret, 'image-pull-secret', landscape)) as KubeObject & { data: Record<string, string> };
    const auths = JSON.parse(Buffer.from(secret.data['.dockerconfigjson'] ?? '', 'base64').toString('utf8')) as { auths: Record<string, { password: string }> };
    assert.equal(auths.auths[registry.address]?.password, registry.password, 'the landscape pulls with the registry’s credentials');

    const { items } = await env.client.list<Pod>(Kinds.Pod, { namespace: instanceNamespace });
    assert.equal(items.length, 7, items.map((p) => p.metadata.name).join(', '));
    for (const pod of items) {
      assert.equal(pod.spec.nodeName, REAL_NODE_NAME, `${pod.metadata.name} on the real node`);
      assert.equal(pod.status?.phase, 'Running', `${pod.metadata.name} running`);
      for (const container of pod.status?.containerStatuses ?? []) assert.ok(container.image.startsWith(`${registry.address}/iot/iot-`), `${container.image} from the registry`);
    }
  });
});
