/**
 * docs/sdk.md's webhook walkthrough, run as written against the local cluster: in a project made
 * by `init` and `create api` (this workspace's packages), the first sh block of "## Webhooks" runs
 * in bash — `create webhook`, `npm run generate`, `npm start`, `kill %1` (npm alone: no terminal
 * here) — and the real API server calls the scaffolded webhooks on 127.0.0.1 (URL client config,
 * the local CA): a Widget without a message is stored with the defaulting webhook's, a blank one
 * is refused with the message the docs show, and once the operator is stopped `npm start` has
 * deleted the webhook configurations. Then `operator-ts deploy` puts the webhooks in a cluster's
 * form on it: the Secret with a certificate for the Service's name, its CA in every caBundle,
 * kept by a second deploy; `undeploy` removes them.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { customResource, ifFound, isNotFound, Kinds, type KubeObject } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv } from '@iot-operator/local-cluster';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const docs = readFileSync(path.join(repoRoot, 'docs/sdk.md'), 'utf8');
const section = docs.slice(docs.indexOf('\n## Webhooks\n'));
const [walkthrough = '', refusal = ''] = [...section.matchAll(/```(?:sh)?\n([\s\S]*?)```/g)].map((m) => m[1]!);
const cli = path.join(repoRoot, 'packages/sdk/bin/operator-ts.js');
const ValidatingWebhookConfiguration = customResource('admissionregistration.k8s.io', 'v1', 'ValidatingWebhookConfiguration', 'validatingwebhookconfigurations', false);
const MutatingWebhookConfiguration = customResource('admissionregistration.k8s.io', 'v1', 'MutatingWebhookConfiguration', 'mutatingwebhookconfigurations', false);
const { NODE_TEST_CONTEXT: _testContext, ...userEnv } = process.env;

let env: TestEnv;
let workDir: string;
let projectDir: string;

function succeed(command: string, args: string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: userEnv });
  assert.equal(result.status, 0, `${command} ${args.join(' ')} failed:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

async function gone(type: typeof Kinds.Namespace, name: string): Promise<boolean> {
  return (await ifFound(env.client.get(type, name))) === undefined;
}

describe("docs/sdk.md's webhook walkthrough", () => {
  before(async () => {
    env = await localTestEnv();
    workDir = mkdtempSync(path.join(os.tmpdir(), 'operator-ts-webhooks-'));
    projectDir = path.join(workDir, 'demo-operator');
    succeed(process.execPath, [cli, 'init', 'demo-operator'], workDir);
    symlinkSync(path.join(repoRoot, 'node_modules'), path.join(projectDir, 'node_modules'));
    succeed(process.execPath, [cli, 'create', 'api', '--group', 'demo', '--version', 'v1alpha1', '--kind', 'Widget'], projectDir);
    succeed(process.execPath, [cli, 'generate', 'crd'], projectDir);
    succeed(process.execPath, [cli, 'generate', 'rbac'], projectDir);
  });

  after(async () => {
    await env?.client.delete(Kinds.Namespace, 'webhook-demo').catch(() => undefined);
    await env?.client.delete(Kinds.CustomResourceDefinition, 'widgets.demo.example.com').catch(() => undefined);
    await env?.cleanup();
    rmSync(workDir, { recursive: true, force: true });
  });

  test('the block runs as written: the API server calls the scaffolded webhooks on 127.0.0.1', async () => {
    assert.match(walkthrough, /^npx operator-ts create webhook --kind Widget --defaulting --validating$/m);
    const kubectlDir = path.dirname(readdirSync(path.join(os.homedir(), '.cache/iot-operator')).filter((d) => d.startsWith('k8s-')).map((d) => path.join(os.homedir(), '.cache/iot-operator', d, 'bin', 'kubectl'))[0]!);
    const result = spawnSync('bash', ['-c', walkthrough], {
      cwd: projectDir,
      encoding: 'utf8',
      timeout: 240_000,
      env: { ...userEnv, KUBECONFIG: env.kubeconfigPath, PATH: `${kubectlDir}:${userEnv.PATH}`, npm_config_update_notifier: 'false' },
    });
    const output = `${result.stdout}\n${result.stderr}`;
    assert.match(result.stdout, /^hello from the defaulting webhook$/m, output.slice(-4000));
    assert.ok(output.includes(refusal.trim()), `the refusal the docs show:\n${refusal}\nin:\n${output.slice(-4000)}`);

    // What generate wrote, and that the webhooks were called by URL, the local CA as caBundle.
    const written = parseAllDocuments(readFileSync(path.join(projectDir, 'deploy/webhook.yaml'), 'utf8')).map((d) => d.toJSON().kind);
    assert.deepEqual(written, ['Service', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']);
    assert.match(output, /applied ValidatingWebhookConfiguration demo-operator-validating-webhook-configuration \(https:\/\/127\.0\.0\.1:9443\)/);

    // kill %1 stopped the operator; npm start then deleted the configurations.
    await env.waitFor('the webhook configurations to be deleted', async () => {
      const done = (await gone(ValidatingWebhookConfiguration, 'demo-operator-validating-webhook-configuration')) && (await gone(MutatingWebhookConfiguration, 'demo-operator-mutating-webhook-configuration'));
      return { done, value: true };
    });
    const widget = await env.client.get<{ spec: { message: string } } & KubeObject>(customResource('demo.example.com', 'v1alpha1', 'Widget', 'widgets'), 'defaulted', 'webhook-demo');
    assert.equal(widget.spec.message, 'hello from the defaulting webhook');
  });

  test('deploy makes the webhook Secret and fills in every caBundle; a second deploy keeps it; undeploy removes it', async () => {
    const ns = await env.namespace('sdk-webhook-deploy');
    const target = ['--kubeconfig', env.kubeconfigPath, '--namespace', ns];
    const deploy = () => succeed(process.execPath, [cli, 'deploy', ...target, '--image', 'registry.example.com/demo-operator:v1'], projectDir);
    assert.match(deploy(), /applied Secret .*demo-operator-webhook-cert[\s\S]*applied ValidatingWebhookConfiguration demo-operator-validating-webhook-configuration/);
    type Secret = KubeObject & { type: string; data: Record<string, string> };
    const secret = await env.client.get<Secret>(Kinds.Secret, 'demo-operator-webhook-cert', ns);
    assert.equal(secret.type, 'kubernetes.io/tls');
    const decode = (key: string) => Buffer.from(secret.data[key]!, 'base64').toString('utf8');
    const cert = new X509Certificate(decode('tls.crt'));
    assert.equal(cert.checkHost(`demo-operator-webhook-service.${ns}.svc`), `demo-operator-webhook-service.${ns}.svc`);
    assert.ok(cert.checkIssued(new X509Certificate(decode('ca.crt'))));
    type Configuration = KubeObject & { webhooks: Array<{ clientConfig: { caBundle: string; service: { name: string; namespace: string } } }> };
    for (const [type, name] of [[ValidatingWebhookConfiguration, 'demo-operator-validating-webhook-configuration'], [MutatingWebhookConfiguration, 'demo-operator-mutating-webhook-configuration']] as const) {
      const { clientConfig } = (await env.client.get<Configuration>(type, name)).webhooks[0]!;
      assert.equal(clientConfig.caBundle, secret.data['ca.crt'], `${name} trusts the Secret's CA`);
      assert.deepEqual({ name: clientConfig.service.name, namespace: clientConfig.service.namespace }, { name: 'demo-operator-webhook-service', namespace: ns });
    }
    await env.client.get(Kinds.Service, 'demo-operator-webhook-service', ns);
    deploy();
    const again = await env.client.get<Secret>(Kinds.Secret, 'demo-operator-webhook-cert', ns);
    assert.equal(again.data['tls.crt'], secret.data['tls.crt'], 'a valid certificate is kept');

    succeed(process.execPath, [cli, 'undeploy', ...target], projectDir);
    assert.ok(await gone(ValidatingWebhookConfiguration, 'demo-operator-validating-webhook-configuration'));
    await assert.rejects(env.client.get(Kinds.Secret, 'demo-operator-webhook-cert', ns), (err) => isNotFound(err));
  });
});
