/**
 * The Ptemplate CRD's schema says what the operator relies on (`npm run generate -- --check`,
 * scripts/test/generate.unit.test.ts, holds the committed CRD to it): the fields of the ptemplate-operator example, defaults, the CEL rule, a
 * status with consumers and conditions, a status subresource.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { degradedConditionProblem } from '@iot-operator/runtime/testing';
import { ptemplateCrd, ptemplateCrdYaml } from '../src/api/crd.ts';
import { isValidPtemplateSpec } from '../src/api/ptemplate.ts';

const exampleFile = fileURLToPath(new URL('../deploy/crds/pt_v1alpha1_ptemplate_cr.yml', import.meta.url));

test('the CRD serves pt.example.com/v1alpha1 Ptemplate with a status subresource and the spec fields', () => {
  const crd = parse(ptemplateCrdYaml());
  assert.equal(crd.metadata.name, 'ptemplates.pt.example.com');
  assert.equal(crd.spec.scope, 'Namespaced');
  assert.equal(crd.spec.names.kind, 'Ptemplate');
  const [version] = crd.spec.versions;
  assert.equal(version.name, 'v1alpha1');
  assert.deepEqual(version.subresources, { status: {} });
  const spec = version.schema.openAPIV3Schema.properties.spec;
  assert.deepEqual(Object.keys(spec.properties).sort(), ['consumerimage', 'defaultmsg', 'devicePluginImage', 'imageRepoSecret', 'maxdev', 'moduleImage', 'requiredDevices', 'selector']);
  assert.equal(spec.properties.maxdev.type, 'integer');
  assert.equal(spec.properties.requiredDevices.type, 'integer');
  assert.deepEqual(spec.properties.selector.additionalProperties, { type: 'string' });
  assert.deepEqual(spec.properties.imageRepoSecret.required, ['name']);
  assert.deepEqual(spec['x-kubernetes-validations'], [{ rule: 'self.requiredDevices <= self.maxdev', message: 'requiredDevices cannot exceed maxdev (the devices a node offers)' }]);
  const status = version.schema.openAPIV3Schema.properties.status;
  assert.deepEqual(status.properties.consumers, { type: 'array', description: 'Names of the consumer pods, sorted.', items: { type: 'string' } });
  assert.equal(status.properties.conditions['x-kubernetes-list-type'], 'map');
  assert.equal(JSON.stringify(version.schema).includes('x-kubernetes-preserve-unknown-fields'), false);
});

test('the example CR is a valid spec once the API server has filled in the defaults', () => {
  const example = parse(readFileSync(exampleFile, 'utf8'));
  assert.equal(example.apiVersion, 'pt.example.com/v1alpha1');
  const defaulted = { moduleImage: 'quay.io/x/pt:${KERNEL_FULL_VERSION}', devicePluginImage: 'quay.io/x/plugin:1', ...example.spec };
  assert.equal(isValidPtemplateSpec(defaulted), true);
});

test('the operator-side check mirrors the schema and the CEL rule', () => {
  const valid = { maxdev: 5, defaultmsg: 'hi', consumerimage: 'c:1', requiredDevices: 2, selector: {}, moduleImage: 'm:1', devicePluginImage: 'p:1' };
  assert.equal(isValidPtemplateSpec(valid), true);
  assert.equal(isValidPtemplateSpec({ ...valid, requiredDevices: 6 }), false, 'more devices than maxdev');
  assert.equal(isValidPtemplateSpec({ ...valid, maxdev: 0, requiredDevices: 0 }), false, 'maxdev below 1');
  assert.equal(isValidPtemplateSpec({ ...valid, requiredDevices: -1 }), false);
  assert.equal(isValidPtemplateSpec({ ...valid, defaultmsg: 'two words' }), false, 'whitespace cannot pass through modprobe');
  assert.equal(isValidPtemplateSpec({ ...valid, selector: { a: 1 } }), false, 'selector values are strings');
  const { consumerimage: _missing, ...noImage } = valid;
  assert.equal(isValidPtemplateSpec(noImage), false);
});

test('the CRD stores the runtime\'s Degraded condition (status.conditions with every condition field, nothing else required)', () => {
  assert.equal(degradedConditionProblem(ptemplateCrd()), undefined);
});
