// End-to-end tests of the real node's private registry (cluster/parts/registry): anonymous pulls
// are refused; the kubelet pulls with a pod's imagePullSecrets over TLS verified with the
// cluster's CA, and only with them; a tag that does not exist is reported "not found"; a tag
// pushed again is pulled again; a stopped registry fails
// pulls with a clear event and the same pod starts once it runs again; a rotated password is
// taken by pods whose secret was updated and refused in the old one. Reported as not run, with
// the reason, where a real node cannot run.
//
//   node --import tsx --test cluster/test/registry.e2e.test.ts
// run-tests: alone, before every other file: it stops the registry every pod pulls from and rotates its password.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localRegistry, localTestEnv, onRealNode, pushTestImage, realNode, registryPullSecret, repoRoot } from '../src/index.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;

type Pod = KubeObject & {
  status?: {
    phase?: string;
    containerStatuses?: Array<{ imageID?: string; state?: { waiting?: { reason?: string }; terminated?: { exitCode: number; message?: string } } }>;
  };
};

/** Runs a command of the registry part (cluster/parts/run.sh registry <command>) for the test cluster; its stdout. */
async function registryLib(call: string): Promise<string> {
  const clusterDir = path.dirname(env.kubeconfigPath);
  const { stdout } = await run('bash', ['cluster/parts/run.sh', 'registry', call], {
    cwd: repoRoot,
    env: { ...process.env, CLUSTER_NAME: path.basename(clusterDir), KWOK_WORKDIR: path.dirname(path.dirname(clusterDir)) },
  });
  return stdout.trim();
}

/** GET https://<registry><path> verified with the registry's CA; the status and WWW-Authenticate. */
function registryGet(urlPath: string, credentials?: { user: string; password: string }): Promise<{ status: number; challenge?: string }> {
  const registry = localRegistry(env);
  const [host, port] = registry.address.split(':');
  const headers: Record<string, string> = { Accept: 'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' };
  if (credentials) headers.Authorization = `Basic ${Buffer.from(`${credentials.user}:${credentials.password}`).toString('base64')}`;
  return new Promise((resolve, reject) => {
    const req = request({ host, port: Number(port), path: urlPath, headers, ca: readFileSync(path.join(registry.certDir, 'ca.crt')), timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, challenge: res.headers['www-authenticate'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A pod on the real node that writes the image's /content as its termination message. */
async function createPod(namespace: string, name: string, image: string, pullSecret?: string): Promise<void> {
  await env.client.create(Kinds.Pod, {
    metadata: { name, namespace },
    spec: {
      ...onRealNode,
      restartPolicy: 'Never',
      ...(pullSecret ? { imagePullSecrets: [{ name: pullSecret }] } : {}),
      containers: [{ name: 'app', image, imagePullPolicy: 'Always', command: ['/bin/sh', '-c', 'cat /content > /dev/termination-log'] }],
    },
  });
}

async function podSucceeds(namespace: string, name: string, timeoutMs = 90_000): Promise<{ content: string; imageID: string }> {
  return waitFor(`pod ${name} to run to its end`, async () => {
    const pod = (await env.client.get(Kinds.Pod, name, namespace)) as Pod;
    const status = pod.status?.containerStatuses?.[0];
    const terminated = status?.state?.terminated;
    return { done: pod.status?.phase === 'Succeeded', value: { content: terminated?.message ?? '', imageID: status?.imageID ?? '' }, seen: pod.status };
  }, { timeoutMs });
}

/** Waits until the pod's image pull has failed and the kubelet's events say why; those messages. */
async function pullFails(namespace: string, name: string, why: RegExp, timeoutMs = 60_000): Promise<string[]> {
  return waitFor(`pod ${name}'s pull to fail with ${why}`, async () => {
    const pod = (await env.client.get(Kinds.Pod, name, namespace)) as Pod;
    const reason = pod.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? '';
    const events = (await env.client.list(Kinds.Event, { namespace, fieldSelector: `involvedObject.name=${name}` })).items as Array<KubeObject & { message?: string }>;
    const messages = events.map((e) => e.message ?? '');
    return { done: /^(ErrImagePull|ImagePullBackOff)$/.test(reason) && messages.some((m) => why.test(m)), value: messages, seen: { reason, messages } };
  }, { timeoutMs });
}

let namespace = '';
let image = '';
let firstDigest = '';
before(async () => {
  if (skip) return;
  namespace = await env.namespace('registry');
  ({ image, digest: firstDigest } = await pushTestImage(env, 'iot-operator-test/registry:1', `first push ${Date.now()}`));
});
after(async () => {
  if (!skip) await registryLib('ensure');
  await env.cleanup();
});

describe('the private registry', { skip }, () => {
  test('refuses anonymous and wrong credentials (401, Basic challenge) and serves the pushed manifest to its user, over TLS with the cluster\'s CA', async () => {
    const manifest = '/v2/iot-operator-test/registry/manifests/1';
    const anonymous = await registryGet(manifest);
    assert.equal(anonymous.status, 401);
    assert.match(anonymous.challenge ?? '', /^Basic realm=/);
    const registry = localRegistry(env);
    assert.equal((await registryGet(manifest, { user: registry.user, password: 'not-the-password' })).status, 401);
    assert.equal((await registryGet(manifest, { user: registry.user, password: registry.password })).status, 200);
  });

  test('a pod with the pull secret pulls and runs the pushed image, the digest pushed', async () => {
    const secret = await registryPullSecret(env, namespace);
    await createPod(namespace, 'with-secret', image, secret);
    const { content, imageID } = await podSucceeds(namespace, 'with-secret');
    assert.match(content, /^first push /);
    assert.ok(imageID.endsWith(`@${firstDigest}`), `imageID ${imageID} names the pushed digest ${firstDigest}`);
  });

  test('without a secret, and with a wrong password, the pull is refused and the events name the 401', async () => {
    await createPod(namespace, 'no-secret', image);
    await pullFails(namespace, 'no-secret', /401|unauthorized/i);
    const wrong = await registryPullSecret(env, namespace, 'wrong-password', 'not-the-password');
    await createPod(namespace, 'wrong-password', image, wrong);
    await pullFails(namespace, 'wrong-password', /401|unauthorized/i);
  });

  test('a tag that does not exist: the pull fails and the kubelet says "not found" (what users are told), not a TLS error', async () => {
    await createPod(namespace, 'no-such-tag', `${localRegistry(env).address}/iot-operator-test/registry:no-such-tag`, 'registry-pull-secret');
    const messages = await pullFails(namespace, 'no-such-tag', /registry:no-such-tag: not found/);
    assert.ok(!messages.some((m) => /x509|certificate/.test(m)), `no TLS error: ${messages.join(' | ')}`);
  });

  test('a tag pushed again with other content is pulled again by a new pod (imagePullPolicy Always)', async () => {
    const second = await pushTestImage(env, 'iot-operator-test/registry:1', `second push ${Date.now()}`);
    assert.notEqual(second.digest, firstDigest);
    await createPod(namespace, 'after-repush', image, 'registry-pull-secret');
    const { content, imageID } = await podSucceeds(namespace, 'after-repush');
    assert.match(content, /^second push /);
    assert.ok(imageID.endsWith(`@${second.digest}`), `imageID ${imageID} names the new digest ${second.digest}`);
  });

  test('a stopped registry fails the pull with a clear event; started again, the same pod starts by itself', async () => {
    await registryLib('stop');
    await createPod(namespace, 'registry-down', image, 'registry-pull-secret');
    const messages = await pullFails(namespace, 'registry-down', /connection refused/);
    assert.ok(messages.some((m) => m.includes(localRegistry(env).address)), `an event names the registry: ${messages.join(' | ')}`);
    await registryLib('ensure');
    // The kubelet retries after its back-off (10 s, doubling): nobody touches the pod.
    await podSucceeds(namespace, 'registry-down', 120_000);
  });

  test('a rotated password: pods of the namespace whose secret was updated pull, the old password is refused', async () => {
    const updated = await env.namespace('registry-rotated');
    const oldPassword = localRegistry(env).password;
    await registryPullSecret(env, updated);
    const newPassword = await registryLib('rotate-password');
    assert.notEqual(newPassword, oldPassword);
    assert.equal(localRegistry(env).password, newPassword, 'the cluster keeps the new password for its clients');
    await registryPullSecret(env, updated);
    await createPod(updated, 'new-password', image, 'registry-pull-secret');
    await podSucceeds(updated, 'new-password');
    await createPod(namespace, 'old-password', image, 'registry-pull-secret');
    await pullFails(namespace, 'old-password', /401|unauthorized/i);
  });
});
