/**
 * The desired children of a Ptemplate and the comparison that decides whether to write them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { childDifference, type KubeObject } from '@iot-operator/runtime';
import type { PtemplateObject } from '../src/api/ptemplate.ts';
import { desiredConsumerDaemonSet } from '../src/resources/daemonset.ts';
import { desiredModule } from '../src/resources/module.ts';
import { example } from './fixtures/example.ts';

/** Whether the controller leaves the observed child alone. */
const childMatches = (desired: KubeObject, observed: KubeObject) => childDifference(desired, observed) === undefined;

const owner = { apiVersion: 'pt.example.com/v1alpha1', kind: 'Ptemplate', name: 'consumer-pod', uid: 'uid-1', controller: true, blockOwnerDeletion: true };

test('the Module loads kernel module pt with the spec parameters on the selected nodes', () => {
  const m = desiredModule(example);
  assert.equal(m.apiVersion, 'kmm.sigs.x-k8s.io/v1beta1');
  assert.equal(m.kind, 'Module');
  assert.equal(m.metadata.name, 'consumer-pod');
  assert.equal(m.metadata.namespace, 'demo');
  assert.deepEqual(m.metadata.ownerReferences, [owner]);
  assert.deepEqual(m.spec, {
    moduleLoader: {
      container: {
        modprobe: { moduleName: 'pt', parameters: ['max_dev=5', 'default_msg=ptemplate'] },
        kernelMappings: [{ regexp: '^.+$', containerImage: 'quay.io/chrisp262/pt-char-dev:${KERNEL_FULL_VERSION}-sb' }],
      },
    },
    devicePlugin: { container: { image: 'quay.io/chrisp262/pt-device-plugin:plugin-latest' } },
    imageRepoSecret: { name: 'pt-char-pull-secret' },
    selector: { 'node-role.kubernetes.io/worker': 'worker' },
  });
  const { defaultmsg: _d, imageRepoSecret: _s, ...bare } = example.spec;
  const minimal = desiredModule({ ...example, spec: bare });
  assert.deepEqual(minimal.spec?.moduleLoader.container.modprobe.parameters, ['max_dev=5']);
  assert.equal(minimal.spec?.imageRepoSecret, undefined);
});

test('the consumer DaemonSet runs consumerimage on the selected nodes, requesting requiredDevices', () => {
  const ds = desiredConsumerDaemonSet(example);
  assert.equal(ds.metadata.name, 'consumer-pod-consumer');
  assert.deepEqual(ds.metadata.ownerReferences, [owner]);
  const pod = ds.spec?.template.spec;
  assert.deepEqual(pod?.nodeSelector, { 'node-role.kubernetes.io/worker': 'worker' });
  assert.deepEqual(pod?.imagePullSecrets, [{ name: 'pt-char-pull-secret' }]);
  assert.equal(pod?.containers[0]?.image, 'quay.io/chrisp262/pt-device-plugin:consumer-latest');
  assert.deepEqual(pod?.containers[0]?.resources, { limits: { 'example.com/ptemplate': '2' }, requests: { 'example.com/ptemplate': '2' } });
  assert.deepEqual(ds.spec?.selector.matchLabels, ds.spec?.template.metadata?.labels);
  assert.equal(ds.spec?.template.metadata?.labels?.['pt.example.com/ptemplate'], 'consumer-pod');

  const none = desiredConsumerDaemonSet({ ...example, spec: { ...example.spec, requiredDevices: 0, selector: {} } });
  assert.equal(none.spec?.template.spec?.containers[0]?.resources, undefined, 'no device request at 0');
  assert.equal(none.spec?.template.spec?.nodeSelector, undefined, 'an empty selector means every node');
});

/** The DaemonSet of `pt` as the API server returns it: defaults and status added. */
function served(pt: PtemplateObject = example): any {
  const ds = structuredClone(desiredConsumerDaemonSet(pt)) as any;
  ds.metadata.generation = 1;
  ds.metadata.resourceVersion = '7';
  ds.spec.revisionHistoryLimit = 10;
  ds.spec.template.spec.restartPolicy = 'Always';
  ds.spec.template.spec.containers[0].imagePullPolicy = 'IfNotPresent';
  ds.status = { desiredNumberScheduled: 1, numberReady: 1 };
  return ds;
}

test('a served child matches its desired form; changes, removals and lost ownership do not', () => {
  assert.equal(childMatches(desiredConsumerDaemonSet(example), served()), true);

  const changedImage = desiredConsumerDaemonSet({ ...example, spec: { ...example.spec, consumerimage: 'other:2' } });
  assert.equal(childMatches(changedImage, served()), false);

  const fewerSelectorKeys = served({ ...example, spec: { ...example.spec, selector: { ...example.spec.selector, extra: 'x' } } });
  assert.equal(childMatches(desiredConsumerDaemonSet(example), fewerSelectorKeys), false, 'a selector key removed from the spec');

  const noDevices = desiredConsumerDaemonSet({ ...example, spec: { ...example.spec, requiredDevices: 0 } });
  assert.equal(childMatches(noDevices, served()), false, 'requiredDevices set to 0 drops the request');

  const { imageRepoSecret: _s, ...noSecret } = example.spec;
  assert.equal(childMatches(desiredConsumerDaemonSet({ ...example, spec: noSecret }), served()), false, 'pull secret removed');

  const coOwned = served();
  coOwned.metadata.ownerReferences.push({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'uid-9' });
  assert.equal(childMatches(desiredConsumerDaemonSet(example), coOwned), true, 'an extra non-controller owner is not drift');

  const module = structuredClone(desiredModule(example)) as any;
  module.spec.moduleLoader.container.modprobe.dirName = '/opt'; // a default KMM may add
  assert.equal(childMatches(desiredModule(example), module), true);
  const changedMsg = desiredModule({ ...example, spec: { ...example.spec, defaultmsg: 'hello' } });
  assert.equal(childMatches(changedMsg, module), false);
  const movedSelector = desiredModule({ ...example, spec: { ...example.spec, selector: {} } });
  assert.equal(childMatches(movedSelector, module), false, 'selector emptied');
});
