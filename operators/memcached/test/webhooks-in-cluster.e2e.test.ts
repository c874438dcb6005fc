/**
 * The Memcached webhooks served by the operator in a real pod on the local cluster's real node,
 * called by the API server through the webhook Service, as in a user's cluster: the operator's
 * image, the seed's ServiceAccount, Role, RoleBinding and operator.yaml plus what the README's
 * "In a cluster" adds (--webhook-cert-dir, port 9443, the certificate Secret mounted), and the
 * objects of deploy/webhooks/webhook.yaml as `operator-ts deploy` fills them in (this namespace,
 * the CA of the Secret as caBundle). Because the cluster is shared, the configurations are renamed
 * and match only this test's namespace. An even size is refused with the sample's message and a
 * Memcached without size is stored with 3. Reported as not run, with the reason, where the
 * cluster has no real node.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { customResource, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor } from '@iot-operator/runtime/testing';
import { localTestEnv, onRealNode, operatorImage, realNode, registryPullSecret } from '@iot-operator/local-cluster';
import { readProject } from '../../../packages/sdk/src/project.ts';
import { makeWebhookCertificate } from '@iot-operator/runtime';
import { clusterWebhookObjects, webhookSecretName, webhookServiceName } from '../../../packages/sdk/src/webhook/manifests.ts';
import { MEMCACHED_CRD_FILE } from '../src/api/crd.ts';
import { Memcached, type MemcachedObject } from '../src/api/memcached.ts';

const env = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const project = readProject(operatorDir);
const id = randomBytes(3).toString('hex');
const CERT_DIR = '/tmp/k8s-webhook-server/serving-certs';
const manifest = (file: string) => parse(readFileSync(path.join(operatorDir, file), 'utf8')) as KubeObject & Record<string, any>;
const configurations: Array<{ type: ReturnType<typeof customResource>; name: string }> = [];
let ns = '';

function memcached(name: string, spec: Record<string, unknown>): MemcachedObject {
  return { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name, namespace: ns }, spec } as MemcachedObject;
}

before(async () => {
  if (skip) return;
  const image = await operatorImage('memcached');
  await env.installCrd(path.join(operatorDir, MEMCACHED_CRD_FILE));
  ns = await env.namespace('memcached-webhook-pod');

  const certificate = makeWebhookCertificate([`DNS:${webhookServiceName(project)}.${ns}.svc`]);
  await env.client.create(Kinds.Secret, { metadata: { name: webhookSecretName(project), namespace: ns }, type: 'kubernetes.io/tls', stringData: { 'ca.crt': certificate.ca, 'tls.crt': certificate.cert, 'tls.key': certificate.key } });

  const pullSecret = await registryPullSecret(env, ns);
  const types: Record<string, ReturnType<typeof customResource>> = { ServiceAccount: Kinds.ServiceAccount, Role: Kinds.Role, RoleBinding: Kinds.RoleBinding };
  for (const file of ['service_account.yaml', 'role.yaml', 'role_binding.yaml']) {
    const object = manifest(path.join('deploy', file));
    object.metadata.namespace = ns;
    for (const subject of object['subjects'] ?? []) subject.namespace = ns;
    if (object.kind === 'ServiceAccount') object['imagePullSecrets'] = [{ name: pullSecret }];
    await env.client.create(types[object.kind!]!, object);
  }
  const deployment = parse(readFileSync(path.join(operatorDir, 'deploy/operator.yaml'), 'utf8').replaceAll('REPLACE_IMAGE', image)) as KubeObject & { spec: { template: { spec: Record<string, any> } } };
  deployment.metadata.namespace = ns;
  const pod = deployment.spec.template.spec;
  pod.nodeSelector = onRealNode.nodeSelector;
  pod.tolerations = onRealNode.tolerations;
  pod.volumes = [{ name: 'webhook-cert', secret: { secretName: webhookSecretName(project) } }];
  const container = pod.containers[0];
  container.args.push(`--webhook-cert-dir=${CERT_DIR}`);
  container.ports.push({ name: 'webhook', containerPort: 9443 });
  container.volumeMounts = [{ name: 'webhook-cert', mountPath: CERT_DIR, readOnly: true }];
  await env.client.create(Kinds.Deployment, deployment);

  const caBundle = Buffer.from(certificate.ca).toString('base64');
  for (const object of clusterWebhookObjects(project) as Array<KubeObject & Record<string, any>>) {
    if (object.kind === 'Service') {
      await env.client.create(Kinds.Service, { ...object, metadata: { ...object.metadata, namespace: ns } });
      continue;
    }
    const type = customResource('admissionregistration.k8s.io', 'v1', object.kind!, `${object.kind!.toLowerCase()}s`, false);
    const name = `${object.metadata.name}-pod-e2e-${id}`;
    const webhooks = (object.webhooks as Array<Record<string, any>>).map((w) => ({
      ...w,
      clientConfig: { service: { ...w.clientConfig.service, namespace: ns }, caBundle },
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
    }));
    await env.client.create(type, { ...object, metadata: { ...object.metadata, name }, webhooks });
    configurations.push({ type, name });
  }
});

after(async () => {
  for (const { type, name } of configurations) await env.client.delete(type, name).catch(() => undefined);
  await env.cleanup();
});

describe('the Memcached webhooks in the operator pod', { skip }, () => {
  test('through the webhook Service: an even size is refused with the sample message, a missing size stored as 3', async () => {
    // Until the pod serves, the API server's calls fail (failurePolicy Fail); then the webhook answers.
    const refusal = await waitFor('the webhook in the pod to refuse an even size', async () => {
      const err = await env.client.create(Memcached, memcached('even', { size: 2 })).then(() => undefined, (e: Error) => e);
      return { done: /denied the request/.test(err?.message ?? ''), value: err?.message ?? '', seen: err?.message ?? 'created' };
    }, { timeoutMs: 180_000 });
    assert.match(refusal, /admission webhook "vmemcached-v1alpha1\.cache\.example\.com" denied the request: Cluster size must be an odd number/);
    const created = await env.client.create<MemcachedObject>(Memcached, memcached('defaulted', {}));
    assert.equal(created.spec.size, 3);
  });
});
