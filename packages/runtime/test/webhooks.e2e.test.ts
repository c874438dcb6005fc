// Webhooks called by the real API server of the local cluster: a manager's webhook server on
// https://127.0.0.1 (a URL client config whose caBundle is the test's own CA) defaults, validates
// and converts a two-version CRD of this test's own. The webhook configurations match only that
// CRD's group and only this test's namespaces (namespaceSelector), with short timeouts, and are
// deleted with the CRD in `after` whatever happened, so no other test can meet them.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { allow, conversionWebhook, customResource, deny, Manager, mutatingWebhook, validatingWebhook, type KubeObject } from '../src/index.ts';
import { waitFor, type TestEnv } from '../src/testing/index.ts';
import { makeCertificates, type TestCertificates } from './certificates.ts';

const run = promisify(execFile);
const id = randomBytes(3).toString('hex');
const group = `e2e-${id}.webhooks.iot-operator.test`;
const GadgetV1 = customResource(group, 'v1', 'Gadget', 'gadgets');
const GadgetV2 = customResource(group, 'v2', 'Gadget', 'gadgets');
const ValidatingWebhookConfiguration = customResource('admissionregistration.k8s.io', 'v1', 'ValidatingWebhookConfiguration', 'validatingwebhookconfigurations', false);
const MutatingWebhookConfiguration = customResource('admissionregistration.k8s.io', 'v1', 'MutatingWebhookConfiguration', 'mutatingwebhookconfigurations', false);
const configName = `webhooks-e2e-${id}`;
const selectorKey = 'iot-operator.test/webhooks';
const defaultedKey = 'tilde~and/slash';

interface GadgetV1Spec {
  colour?: string;
  size?: number;
  mode?: string;
  settings?: Record<string, string>;
}
type Gadget = KubeObject & { spec: GadgetV1Spec & { color?: string } };

let env: TestEnv;
let failNs: string; // selected by the webhooks with failurePolicy Fail
let ignoreNs: string; // selected by the webhooks with failurePolicy Ignore
let dir: string;
let certs: TestCertificates;
let mgr: Manager | undefined;
let webhookPort: number;

function gadget(namespace: string, name: string, spec: GadgetV1Spec): Gadget {
  return { apiVersion: `${group}/v1`, kind: 'Gadget', metadata: { name, namespace }, spec };
}

function specSchema(colourField: 'colour' | 'color') {
  return {
    type: 'object',
    properties: {
      [colourField]: { type: 'string' },
      size: { type: 'integer' },
      mode: { type: 'string' },
      settings: { type: 'object', additionalProperties: { type: 'string' } },
    },
  };
}

function crd(): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `gadgets.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind: 'Gadget', listKind: 'GadgetList', plural: 'gadgets', singular: 'gadget' },
      versions: [
        { name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: specSchema('colour') } } } },
        { name: 'v2', served: true, storage: false, schema: { openAPIV3Schema: { type: 'object', properties: { spec: specSchema('color') } } } },
      ],
      conversion: {
        strategy: 'Webhook',
        webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: `https://127.0.0.1:${webhookPort}/convert`, caBundle: Buffer.from(certs.ca).toString('base64') } },
      },
    },
  };
}

/** One webhook of a configuration: this CRD's gadgets (v1, equivalent versions converted), in one of this test's namespaces. */
function webhookEntry(name: string, webhookPath: string, namespace: string, failurePolicy: 'Fail' | 'Ignore') {
  return {
    name: `${name}.${group}`,
    clientConfig: { url: `https://127.0.0.1:${webhookPort}${webhookPath}`, caBundle: Buffer.from(certs.ca).toString('base64') },
    rules: [{ apiGroups: [group], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['gadgets'], scope: 'Namespaced' }],
    matchPolicy: 'Equivalent',
    namespaceSelector: { matchLabels: { [selectorKey]: namespace } },
    failurePolicy,
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 3,
  };
}

async function startWebhookManager(): Promise<Manager> {
  const manager = await Manager.create({
    name: 'webhooks-e2e',
    kubeconfigPath: env.kubeconfigPath,
    logger: pino({ level: process.env.LOG_LEVEL ?? 'warn' }),
    httpAddress: '127.0.0.1:0',
    cache: { defaultNamespace: failNs },
    webhook: { address: '127.0.0.1:0', certFile: certs.certFile, keyFile: certs.keyFile },
  });
  manager.addWebhook('/default', mutatingWebhook<Gadget>((object) => {
    object.spec.size ??= 1;
    object.spec.settings = { ...object.spec.settings, [defaultedKey]: 'set by the defaulting webhook' };
    return object;
  }));
  manager.addWebhook('/validate', validatingWebhook<Gadget>((request, { signal, warn }) => {
    const spec = request.object!.spec;
    if (spec.mode === 'explode') throw new Error('the validator exploded on purpose');
    if (spec.mode === 'slow') return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    if (spec.colour === 'brown') warn('colour brown is deprecated, use red');
    return (spec.size ?? 0) > 10 ? deny(`spec.size must be at most 10, got ${spec.size}`) : allow();
  }));
  manager.addWebhook('/convert', conversionWebhook((object, desiredAPIVersion) => {
    const { colour, color, ...rest } = object.spec as GadgetV1Spec & { color?: string };
    if (colour === 'ultraviolet') throw new Error('no v2 colour for ultraviolet');
    return { ...object, spec: desiredAPIVersion.endsWith('/v2') ? { ...rest, color: colour } : { ...rest, colour: color } };
  }));
  await manager.start();
  return manager;
}

async function scrape(port: number, urlPath: string): Promise<{ code: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`);
  return { code: res.status, body: await res.text() };
}

before(async () => {
  env = await localTestEnv();
  dir = await mkdtemp(path.join(os.tmpdir(), 'webhooks-e2e-'));
  certs = makeCertificates(dir, ['IP:127.0.0.1']);
  failNs = await env.namespace('rt-webhooks-fail');
  ignoreNs = await env.namespace('rt-webhooks-ignore');
  for (const ns of [failNs, ignoreNs]) await env.client.patch(customResource('', 'v1', 'Namespace', 'namespaces', false), ns, undefined, { metadata: { labels: { [selectorKey]: ns } } });
  mgr = await startWebhookManager();
  webhookPort = mgr.webhookServer!.port!;
  await env.installCrd(crd());
  await env.client.create(MutatingWebhookConfiguration, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: configName },
    webhooks: [webhookEntry('fail.default', '/default', failNs, 'Fail'), webhookEntry('ignore.default', '/default', ignoreNs, 'Ignore')],
  } as KubeObject);
  await env.client.create(ValidatingWebhookConfiguration, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: configName },
    webhooks: [webhookEntry('fail.validate', '/validate', failNs, 'Fail'), webhookEntry('ignore.validate', '/validate', ignoreNs, 'Ignore')],
  } as KubeObject);
  // The API server picks configurations up from its informers: wait until a gadget is defaulted.
  await env.waitFor('the webhook configurations to take effect', async () => {
    const probe = await env.client.create(GadgetV1, gadget(failNs, `probe-${randomBytes(2).toString('hex')}`, { colour: 'red' }));
    await env.client.delete(GadgetV1, probe.metadata.name!, failNs);
    return { done: probe.spec.size === 1, value: true, seen: probe.spec };
  });
});

after(async () => {
  // Cluster-wide objects first, each attempted whatever the others do.
  for (const type of [ValidatingWebhookConfiguration, MutatingWebhookConfiguration]) await env?.client.delete(type, configName).catch(() => undefined);
  await env?.uninstallCrd(`gadgets.${group}`).catch(() => undefined);
  await env?.cleanup();
  await mgr?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('webhooks called by the real API server', () => {
  it('the manager is ready once its webhook server listens', async () => {
    const ready = await scrape(mgr!.httpPort!, '/readyz');
    assert.equal(ready.code, 200, ready.body);
    assert.equal(mgr!.webhookServer!.listening, true);
  });

  it('a manager serving webhooks is Ready once they answer, its caches still syncing (the pod is a Service’s backend); one without webhooks is not', async () => {
    const Unserved = customResource(`unserved-${id}.webhooks.iot-operator.test`, 'v1', 'Nothing', 'nothings');
    for (const served of [true, false]) {
      const syncing = await Manager.create({
        name: `webhooks-e2e-syncing-${served}`,
        kubeconfigPath: env.kubeconfigPath,
        logger: pino({ level: 'silent' }),
        httpAddress: '127.0.0.1:0',
        cache: { defaultNamespace: failNs },
        ...(served ? { webhook: { address: '127.0.0.1:0', certFile: certs.certFile, keyFile: certs.keyFile } } : {}),
      });
      syncing.cache.informer(Unserved); // a type the API server does not serve: its cache never syncs
      const started = syncing.start();
      try {
        const ready = await waitFor('/readyz to answer', async () => {
          const answer = syncing.httpPort ? await scrape(syncing.httpPort, '/readyz') : undefined;
          return { done: served ? answer?.code === 200 : answer?.body === 'caches not synced', value: answer!, seen: answer };
        });
        assert.equal(ready.code, served ? 200 : 503, ready.body);
        assert.equal(syncing.cache.isSynced, false);
      } finally {
        await syncing.stop();
        await started;
      }
    }
  });

  it('a webhook certificate that cannot be read fails the manager`s start, naming the file; a manager without webhook options serves none', async () => {
    const broken = await Manager.create({
      name: 'webhooks-e2e-broken',
      kubeconfigPath: env.kubeconfigPath,
      logger: pino({ level: 'silent' }),
      httpAddress: '127.0.0.1:0',
      cache: { defaultNamespace: failNs },
      webhook: { address: '127.0.0.1:0', certFile: path.join(dir, 'missing.crt'), keyFile: certs.keyFile },
    });
    await assert.rejects(broken.start(), /webhook certificate .*missing\.crt/);
    assert.equal(await broken.done, 1);
    const without = await Manager.create({ name: 'webhooks-e2e-none', kubeconfigPath: env.kubeconfigPath, logger: pino({ level: 'silent' }) });
    assert.throws(() => without.addWebhook('/validate', validatingWebhook(() => allow())), /created without webhook options/);
  });

  it('create: the defaulting webhook fills spec.size and a settings key with "~" and "/"', async () => {
    const created = await env.client.create(GadgetV1, gadget(failNs, 'defaulted', { colour: 'red', settings: { kept: 'yes' } }));
    assert.equal(created.spec.size, 1);
    assert.deepEqual(created.spec.settings, { kept: 'yes', [defaultedKey]: 'set by the defaulting webhook' });
    const explicit = await env.client.create(GadgetV1, gadget(failNs, 'explicit', { colour: 'red', size: 4 }));
    assert.equal(explicit.spec.size, 4, 'a value given is kept');
  });

  it('invalid: refused with the handler’s message; a warning reaches the client', async () => {
    await assert.rejects(env.client.create(GadgetV1, gadget(failNs, 'too-big', { colour: 'red', size: 20 })), (err: Error) => {
      assert.match(err.message, new RegExp(`admission webhook "fail\\.validate\\.${group.replace(/\./g, '\\.')}" denied the request: spec\\.size must be at most 10, got 20`));
      return true;
    });
    await assert.rejects(env.client.get(GadgetV1, 'too-big', failNs), /not found/);
    const binDir = (await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'control-plane'], { maxBuffer: 16 * 1024 * 1024 })).stdout.trim().split('\n').at(-1)!;
    const manifest = JSON.stringify(gadget(failNs, 'brown', { colour: 'brown' }));
    const kubectl = run(path.join(binDir, 'kubectl'), ['--kubeconfig', env.kubeconfigPath, 'create', '-f', '-']);
    kubectl.child.stdin!.end(manifest);
    const { stderr } = await kubectl;
    assert.match(stderr, /Warning: colour brown is deprecated, use red/);
  });

  it('a handler that throws: refused with its message', async () => {
    await assert.rejects(env.client.create(GadgetV1, gadget(failNs, 'explode', { colour: 'red', mode: 'explode' })), /denied the request: the validator exploded on purpose/);
  });

  it('a handler that does not answer: refused by the server before the API server`s timeout, not timed out by it', async () => {
    await assert.rejects(env.client.create(GadgetV1, gadget(failNs, 'slow', { colour: 'red', mode: 'slow' })), (err: Error) => {
      assert.match(err.message, /denied the request: the validating webhook at \/validate did not answer within 2500 ms/, 'the deadline is the API server’s timeout=3s less the margin');
      return true;
    });
  });

  it('conversion: stored in v1, read as v2 (field renamed), written as v2, read back as v1', async () => {
    await env.client.create(GadgetV1, gadget(failNs, 'convertible', { colour: 'green', size: 2 }));
    const asV2 = await env.client.get<Gadget>(GadgetV2, 'convertible', failNs);
    assert.equal(asV2.apiVersion, `${group}/v2`);
    assert.equal(asV2.spec.color, 'green');
    assert.equal(asV2.spec.colour, undefined);
    assert.equal(asV2.spec.size, 2);

    asV2.spec.color = 'blue';
    await env.client.replace(GadgetV2, asV2);
    const back = await env.client.get<Gadget>(GadgetV1, 'convertible', failNs);
    assert.equal(back.spec.colour, 'blue');
    assert.equal(back.spec.color, undefined);

    const listed = await env.client.list<Gadget>(GadgetV2, { namespace: failNs });
    assert.deepEqual(listed.items.map((g) => [g.metadata.name, g.spec.color]).sort(), [['brown', 'brown'], ['convertible', 'blue'], ['defaulted', 'red'], ['explicit', 'red']]);
  });

  it('a conversion that throws fails the read with its message', async () => {
    await env.client.create(GadgetV1, gadget(failNs, 'ultraviolet', { colour: 'ultraviolet' }));
    try {
      await assert.rejects(env.client.get(GadgetV2, 'ultraviolet', failNs), /no v2 colour for ultraviolet/);
    } finally {
      await env.client.delete(GadgetV1, 'ultraviolet', failNs);
    }
  });

  it('every call is counted in the webhook metrics', async () => {
    const { body } = await scrape(mgr!.httpPort!, '/metrics');
    for (const webhook of ['/default', '/validate', '/convert']) {
      const count = body.match(new RegExp(`^controller_runtime_webhook_requests_total\\{webhook="${webhook}",code="200"\\} (\\d+)$`, 'm'));
      assert.ok(count && Number(count[1]) > 0, `${webhook} counted: ${count?.[0]}`);
      assert.match(body, new RegExp(`^controller_runtime_webhook_latency_seconds_count\\{webhook="${webhook}"\\} [1-9]`, 'm'));
      assert.match(body, new RegExp(`^controller_runtime_webhook_requests_in_flight\\{webhook="${webhook}"\\} 0$`, 'm'));
    }
  });

  it('the webhook server stopped: failurePolicy Fail refuses, Ignore admits unchanged', async () => {
    // Both namespaces are served alike while the server runs.
    assert.equal((await env.client.create(GadgetV1, gadget(ignoreNs, 'served', { colour: 'red' }))).spec.size, 1);
    await assert.rejects(env.client.create(GadgetV1, gadget(ignoreNs, 'too-big', { colour: 'red', size: 20 })), /spec\.size must be at most 10/);

    await mgr!.stop();
    assert.equal(mgr!.webhookServer!.listening, false);
    await assert.rejects(env.client.create(GadgetV1, gadget(failNs, 'unserved', { colour: 'red' })), /failed calling webhook "fail\.default\./);
    const admitted = await env.client.create(GadgetV1, gadget(ignoreNs, 'unserved', { colour: 'red', size: 20 }));
    assert.equal(admitted.spec.size, 20, 'neither defaulted nor validated');
    assert.equal(admitted.spec.settings, undefined);
  });
});
