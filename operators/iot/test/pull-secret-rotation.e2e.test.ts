// The landscape's image-pull-secret against the cluster's private registry (cluster/parts/registry),
// through a password rotation: the IoT operator's copy in the instance namespace follows the
// landscape's secret, and a pod on the real node in the instance namespace pulls from the registry
// with the copy — before the rotation and, with the new password, after it. Reported as not run,
// with the reason, where a real node cannot run.
//
//   node --import tsx --test operators/iot/test/pull-secret-rotation.e2e.test.ts
// run-tests: alone, before every other file: it rotates the registry's password, which the pull secrets other files made hold.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localRegistry, localTestEnv, onRealNode, pushTestImage, realNode, registryPullSecret, repoRoot } from '@iot-operator/local-cluster';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { IMAGE_PULL_SECRET_NAME } from '../src/resources/secrets.ts';
import { createLandscape, installIoTCrd, iotService, startOperator, stopServedLandscape, waitForPhase } from './e2e-support.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;

type Secret = KubeObject & { type?: string; data?: Record<string, string> };
type Pod = KubeObject & { status?: { phase?: string; containerStatuses?: Array<{ state?: { terminated?: { message?: string } } }> } };

let landscape = '';
let mgr: Manager | undefined;
let image = '';

const passwordIn = (secret: Secret | undefined) => {
  const config = JSON.parse(Buffer.from(secret?.data?.['.dockerconfigjson'] ?? 'e30=', 'base64').toString()) as { auths?: Record<string, { password?: string }> };
  return config.auths?.[localRegistry(env).address]?.password;
};

async function rotatePassword(): Promise<string> {
  const clusterDir = path.dirname(env.kubeconfigPath);
  const { stdout } = await run('bash', ['cluster/parts/run.sh', 'registry', 'rotate-password'], {
    cwd: repoRoot,
    env: { ...process.env, CLUSTER_NAME: path.basename(clusterDir), KWOK_WORKDIR: path.dirname(path.dirname(clusterDir)) },
  });
  return stdout.trim();
}

/** A pod on the real node in `namespace` that pulls the test image with the copied secret and reports the image's /content. */
async function pullWithCopiedSecret(namespace: string, name: string): Promise<string> {
  await env.client.create(Kinds.Pod, {
    metadata: { name, namespace },
    spec: {
      ...onRealNode,
      restartPolicy: 'Never',
      imagePullSecrets: [{ name: IMAGE_PULL_SECRET_NAME }],
      // Instance namespaces enforce the restricted Pod Security Standard.
      securityContext: { runAsNonRoot: true, runAsUser: 65534, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{
        name: 'app',
        image,
        imagePullPolicy: 'Always',
        command: ['/bin/sh', '-c', 'cat /content > /dev/termination-log'],
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '32Mi' } },
      }],
    },
  });
  return waitFor(`pod ${namespace}/${name} to pull and run`, async () => {
    const pod = (await env.client.get(Kinds.Pod, name, namespace)) as Pod;
    return { done: pod.status?.phase === 'Succeeded', value: pod.status?.containerStatuses?.[0]?.state?.terminated?.message ?? '', seen: pod.status };
  }, { timeoutMs: 90_000 });
}

before(async () => {
  if (skip) return;
  await installIoTCrd(env);
  landscape = await createLandscape(env, false);
  await registryPullSecret(env, landscape, IMAGE_PULL_SECRET_NAME);
  ({ image } = await pushTestImage(env, 'iot-operator-test/pull-secret-rotation:1', 'pulled with the landscape secret'));
  mgr = await startOperator(env, landscape);
});

after(() => stopServedLandscape({ env, landscape, mgr }));

describe('the landscape pull secret through a registry password rotation', { skip }, () => {
  it('the copy in the instance namespace follows the landscape secret, and pods there pull with it before and after', async () => {
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant', landscape));
    await waitForPhase(env, landscape, 'tenant', 'Available');
    const instanceNamespace = `${landscape}-tenant`;
    const oldPassword = localRegistry(env).password;
    const copy = (await env.client.get(Kinds.Secret, IMAGE_PULL_SECRET_NAME, instanceNamespace)) as Secret;
    assert.equal(copy.type, 'kubernetes.io/dockerconfigjson');
    assert.equal(passwordIn(copy), oldPassword, 'the copy holds the landscape secret\'s credentials');
    assert.equal(await pullWithCopiedSecret(instanceNamespace, 'before-rotation'), 'pulled with the landscape secret');

    const newPassword = await rotatePassword();
    await registryPullSecret(env, landscape, IMAGE_PULL_SECRET_NAME);
    await waitFor('the copy in the instance namespace to hold the new password', async () => {
      const current = (await env.client.get(Kinds.Secret, IMAGE_PULL_SECRET_NAME, instanceNamespace)) as Secret;
      return { done: passwordIn(current) === newPassword, value: undefined, seen: passwordIn(current) === oldPassword ? 'still the old password' : current.data };
    }, { timeoutMs: 30_000 });
    assert.equal(await pullWithCopiedSecret(instanceNamespace, 'after-rotation'), 'pulled with the landscape secret');
  });
});
