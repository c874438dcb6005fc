/**
 * The files under examples/ against the API: every object is an Armada kind whose spec the
 * operator accepts (the schema the CRDs are generated from), the local sources point at the test
 * chart the way docs/armada.md says (relative to the operator's working directory,
 * operators/armada), and each example has the shape the README describes.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import {
  ARMADA_API_VERSION,
  ChartSpecSchema,
  GroupSpecSchema,
  isValidChartSpec,
  isValidGroupSpec,
  isValidManifestSpec,
  ManifestSpecSchema,
  specError,
  type ChartSpec,
  type GroupSpec,
  type ManifestSpec,
} from '../src/api/armada.ts';

const operatorDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const examplesDir = path.join(operatorDir, 'examples');

interface ExampleObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: unknown;
}

/** Every object of every YAML file of one example folder, by kind and name. */
function objectsOf(example: string): ExampleObject[] {
  const dir = path.join(examplesDir, example);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseAllDocuments(readFileSync(path.join(dir, f), 'utf8')).map((d) => d.toJSON() as ExampleObject | null))
    .filter((o): o is ExampleObject => o !== null);
}

const byKind = (objects: ExampleObject[], kind: string) => objects.filter((o) => o.kind === kind);
const examples = readdirSync(examplesDir).filter((f) => statSync(path.join(examplesDir, f)).isDirectory()).sort();

describe('examples/', () => {
  it('has the seed examples', () => {
    assert.deepEqual(examples, ['argo', 'armada', 'sequenced', 'stepbystep']);
  });

  for (const example of examples) {
    it(`${example}: every object is valid for the operator, its charts use the test chart`, () => {
      const objects = objectsOf(example);
      assert.ok(objects.length > 0);
      for (const o of objects) {
        assert.equal(o.apiVersion, ARMADA_API_VERSION, `${o.kind}/${o.metadata.name}`);
        assert.equal(o.metadata.namespace, undefined, `${o.kind}/${o.metadata.name}: no namespace, the objects go where kubectl puts them`);
        if (o.kind === 'ArmadaChart') {
          assert.ok(isValidChartSpec(o.spec), `${o.metadata.name}: ${specError(ChartSpecSchema, o.spec)}`);
          const spec = o.spec as ChartSpec;
          assert.equal(spec.release, o.metadata.name);
          assert.equal(spec.namespace, undefined, `${o.metadata.name}: the release goes to the chart's namespace`);
          assert.deepEqual(spec.source, { type: 'local', location: 'helm-charts/testchart' });
          assert.ok(existsSync(path.join(operatorDir, spec.source.location, 'Chart.yaml')), 'the location resolves from operators/armada');
        } else if (o.kind === 'ArmadaChartGroup') {
          assert.ok(isValidGroupSpec(o.spec), `${o.metadata.name}: ${specError(GroupSpecSchema, o.spec)}`);
        } else if (o.kind === 'ArmadaManifest') {
          assert.ok(isValidManifestSpec(o.spec), `${o.metadata.name}: ${specError(ManifestSpecSchema, o.spec)}`);
        } else {
          assert.fail(`${example}: unexpected kind ${o.kind}`);
        }
      }
    });
  }

  it('armada and stepbystep: the same enabled objects, in one file and one file each', () => {
    const armada = objectsOf('armada');
    assert.deepEqual(objectsOf('stepbystep').sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)), armada.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)));
    assert.equal(readdirSync(path.join(examplesDir, 'stepbystep')).length, armada.length, 'one file per object');
    assert.deepEqual(byKind(armada, 'ArmadaChart').map((c) => [c.metadata.name, (c.spec as ChartSpec).target_state]), [['blog-1', 'deployed'], ['blog-2', 'deployed']]);
    const [group] = byKind(armada, 'ArmadaChartGroup');
    assert.deepEqual({ ...(group!.spec as GroupSpec) }, { description: 'Deploys Simple Service', sequenced: false, chart_group: ['blog-1', 'blog-2'], target_state: 'deployed' });
    const [manifest] = byKind(armada, 'ArmadaManifest');
    assert.equal(manifest!.metadata.name, 'simple-armada');
    assert.deepEqual((manifest!.spec as ManifestSpec).chart_groups, ['blog-group']);
  });

  it('sequenced and argo: charts created disabled; sequenced enables them through a sequenced group', () => {
    for (const example of ['sequenced', 'argo']) {
      assert.deepEqual(byKind(objectsOf(example), 'ArmadaChart').map((c) => [c.metadata.name, (c.spec as ChartSpec).target_state]), [['blog-1', 'uninitialized'], ['blog-2', 'uninitialized']], example);
    }
    const sequenced = objectsOf('sequenced');
    assert.equal((byKind(sequenced, 'ArmadaChartGroup')[0]!.spec as GroupSpec).sequenced, true);
    assert.deepEqual((byKind(sequenced, 'ArmadaManifest')[0]!.spec as ManifestSpec).chart_groups, ['blog-group']);
    assert.deepEqual(byKind(objectsOf('argo'), 'ArmadaChartGroup'), [], 'argo: enablement comes from outside (kubectl patch)');
  });
});
