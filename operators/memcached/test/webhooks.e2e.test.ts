/**
 * The Memcached webhooks called by the real API server of the local cluster: the operator, run
 * with --webhook-cert-dir and --webhook-bind-address as a user runs it out of cluster, serves
 * them on 127.0.0.1 with a certificate the SDK makes, and the configurations are those
 * `operator-ts webhook local` applies (URL client config, the CA as caBundle) — scoped to this
 * test's namespace and renamed, because the cluster is shared. An even size is refused with the
 * operator-sdk sample's message, on create and on update; a missing or 0 size is stored as 3 and
 * reconciled; with the operator stopped, failurePolicy Fail refuses every Memcached.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { customResource, type KubeObject, type Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';
import { readProject } from '../../../packages/sdk/src/project.ts';
import { ensureWebhookCertificate } from '@iot-operator/runtime';
import { localWebhookObjects } from '../../../packages/sdk/src/webhook/manifests.ts';
import { MEMCACHED_CRD_FILE } from '../src/api/crd.ts';
import { Memcached, type MemcachedObject } from '../src/api/memcached.ts';
import { parseMemcachedCommandLine } from '../src/options.ts';
import { createMemcachedOperator } from '../src/operator.ts';

const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const crdFile = path.join(operatorDir, MEMCACHED_CRD_FILE);
const id = randomBytes(3).toString('hex');
let env: TestEnv;
let ns: string;
let certDir: string;
let mgr: Manager | undefined;
const configurations: Array<{ type: ReturnType<typeof customResource>; name: string }> = [];

function memcached(name: string, spec: Record<string, unknown>): MemcachedObject {
  return { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name, namespace: ns }, spec } as MemcachedObject;
}

describe('Memcached webhooks', () => {
  before(async () => {
    env = await localTestEnv();
    await env.installCrd(crdFile);
    ns = await env.namespace('memcached-webhooks');
    certDir = mkdtempSync(path.join(os.tmpdir(), 'memcached-webhook-certs-'));
    const certificate = ensureWebhookCertificate(certDir, ['IP:127.0.0.1', 'DNS:localhost']);
    const options = parseMemcachedCommandLine(['--namespace', ns, '--metrics-bind-address', '0', '--webhook-cert-dir', certDir, '--webhook-bind-address', '127.0.0.1:0']);
    mgr = await createMemcachedOperator({ ...env.operatorOptions(ns), maxConcurrentReconciles: 1, webhook: options.webhook });
    await mgr.start();
    const port = mgr.webhookServer!.port!;
    for (const config of localWebhookObjects(readProject(operatorDir), port, certificate.ca).configurations as KubeObject[]) {
      const type = customResource('admissionregistration.k8s.io', 'v1', config.kind!, `${config.kind!.toLowerCase()}s`, false);
      const name = `${config.metadata.name}-e2e-${id}`;
      const webhooks = (config.webhooks as Array<Record<string, unknown>>).map((w) => ({ ...w, namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } }, timeoutSeconds: 5 }));
      await env.client.create(type, { ...config, metadata: { ...config.metadata, name }, webhooks });
      configurations.push({ type, name });
    }
  });

  after(async () => {
    for (const { type, name } of configurations) await env.client.delete(type, name).catch(() => undefined);
    await mgr?.stop();
    await env?.cleanup();
    rmSync(certDir, { recursive: true, force: true });
  });

  test('an even size is refused at admission with the sample message, on create and on update', async () => {
    await assert.rejects(env.client.create(Memcached, memcached('even', { size: 2 })), (err: Error) => {
      assert.match(err.message, /admission webhook "vmemcached-v1alpha1\.cache\.example\.com" denied the request: Cluster size must be an odd number/);
      return true;
    });
    await env.client.create(Memcached, memcached('odd', { size: 1 }));
    await assert.rejects(env.client.patch(Memcached, 'odd', ns, { spec: { size: 4 } }, 'merge'), /Cluster size must be an odd number/);
    assert.equal((await env.client.get<MemcachedObject>(Memcached, 'odd', ns)).spec.size, 1);
  });

  test('a Memcached without a size, or with size 0, is stored with size 3 and reconciled to 3 replicas', async () => {
    const created = await env.client.create<MemcachedObject>(Memcached, memcached('defaulted', {}));
    assert.equal(created.spec.size, 3);
    assert.equal((await env.client.create<MemcachedObject>(Memcached, memcached('zero', { size: 0 }))).spec.size, 3);
    await env.waitFor('the Deployment of the defaulted Memcached', async () => {
      const deployment = await env.client.get<KubeObject & { spec: { replicas: number } }>(customResource('apps', 'v1', 'Deployment', 'deployments'), 'defaulted', ns).catch(() => undefined);
      return { done: deployment?.spec.replicas === 3, value: true, seen: deployment?.spec };
    });
  });

  test('with the operator stopped, failurePolicy Fail refuses every Memcached', async () => {
    await mgr!.stop();
    mgr = undefined;
    // connection refused, or a broken pipe on a connection the API server kept from before
    await assert.rejects(env.client.create(Memcached, memcached('while-down', { size: 1 })), /failed calling webhook "mmemcached-v1alpha1\.cache\.example\.com": failed to call webhook/);
  });
});
