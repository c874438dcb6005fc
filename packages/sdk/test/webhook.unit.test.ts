/**
 * `create webhook` and what the webhooks need around them: the handler files and their
 * registration, input checked before anything is written, the configurations in their cluster
 * form (deploy/webhook.yaml) and their local form (URL to 127.0.0.1 with the CA), a converting
 * kind's CRD conversion, and the certificate (its names, kept while usable, remade otherwise).
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { generatedWebhooks } from '../src/generate/generate.ts';
import { readProject } from '../src/project.ts';
import { createApi, createWebhook, init } from '../src/scaffold.ts';
import { ensureWebhookCertificate, usableCertificate } from '@iot-operator/runtime';
import { conversionStanza, localWebhookObjects } from '../src/webhook/manifests.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'operator-ts-webhook-'));
  init(dir, { name: 'demo-operator' });
  createApi(dir, { group: 'demo', version: 'v1alpha1', kind: 'Widget', namespaced: true });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const read = (file: string) => readFileSync(path.join(dir, file), 'utf8');

test('create webhook writes the handlers beside the controller, registers them and records them in operator-ts.json', () => {
  createWebhook(dir, { kind: 'Widget', defaulting: true, validating: true, conversion: false });
  const handlers = read('src/webhooks/widget.ts');
  assert.match(handlers, /export const DEFAULT_WIDGET_PATH = '\/mutate-demo-example-com-v1alpha1-widget';/);
  assert.match(handlers, /export const VALIDATE_WIDGET_PATH = '\/validate-demo-example-com-v1alpha1-widget';/);
  assert.doesNotMatch(handlers, /conversionWebhook/);
  assert.ok(existsSync(path.join(dir, 'test/widget-webhook.unit.test.ts')));
  const registry = read('src/webhooks.ts');
  assert.match(registry, /import \{ registerWidgetWebhooks \} from '\.\/webhooks\/widget\.ts';\n\/\/ operator-ts:webhook-imports/);
  assert.match(registry, /  'Widget',\n  \/\/ operator-ts:webhook-kinds/);
  assert.match(registry, /  registerWidgetWebhooks\(mgr\);\n  \/\/ operator-ts:webhooks/);
  assert.deepEqual(readProject(dir).webhooks, [{ group: 'demo.example.com', version: 'v1alpha1', kind: 'Widget', plural: 'widgets', namespaced: true, defaulting: true, validating: true, conversion: false }]);
});

test('a kind create api did not make needs its --api-version; its handlers allow everything until filled in', () => {
  assert.throws(() => createWebhook(dir, { kind: 'Gadget', defaulting: true, validating: false, conversion: false }), /no API of kind Gadget: run `operator-ts create api` first, or name the kind's --api-version/);
  createWebhook(dir, { kind: 'Gadget', defaulting: false, validating: true, conversion: false, apiVersion: 'tools.example.org/v1' });
  assert.match(read('src/webhooks/gadget.ts'), /export type GadgetObject = KubeObject[\s\S]*TODO\(user\): fill in your validation logic/);
  assert.equal(existsSync(path.join(dir, 'test/gadget-webhook.unit.test.ts')), false);
  assert.equal(readProject(dir).webhooks?.find((w) => w.kind === 'Gadget')?.plural, 'gadgets');
});

test('create webhook refuses no webhook kind, a second time and a registry without markers, writing nothing', () => {
  const snapshot = () => readdirSync(path.join(dir, 'src'), { recursive: true }).map(String).sort().join(',') + read('operator-ts.json');
  const before = snapshot();
  assert.throws(() => createWebhook(dir, { kind: 'Widget', defaulting: false, validating: false, conversion: false }), /say which webhooks: --defaulting, --validating and\/or --conversion/);
  writeFileSync(path.join(dir, 'src/webhooks.ts'), 'export const webhookKinds: string[] = [];\n');
  assert.throws(() => createWebhook(dir, { kind: 'Widget', defaulting: true, validating: false, conversion: false }), /src\/webhooks\.ts lacks the marker "\/\/ operator-ts:webhook-imports"/);
  assert.equal(snapshot(), before);
  rmSync(path.join(dir, 'src/webhooks.ts'));
  createWebhook(dir, { kind: 'Widget', defaulting: true, validating: false, conversion: false });
  assert.match(read('src/webhooks.ts'), /registerWidgetWebhooks\(mgr\);/, 'a missing registry is written anew');
  assert.throws(() => createWebhook(dir, { kind: 'Widget', defaulting: false, validating: true, conversion: false }), /already has webhooks of kind Widget/);
});

test('deploy/webhook.yaml: the Service and both configurations, calling the Service in REPLACE_NAMESPACE, failurePolicy Fail, v1 reviews', () => {
  assert.deepEqual(generatedWebhooks(dir), {}, 'nothing without webhooks');
  createWebhook(dir, { kind: 'Widget', defaulting: true, validating: true, conversion: true });
  const objects = parseAllDocuments(generatedWebhooks(dir)['deploy/webhook.yaml']!).map((d) => d.toJSON());
  assert.deepEqual(objects.map((o) => `${o.kind} ${o.metadata.name}`), [
    'Service demo-operator-webhook-service',
    'MutatingWebhookConfiguration demo-operator-mutating-webhook-configuration',
    'ValidatingWebhookConfiguration demo-operator-validating-webhook-configuration',
  ]);
  assert.deepEqual(objects[0].spec.ports, [{ name: 'webhook', port: 443, targetPort: 9443, protocol: 'TCP' }]);
  const validating = objects[2].webhooks[0];
  assert.deepEqual(validating.clientConfig, { service: { name: 'demo-operator-webhook-service', namespace: 'REPLACE_NAMESPACE', path: '/validate-demo-example-com-v1alpha1-widget', port: 443 } });
  assert.deepEqual(validating.rules, [{ apiGroups: ['demo.example.com'], apiVersions: ['v1alpha1'], operations: ['CREATE', 'UPDATE'], resources: ['widgets'], scope: 'Namespaced' }]);
  assert.equal(validating.failurePolicy, 'Fail');
  assert.deepEqual(validating.admissionReviewVersions, ['v1']);
  assert.deepEqual(conversionStanza(readProject(dir), 'demo.example.com', 'Widget'), {
    strategy: 'Webhook',
    webhook: { conversionReviewVersions: ['v1'], clientConfig: { service: { name: 'demo-operator-webhook-service', namespace: 'REPLACE_NAMESPACE', path: '/convert-demo-example-com-widget', port: 443 } } },
  });
});

test('out of cluster the same webhooks call https://127.0.0.1:<port> with the local CA', () => {
  createWebhook(dir, { kind: 'Widget', defaulting: true, validating: false, conversion: true });
  const { configurations, conversions } = localWebhookObjects(readProject(dir), 9443, 'CA PEM');
  assert.deepEqual(configurations.map((c) => c.kind), ['MutatingWebhookConfiguration'], 'no validating configuration without validating webhooks');
  const caBundle = Buffer.from('CA PEM').toString('base64');
  assert.deepEqual((configurations[0]!.webhooks as Array<{ clientConfig: unknown }>)[0]!.clientConfig, { url: 'https://127.0.0.1:9443/mutate-demo-example-com-v1alpha1-widget', caBundle });
  assert.deepEqual(conversions, [{ crd: 'widgets.demo.example.com', conversion: { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: 'https://127.0.0.1:9443/convert-demo-example-com-widget', caBundle } } } }]);
});

test('the webhook certificate covers its names, is kept while usable and remade for other names', () => {
  const certDir = path.join(dir, 'certs');
  const first = ensureWebhookCertificate(certDir, ['IP:127.0.0.1', 'DNS:localhost']);
  const cert = new X509Certificate(first.cert);
  assert.ok(cert.checkIssued(new X509Certificate(first.ca)));
  assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
  assert.deepEqual(readdirSync(certDir).sort(), ['ca.crt', 'tls.crt', 'tls.key']);
  assert.equal(ensureWebhookCertificate(certDir, ['IP:127.0.0.1']).cert, first.cert, 'kept: a restart keeps the caBundle');
  assert.equal(usableCertificate(first, ['DNS:demo-operator-webhook-service.ns.svc']), false);
  // A Service name longer than a certificate's 64-character common name.
  const long = 'demo-operator-webhook-service.a-namespace-with-a-rather-long-name-0123.svc';
  const other = ensureWebhookCertificate(certDir, [`DNS:${long}`]);
  assert.notEqual(other.ca, first.ca);
  assert.equal(new X509Certificate(other.cert).checkHost(long), long);
});
