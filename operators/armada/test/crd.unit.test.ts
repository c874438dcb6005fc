/**
 * The Armada CRDs' schemas say what the seed's YAML needs (`npm run generate -- --check`,
 * scripts/test/generate.unit.test.ts, holds the committed CRDs to them): the three kinds with their short names, snake_case fields, free-form
 * values, a status subresource and the State / Target State / Satisfied / Age columns.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import { isValidChartSpec, isValidGroupSpec, isValidManifestSpec } from '../src/api/armada.ts';
import { degradedConditionProblem } from '@iot-operator/runtime/testing';
import { armadaCrds, crdYaml } from '../src/api/crd.ts';

test('the CRDs serve armada.airshipit.org/v1alpha1 act, acg and amf, namespaced, with status and the four columns', () => {
  const byKind = Object.fromEntries(armadaCrds().map((crd) => [crd.spec.names.kind, parse(crdYaml(crd))]));
  assert.deepEqual(Object.keys(byKind).sort(), ['ArmadaChart', 'ArmadaChartGroup', 'ArmadaManifest']);
  assert.deepEqual(
    Object.values(byKind).map((crd) => [crd.metadata.name, crd.spec.names.shortNames[0]]).sort(),
    [['armadachartgroups.armada.airshipit.org', 'acg'], ['armadacharts.armada.airshipit.org', 'act'], ['armadamanifests.armada.airshipit.org', 'amf']],
  );
  for (const crd of Object.values(byKind)) {
    assert.equal(crd.spec.scope, 'Namespaced');
    const [version] = crd.spec.versions;
    assert.equal(version.name, 'v1alpha1');
    assert.deepEqual(version.subresources, { status: {} });
    assert.deepEqual(version.additionalPrinterColumns.map((c: { name: string; jsonPath: string }) => [c.name, c.jsonPath]), [
      ['State', '.status.actual_state'],
      ['Target State', '.spec.target_state'],
      ['Satisfied', '.status.satisfied'],
      ['Age', '.metadata.creationTimestamp'],
    ]);
  }
});

test('only spec.values preserves unknown fields; everything else is pruned', () => {
  const chart = armadaCrds().find((crd) => crd.spec.names.kind === 'ArmadaChart')!;
  const spec = chart.spec.versions[0]!.schema.openAPIV3Schema.properties as Record<string, any>;
  assert.equal(spec.spec.properties.values['x-kubernetes-preserve-unknown-fields'], true);
  assert.deepEqual(spec.spec.required, ['chart_name', 'release', 'source', 'target_state']);
  const text = JSON.stringify(armadaCrds());
  assert.equal(text.split('x-kubernetes-preserve-unknown-fields').length - 1, 1);
});

test('the seed\'s objects are valid; a missing required field is not', () => {
  const chart = {
    chart_name: 'blog-1',
    release: 'blog-1',
    namespace: 'default',
    upgrade: { no_hooks: false },
    values: { anything: { nested: [1, 'two'] } },
    source: { type: 'local', location: '/opt/armada/helm-charts/testchart', subpath: '.', reference: 'master' },
    dependencies: [],
    target_state: 'uninitialized',
  };
  assert.equal(isValidChartSpec(chart), true);
  assert.equal(isValidChartSpec({ ...chart, target_state: 'sometimes' }), false);
  assert.equal(isValidChartSpec({ ...chart, source: undefined }), false);
  assert.equal(isValidGroupSpec({ chart_group: ['blog-1', 'blog-2'], description: 'Deploys Simple Service', sequenced: false }), true);
  assert.equal(isValidManifestSpec({ chart_groups: ['blog-group'], release_prefix: 'armada' }), true);
  assert.equal(isValidManifestSpec({ chart_groups: ['blog-group'] }), false);
});

test('every CRD stores the runtime\'s Degraded condition (status.conditions with every condition field, nothing else required)', () => {
  for (const crd of armadaCrds()) assert.equal(degradedConditionProblem(crd), undefined);
});
