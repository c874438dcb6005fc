// The IoTService admission webhook's decisions, on a fake client (the real API server calling it
// through the chart's Service is webhook.e2e.test.ts): a new IoTService whose instance namespace
// exists and is not this landscape's is refused with the operator's NamespaceNotOwned sentence;
// no namespace, one being deleted, or one this landscape's operator made for an IoTService of
// that name is admitted; updates and other namespaces' IoTServices are admitted without a read.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { ApiError, Kinds, type AdmissionReviewAnswer, type KubeApi, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { instanceNamespaceWebhook } from '../src/webhooks/instance-namespace-webhook.ts';
import { OWNER_UID_ANNOTATION, instanceLabels } from '../src/resources/index.ts';

const landscape = 'devawsk8s';

function review(operation: 'CREATE' | 'UPDATE', name: string, namespace = landscape) {
  const object = { apiVersion: 'cp.iotservices.io/v1alpha1', kind: 'IoTService', metadata: { name, namespace, uid: 'new-uid' }, spec: { version: '2.4.1' } };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'req-1',
      kind: { group: 'cp.iotservices.io', version: 'v1alpha1', kind: 'IoTService' },
      resource: { group: 'cp.iotservices.io', version: 'v1alpha1', resource: 'iotservices' },
      name,
      namespace,
      operation,
      userInfo: { username: 'alice' },
      object,
      ...(operation === 'UPDATE' ? { oldObject: object } : {}),
    },
  };
}

async function admit(client: Pick<KubeApi, 'get'>, body: unknown): Promise<AdmissionReviewAnswer['response']> {
  const webhook = instanceNamespaceWebhook(landscape, client);
  const answer = (await webhook.answer(webhook.decode(body), { signal: new AbortController().signal, logger: pino({ level: 'silent' }) })) as AdmissionReviewAnswer;
  return answer.response;
}

function withNamespace(namespace: Partial<KubeObject['metadata']> & { name: string }): FakeClient {
  const client = new FakeClient();
  client.seed(Kinds.Namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: namespace });
  return client;
}

/** A client that fails the test if the handler reads anything. */
const noReads: Pick<KubeApi, 'get'> = {
  get: () => Promise.reject(new Error('the webhook read something it did not need')),
};

describe('IoTService admission webhook: the instance namespace', () => {
  it('refuses a new IoTService whose namespace exists unlabelled, with the operator’s NamespaceNotOwned sentence', async () => {
    const response = await admit(withNamespace({ name: 'devawsk8s-tenant-a' }), review('CREATE', 'tenant-a'));
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 403);
    assert.equal(
      response.status?.message,
      'Namespace devawsk8s-tenant-a already exists and was not created by this operator for this IoTService (its labels or its cp.iotservices.io/owner-uid annotation do not match); it is never adopted or deleted: remove it or rename the IoTService.',
    );
  });

  it('refuses a namespace merely labelled as the instance’s (no owner UID), or made by another landscape', async () => {
    const labelled = await admit(withNamespace({ name: 'devawsk8s-tenant-a', labels: instanceLabels({ landscape, id: 'tenant-a' }) }), review('CREATE', 'tenant-a'));
    assert.equal(labelled.allowed, false);
    const otherLandscape = withNamespace({
      name: 'devawsk8s-tenant-a',
      labels: instanceLabels({ landscape: 'devawsk8s-tenant', id: 'a' }),
      annotations: { [OWNER_UID_ANNOTATION]: 'someone-elses' },
    });
    assert.equal((await admit(otherLandscape, review('CREATE', 'tenant-a'))).allowed, false);
  });

  it('admits a new IoTService whose namespace does not exist', async () => {
    const response = await admit(new FakeClient(), review('CREATE', 'tenant-a'));
    assert.deepEqual(response, { uid: 'req-1', allowed: true });
  });

  it('admits when the namespace is this landscape’s for an IoTService of that name (it exists: AlreadyExists follows; or it is an orphan the operator deletes)', async () => {
    const client = withNamespace({ name: 'devawsk8s-tenant-a', labels: instanceLabels({ landscape, id: 'tenant-a' }), annotations: { [OWNER_UID_ANNOTATION]: 'earlier-uid' } });
    assert.equal((await admit(client, review('CREATE', 'tenant-a'))).allowed, true);
  });

  it('admits when the namespace is being deleted', async () => {
    const client = new FakeClient();
    client.seed(Kinds.Namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'devawsk8s-tenant-a', finalizers: ['kubernetes'] } });
    await client.delete(Kinds.Namespace, 'devawsk8s-tenant-a');
    assert.ok((await client.get(Kinds.Namespace, 'devawsk8s-tenant-a')).metadata.deletionTimestamp, 'the namespace is terminating');
    assert.equal((await admit(client, review('CREATE', 'tenant-a'))).allowed, true);
  });

  it('admits updates, other namespaces’ IoTServices and names that make no namespace name, without reading anything', async () => {
    assert.equal((await admit(noReads, review('UPDATE', 'tenant-a'))).allowed, true);
    assert.equal((await admit(noReads, review('CREATE', 'tenant-a', 'elsewhere'))).allowed, true);
    assert.equal((await admit(noReads, review('CREATE', 'x'.repeat(60)))).allowed, true);
  });

  it('refuses with the API server’s error when the namespace cannot be read', async () => {
    const forbidden: Pick<KubeApi, 'get'> = { get: () => Promise.reject(new ApiError(403, 'Forbidden', 'namespaces "devawsk8s-tenant-a" is forbidden')) };
    const response = await admit(forbidden, review('CREATE', 'tenant-a'));
    assert.equal(response.allowed, false);
    assert.deepEqual(response.status, { code: 403, reason: 'Forbidden', message: 'namespaces "devawsk8s-tenant-a" is forbidden' });
  });
});
