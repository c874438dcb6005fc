// The chart's IoTService admission webhook, rendered offline with the project's helm: by default a
// ValidatingWebhookConfiguration for CREATE of IoTServices in the release namespace only, calling
// the path the operator serves through Service iot-operator-webhook, whose port reaches the port
// the operator is told to serve on, with a CA (caBundle) that signed the serving certificate the
// pod mounts for the Service's DNS name; webhook.certSecret mounts the user's Secret instead and
// lets cert-manager inject its CA; failurePolicy is a value; webhook.enabled=false leaves no trace.
// The IoTService conversion is kept available: the operator is told to keep the CRD pointed at the
// release's webhook Service (unless webhook.conversion=false), two replicas serve it by default,
// spread over nodes when they can be, with a PodDisruptionBudget keeping one through drains, and a
// terminating pod pauses 15 s (preStop) while the API server's calls move to the other replica; the
// Service routes to pods not yet Ready (their cache sync may need the conversion).
// The real API server calling them is webhook.e2e.test.ts and conversion-in-cluster.e2e.test.ts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '@iot-operator/local-cluster';
import { IOTSERVICE_WEBHOOK_PATH } from '../src/webhooks/instance-namespace-webhook.ts';

const run = promisify(execFile);
const chart = path.join(repoRoot, 'operators/iot/chart/iot-operator');
const namespace = 'ls-chart';
let helm = '';

interface Rendered {
  kind: string;
  metadata: { name: string; annotations?: Record<string, string> };
  data?: Record<string, string>;
  spec?: any;
  webhooks?: any[];
}

async function render(...args: string[]): Promise<Rendered[]> {
  const { stdout } = await run(helm, ['template', 'iot', chart, '--namespace', namespace, ...args], { maxBuffer: 16 * 1024 * 1024 });
  return parseAllDocuments(stdout).map((d) => d.toJSON() as Rendered).filter(Boolean);
}

const find = (objects: Rendered[], kind: string, name?: string) => objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));

before(async () => {
  helm = (await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
});

describe('the chart’s IoTService admission webhook', () => {
  it('by default: CREATE of IoTServices in the release namespace, through the webhook Service to the port the operator serves, with a certificate the caBundle trusts', async () => {
    const objects = await render();
    const config = find(objects, 'ValidatingWebhookConfiguration')!;
    assert.equal(config.metadata.name, `iot-operator-${namespace}`);
    const [webhook] = config.webhooks!;
    assert.equal(config.webhooks!.length, 1);
    assert.deepEqual(webhook.rules, [{ apiGroups: ['cp.iotservices.io'], apiVersions: ['*'], resources: ['iotservices'], operations: ['CREATE'], scope: 'Namespaced' }]);
    assert.deepEqual(webhook.namespaceSelector, { matchLabels: { 'kubernetes.io/metadata.name': namespace } });
    assert.equal(webhook.sideEffects, 'None');
    assert.equal(webhook.failurePolicy, 'Ignore');
    assert.deepEqual(webhook.admissionReviewVersions, ['v1']);
    assert.deepEqual(webhook.clientConfig.service, { name: 'iot-operator-webhook', namespace, path: IOTSERVICE_WEBHOOK_PATH, port: 443 });

    const service = find(objects, 'Service', 'iot-operator-webhook')!;
    const deployment = find(objects, 'Deployment', 'iot-operator')!;
    const container = deployment.spec.template.spec.containers[0];
    assert.deepEqual(service.spec.ports, [{ name: 'https-webhook', port: 443, targetPort: 'webhook' }]);
    assert.deepEqual(container.ports.find((p: { name: string }) => p.name === 'webhook'), { name: 'webhook', containerPort: 9443 });
    assert.ok(container.args.includes('--webhook-port=9443'));
    assert.ok(container.args.includes('--webhook-cert-dir=/etc/iot-operator/webhook-tls'));
    const mount = container.volumeMounts.find((m: { mountPath: string }) => m.mountPath === '/etc/iot-operator/webhook-tls');
    const volume = deployment.spec.template.spec.volumes.find((v: { name: string }) => v.name === mount.name);
    assert.equal(volume.secret.secretName, 'iot-operator-webhook-tls');

    const secret = find(objects, 'Secret', 'iot-operator-webhook-tls')!;
    const decoded = (b64: string) => Buffer.from(b64, 'base64');
    const ca = new X509Certificate(decoded(webhook.clientConfig.caBundle));
    const serving = new X509Certificate(decoded(secret.data!['tls.crt']!));
    assert.ok(serving.verify(ca.publicKey), 'the serving certificate is signed by the caBundle’s CA');
    assert.equal(serving.checkHost(`iot-operator-webhook.${namespace}.svc`), `iot-operator-webhook.${namespace}.svc`, 'it names the Service the API server dials');
    assert.equal(secret.data!['ca.crt'], webhook.clientConfig.caBundle);
  });

  it('webhook.certSecret: the user’s Secret is mounted, none is made, and cert-manager is asked to inject its CA', async () => {
    const objects = await render('--set', 'webhook.certSecret=iot-webhook-cert');
    assert.equal(find(objects, 'Secret', 'iot-operator-webhook-tls'), undefined);
    const deployment = find(objects, 'Deployment', 'iot-operator')!;
    assert.ok(deployment.spec.template.spec.volumes.some((v: { secret?: { secretName: string } }) => v.secret?.secretName === 'iot-webhook-cert'));
    const config = find(objects, 'ValidatingWebhookConfiguration')!;
    assert.equal(config.metadata.annotations?.['cert-manager.io/inject-ca-from-secret'], `${namespace}/iot-webhook-cert`);
  });

  it('failurePolicy, timeoutSeconds and port are values, checked by the schema', async () => {
    const objects = await render('--set', 'webhook.failurePolicy=Fail', '--set', 'webhook.timeoutSeconds=3', '--set', 'webhook.port=10443');
    const [webhook] = find(objects, 'ValidatingWebhookConfiguration')!.webhooks!;
    assert.equal(webhook.failurePolicy, 'Fail');
    assert.equal(webhook.timeoutSeconds, 3);
    assert.ok(find(objects, 'Deployment')!.spec.template.spec.containers[0].args.includes('--webhook-port=10443'));
    await assert.rejects(render('--set', 'webhook.failurePolicy=Never'), /webhook\.failurePolicy/);
    await assert.rejects(render('--set', 'webhook.timeoutSeconds=60'), /webhook\.timeoutSeconds/);
  });

  it('webhook.enabled=false: no configuration, Service, Secret, port or flag', async () => {
    const objects = await render('--set', 'webhook.enabled=false');
    assert.equal(find(objects, 'ValidatingWebhookConfiguration'), undefined);
    assert.equal(find(objects, 'Service', 'iot-operator-webhook'), undefined);
    assert.equal(find(objects, 'Secret', 'iot-operator-webhook-tls'), undefined);
    const container = find(objects, 'Deployment')!.spec.template.spec.containers[0];
    assert.ok(!container.args.some((a: string) => a.startsWith('--webhook')));
    assert.ok(!container.ports.some((p: { name: string }) => p.name === 'webhook'));
  });

  it('the conversion: --conversion-service names the release’s webhook Service; webhook.conversion=false leaves the CRD alone', async () => {
    const args = (objects: Rendered[]) => find(objects, 'Deployment')!.spec.template.spec.containers[0].args as string[];
    assert.ok(args(await render()).includes(`--conversion-service=${namespace}/iot-operator-webhook`));
    assert.ok(!args(await render('--set', 'webhook.conversion=false')).some((a) => a.startsWith('--conversion-service')));
    await assert.rejects(render('--set', 'webhook.conversion=maybe'), /webhook\.conversion/);
  });

  it('kept available: two replicas by default, preferring different nodes, and a PodDisruptionBudget of minAvailable 1 selecting them', async () => {
    const objects = await render();
    const deployment = find(objects, 'Deployment')!;
    assert.equal(deployment.spec.replicas, 2);
    const pod = deployment.spec.template;
    assert.deepEqual(pod.spec.containers[0].lifecycle, { preStop: { sleep: { seconds: 15 } } }, 'a terminating pod serves on while it leaves the endpoints');
    const [term] = pod.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution;
    assert.equal(term.podAffinityTerm.topologyKey, 'kubernetes.io/hostname');
    assert.deepEqual(term.podAffinityTerm.labelSelector.matchLabels, deployment.spec.selector.matchLabels);
    const pdb = find(objects, 'PodDisruptionBudget', 'iot-operator')!;
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector, deployment.spec.selector);
    for (const [key, value] of Object.entries(pdb.spec.selector.matchLabels)) assert.equal(pod.metadata.labels[key], value, `the pods carry ${key}`);

    assert.equal(find(objects, 'Service', 'iot-operator-webhook')!.spec.publishNotReadyAddresses, undefined, 'a terminating pod leaves the endpoints at once, not when its process has exited');
    assert.equal(find(await render('--set', 'replicas=1'), 'PodDisruptionBudget'), undefined, 'one replica: no budget, which would block every drain');
    const own = find(await render('--set-json', 'affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["ops"]}]}]}}}'), 'Deployment')!;
    assert.deepEqual(Object.keys(own.spec.template.spec.affinity), ['nodeAffinity'], 'an affinity of the user’s replaces the default');
  });
});
