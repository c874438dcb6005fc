/**
 * The committed OLM bundles (0.0.1, 0.0.2) and catalog of the memcached operator are the files
 * `operator-ts generate bundle` makes from today's deploy/ (their contents: `npm run generate -- --check`), their ClusterServiceVersions say
 * what deploy/ says (RBAC, Deployment, CRD descriptions, example), 0.0.2 upgrades 0.0.1;
 * a ClusterRole becomes clusterPermissions; manifests that cannot make a sound CSV are refused
 * with a message naming what to fix.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { catalogPath, expectedOperatorFiles, loadOperatorSources, renderBundle } from '../../../packages/sdk/src/generate/bundle.ts';
import { clusterServiceVersion, type JsonObject, type Manifest } from '../../../packages/sdk/src/generate/csv.ts';

const operatorDir = fileURLToPath(new URL('..', import.meta.url));
const regenerate = 'npx operator-ts generate bundle --version 0.0.1 && npx operator-ts generate bundle --version 0.0.2 --replaces 0.0.1';

function filesUnder(rel: string): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(path.join(operatorDir, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  return existsSync(path.join(operatorDir, rel)) ? walk(rel).sort() : [];
}

function committedCsv(version: string): any {
  return parse(readFileSync(path.join(operatorDir, 'bundle', version, 'manifests', 'memcachedoperator.clusterserviceversion.yaml'), 'utf8'));
}

function deployManifest(file: string): any {
  return parse(readFileSync(path.join(operatorDir, 'deploy', file), 'utf8'));
}

describe('committed bundles', () => {
  // npm run generate -- --check (scripts/test/generate.unit.test.ts) holds each file's content to what deploy/ makes.
  test(`bundle/ and catalog/ hold exactly the files deploy/ makes today (regenerate: ${regenerate})`, () => {
    assert.deepEqual([...filesUnder('bundle'), ...filesUnder('catalog')].sort(), [...expectedOperatorFiles(operatorDir).keys()].sort());
  });

  test('there are bundles 0.0.1 and 0.0.2; 0.0.2 replaces 0.0.1 and each runs its own image', () => {
    assert.deepEqual(readdirSync(path.join(operatorDir, 'bundle')).sort(), ['0.0.1', '0.0.2']);
    const [v1, v2] = [committedCsv('0.0.1'), committedCsv('0.0.2')];
    assert.equal(v1.metadata.name, 'memcachedoperator.v0.0.1');
    assert.equal(v1.spec.replaces, undefined);
    assert.equal(v2.metadata.name, 'memcachedoperator.v0.0.2');
    assert.equal(v2.spec.replaces, 'memcachedoperator.v0.0.1');
    assert.equal(v1.spec.install.spec.deployments[0].spec.template.spec.containers[0].image, 'registry.example.com/memcached-operator:v0.0.1');
    assert.equal(v2.spec.install.spec.deployments[0].spec.template.spec.containers[0].image, 'registry.example.com/memcached-operator:v0.0.2');
  });

  test('the catalog has the package, the channel alpha with the upgrade edge, and both bundles with their objects', () => {
    const docs = parseAllDocuments(readFileSync(path.join(operatorDir, catalogPath('memcachedoperator')), 'utf8')).map((d) => d.toJSON());
    const pkg = docs.find((d) => d.schema === 'olm.package');
    assert.deepEqual({ name: pkg.name, defaultChannel: pkg.defaultChannel, mediatype: pkg.icon.mediatype }, { name: 'memcachedoperator', defaultChannel: 'alpha', mediatype: 'image/svg+xml' });
    const channel = docs.find((d) => d.schema === 'olm.channel');
    assert.deepEqual(channel.entries, [{ name: 'memcachedoperator.v0.0.1' }, { name: 'memcachedoperator.v0.0.2', replaces: 'memcachedoperator.v0.0.1' }]);
    const bundles = docs.filter((d) => d.schema === 'olm.bundle');
    assert.deepEqual(
      bundles.map((b) => [b.name, b.image]),
      [
        ['memcachedoperator.v0.0.1', 'registry.example.com/memcached-operator-bundle:v0.0.1'],
        ['memcachedoperator.v0.0.2', 'registry.example.com/memcached-operator-bundle:v0.0.2'],
      ],
    );
    const objects = bundles[1].properties.filter((p: any) => p.type === 'olm.bundle.object').map((p: any) => JSON.parse(Buffer.from(p.value.data, 'base64').toString()));
    assert.deepEqual(objects.map((o: any) => o.metadata.name), ['memcachedoperator.v0.0.2', 'memcacheds.cache.example.com']);
    assert.deepEqual(objects[0], committedCsv('0.0.2'));
    assert.deepEqual(bundles[1].properties.find((p: any) => p.type === 'olm.gvk').value, { group: 'cache.example.com', kind: 'Memcached', version: 'v1alpha1' });
  });
});

describe('the ClusterServiceVersion says what deploy/ says', () => {
  const csv = committedCsv('0.0.2');

  test('permissions are the Role bound to the operator ServiceAccount; no cluster permissions', () => {
    assert.deepEqual(csv.spec.install.spec.permissions, [{ serviceAccountName: 'memcached-operator', rules: deployManifest('role.yaml').rules }]);
    assert.equal(csv.spec.install.spec.clusterPermissions, undefined);
  });

  test('the install strategy is the operator Deployment, watching the namespaces OLM targets', () => {
    assert.equal(csv.spec.install.strategy, 'deployment');
    const [d] = csv.spec.install.spec.deployments;
    const source = deployManifest('operator.yaml');
    assert.equal(d.name, source.metadata.name);
    assert.deepEqual(d.spec.selector, source.spec.selector);
    const container = d.spec.template.spec.containers[0];
    assert.deepEqual(container.args, source.spec.template.spec.containers[0].args);
    assert.deepEqual(container.env.find((e: any) => e.name === 'WATCH_NAMESPACE').valueFrom, { fieldRef: { fieldPath: "metadata.annotations['olm.targetNamespaces']" } });
    assert.equal(d.spec.template.spec.serviceAccountName, 'memcached-operator');
  });

  test('the owned CRD carries the schema descriptions, and the example is the deploy/ one', () => {
    const crd = parse(readFileSync(path.join(operatorDir, 'deploy/crds/cache_v1alpha1_memcached_crd.yaml'), 'utf8'));
    const schema = crd.spec.versions[0].schema.openAPIV3Schema;
    const [owned] = csv.spec.customresourcedefinitions.owned;
    assert.deepEqual([owned.name, owned.version, owned.kind], ['memcacheds.cache.example.com', 'v1alpha1', 'Memcached']);
    assert.equal(owned.description, schema.description);
    assert.deepEqual(owned.specDescriptors, [{ path: 'size', displayName: 'Size', description: schema.properties.spec.properties.size.description, 'x-descriptors': ['urn:alm:descriptor:com.tectonic.ui:podCount'] }]);
    assert.deepEqual(owned.statusDescriptors.map((d: any) => d.path), ['nodes']);
    const example = parse(readFileSync(path.join(operatorDir, 'deploy/crds/cache_v1alpha1_memcached_cr.yaml'), 'utf8'));
    assert.deepEqual(JSON.parse(csv.metadata.annotations['alm-examples']), [example]);
  });

  test('presentation: install modes, icon, keywords, maintainers, links, minKubeVersion', () => {
    assert.deepEqual(
      csv.spec.installModes.filter((m: any) => m.supported).map((m: any) => m.type),
      ['OwnNamespace', 'SingleNamespace'],
    );
    assert.match(Buffer.from(csv.spec.icon[0].base64data, 'base64').toString(), /^<svg /);
    assert.ok(csv.spec.keywords.includes('memcached'));
    assert.ok(csv.spec.maintainers.length > 0 && csv.spec.links.length > 0);
    assert.match(csv.spec.minKubeVersion, /^1\.\d+\.\d+$/);
    assert.equal(csv.metadata.annotations.containerImage, 'registry.example.com/memcached-operator:v0.0.2');
  });
});

describe('other manifests: cluster RBAC is carried over, unsound ones are refused', () => {
  const sources = loadOperatorSources(operatorDir);
  const base = sources.base;
  const replaced = (file: string, change: (o: any) => void): Manifest[] =>
    sources.manifests.map((m) => {
      if (!m.file.endsWith(file)) return m;
      const object = structuredClone(m.object);
      change(object);
      return { file: m.file, object };
    });
  const build = (manifests: Manifest[], more: Partial<{ base: JsonObject; version: string; replaces: string }> = {}) =>
    clusterServiceVersion({ base, manifests, version: '0.0.2', image: 'img:v0.0.2', ...more });

  test('a ClusterRole bound by a ClusterRoleBinding becomes clusterPermissions of its ServiceAccount', () => {
    const rules = [{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] }];
    const manifests: Manifest[] = [
      ...sources.manifests,
      { file: 'deploy/cluster_role.yaml', object: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'memcached-operator-namespaces' }, rules } },
      {
        file: 'deploy/cluster_role_binding.yaml',
        object: {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name: 'memcached-operator-namespaces' },
          subjects: [{ kind: 'ServiceAccount', name: 'memcached-operator', namespace: 'default' }],
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'memcached-operator-namespaces' },
        },
      },
    ];
    const install = (build(manifests).spec as any).install.spec;
    assert.deepEqual(install.clusterPermissions, [{ serviceAccountName: 'memcached-operator', rules }]);
    assert.equal(install.permissions[0].serviceAccountName, 'memcached-operator');
  });

  test('a Deployment running as a ServiceAccount that deploy/ does not have', () => {
    const manifests = replaced('operator.yaml', (d) => (d.spec.template.spec.serviceAccountName = 'someone-else'));
    assert.throws(() => build(manifests), /deploy\/operator\.yaml: Deployment memcached-operator runs as ServiceAccount someone-else, which is not among the manifests/);
  });

  test('a RoleBinding to a Role that deploy/ does not have', () => {
    const manifests = replaced('role_binding.yaml', (b) => (b.roleRef.name = 'missing'));
    assert.throws(() => build(manifests), /deploy\/role_binding\.yaml: RoleBinding memcached-operator refers to Role missing, which is not among the manifests/);
  });

  test('a Deployment with no REPLACE_IMAGE container', () => {
    const manifests = replaced('operator.yaml', (d) => (d.spec.template.spec.containers[0].image = 'fixed:1'));
    assert.throws(() => build(manifests), /no container of Deployment memcached-operator has image REPLACE_IMAGE/);
  });

  test('a descriptor for a field the schema does not have', () => {
    const broken = structuredClone(base) as any;
    broken.spec.customresourcedefinitions.owned[0].specDescriptors[0].path = 'replicas';
    assert.throws(() => build(sources.manifests, { base: broken }), /the CSV base describes path "replicas", which the CRD's schema does not have \(it has: size\)/);
  });

  test('a manifest kind that has no place in a CSV', () => {
    const manifests = [...sources.manifests, { file: 'deploy/namespace.yaml', object: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } } }];
    assert.throws(() => build(manifests), /deploy\/namespace\.yaml: a Namespace has no place in a ClusterServiceVersion/);
  });

  test('versions that are not semver, and a replaces that is not older', () => {
    assert.throws(() => build(sources.manifests, { version: 'v2' }), /version "v2" is not a semantic version/);
    assert.throws(() => build(sources.manifests, { replaces: '0.0.2' }), /version 0\.0\.2 cannot replace 0\.0\.2: an upgrade goes to a higher version/);
    assert.throws(() => renderBundle(sources, { version: '0.0.3', channel: 'Not A Channel' }), /channel "Not A Channel" is not a valid channel name/);
  });
});
