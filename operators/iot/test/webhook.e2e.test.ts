/**
 * The IoT operator's admission webhook as users get it: the chart installed with its defaults
 * (webhook enabled, failurePolicy Ignore), the operator's image in a real pod on the local
 * cluster's real node, and the real API server calling the webhook through the chart's Service
 * with the chart's own CA (the configuration names the Service, no URL). Proves: an IoTService
 * whose instance namespace exists unowned is refused by `create` with the operator's sentence and
 * is not stored; a normal one is admitted and becomes Available; once the namespace in the way is
 * being deleted the same IoTService is admitted; with no operator pod running, Ignore admits
 * unchecked (a down operator never blocks users).
 * Reported as not run, with the reason, where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApiError, customResource, Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, realNode } from '@iot-operator/local-cluster';
import { chart, prepareChartRelease, type ChartRelease } from './chart-release.ts';
import { abandonLandscape, getOrUndefined, iotService, waitForPhase } from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const IoTServices = customResource('cp.iotservices.io', 'v1alpha1', 'IoTService', 'iotservices');
const WebhookConfigurations = customResource('admissionregistration.k8s.io', 'v1', 'ValidatingWebhookConfiguration', 'validatingwebhookconfigurations', false);

let rel: ChartRelease;
let landscape = '';
let release = '';
const foreignNamespaces: string[] = [];

/** A namespace someone made by hand, named as the instance `id` of the landscape would be. */
async function foreignNamespace(id: string): Promise<string> {
  const name = `${landscape}-${id}`;
  await env.client.create(Kinds.Namespace, { metadata: { name, labels: { 'iot-operator.test/e2e': 'true' } } });
  foreignNamespaces.push(name);
  return name;
}

/** `create` of IoTService `name`: the API server's refusal, or undefined when it was admitted. */
async function refusalOfCreate(name: string): Promise<ApiError | undefined> {
  try {
    await env.client.create(IoTServices, iotService(name, landscape));
    return undefined;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
}

before(async () => {
  if (skip) return;
  rel = await prepareChartRelease(env, 'ls-wh');
  ({ landscape, release } = rel);
});

after(async () => {
  if (landscape) await rel.helm('uninstall', release, '-n', landscape, '--wait').catch(() => undefined);
  if (landscape) await abandonLandscape(env, landscape);
  await Promise.all(foreignNamespaces.map((ns) => env.client.delete(Kinds.Namespace, ns).catch(() => undefined)));
  await env.cleanup();
});

describe('the IoTService admission webhook, served by the operator’s pod behind the chart’s Service', { skip }, () => {
  test('an IoTService whose namespace exists unowned is refused by create with the operator’s sentence, and not stored', async () => {
    await rel.helm('install', release, chart, '-n', landscape, ...rel.values());
    const config = (await env.client.get(WebhookConfigurations, `iot-operator-${landscape}`)) as KubeObject & { webhooks: Array<{ clientConfig: { url?: string; service?: { name: string; namespace: string } } }> };
    assert.equal(config.webhooks[0]!.clientConfig.url, undefined, 'no URL: the API server resolves the Service');
    assert.equal(config.webhooks[0]!.clientConfig.service?.name, 'iot-operator-webhook');
    assert.equal(config.webhooks[0]!.clientConfig.service?.namespace, landscape);
    await rel.waitForReadyPods(1); // its /readyz waits for the webhook server

    const taken = await foreignNamespace('taken');
    // A Ready pod is not yet a routed Service: until kube-proxy has the new endpoint the API server
    // gets "connection refused", and Ignore admits. A dry run (sideEffects None) shows when it routes.
    const routed = Date.now();
    await waitFor('the API server to reach the webhook through its Service', async () => {
      const answer = await env.client
        .raw({ method: 'POST', path: `/apis/cp.iotservices.io/v1alpha1/namespaces/${landscape}/iotservices`, query: { dryRun: 'All' }, body: iotService('taken', landscape) })
        .then(() => 'admitted', (err: unknown) => (err instanceof ApiError ? err.message : Promise.reject(err)));
      return { done: answer !== 'admitted', value: undefined, seen: answer };
    }, { timeoutMs: 60_000, intervalMs: 500 });
    console.log(`# operator pod Ready → webhook reached through the Service: ${((Date.now() - routed) / 1000).toFixed(1)} s`);
    const refusal = await refusalOfCreate('taken');
    assert.ok(refusal, 'the create was refused');
    assert.equal(refusal.code, 403);
    assert.match(refusal.message, /admission webhook "instance-namespace\.cp\.iotservices\.io" denied the request/);
    assert.ok(
      refusal.message.includes(`Namespace ${taken} already exists and was not created by this operator for this IoTService`) && refusal.message.endsWith('remove it or rename the IoTService.'),
      refusal.message,
    );
    assert.equal(await getOrUndefined(env, IoTServices, 'taken', landscape), undefined, 'nothing was stored');
  });

  test('a normal IoTService is admitted and becomes Available', async () => {
    assert.equal(await refusalOfCreate('tenant-a'), undefined);
    const iot = await waitForPhase(env, landscape, 'tenant-a', 'Available', 120_000);
    assert.equal(iot.status?.ready, '7/7');
  });

  test('once the namespace in the way is being deleted, the same IoTService is admitted', async () => {
    await env.client.delete(Kinds.Namespace, `${landscape}-taken`);
    assert.equal(await refusalOfCreate('taken'), undefined);
  });

  test('failurePolicy Ignore: with no operator pod running, a colliding IoTService is admitted unchecked', async () => {
    await rel.helm('upgrade', release, chart, '-n', landscape, ...rel.values(['--set', 'replicas=0']));
    await rel.waitForReadyPods(0, 90_000);
    await foreignNamespace('unchecked');
    assert.equal(await refusalOfCreate('unchecked'), undefined);
  });
});
