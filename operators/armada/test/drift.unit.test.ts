/**
 * Drift of a release's resources: a deleted or hand-edited object of a watched kind is found,
 * server defaults and objects of other kinds are not drift; Helm's release Secrets read back
 * into revisions; Helm's error line is what a user sees.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { describeDrift, findDrift, formatPath, manifestObjects, ownedByOtherController, parseFormattedPath, pointerPath, quantityValue, releaseOf } from '../src/chart/drift.ts';
import { helmErrorMessage } from '../src/helm/helm.ts';
import { lastGoodRevision, releaseHistory, withoutPayload } from '../src/helm/release-state.ts';

const manifest = `---
# Source: testchart/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: blog-2-testchart
  labels:
    app.kubernetes.io/managed-by: Helm
spec:
  type: ClusterIP
  ports:
    - port: 80
      targetPort: http
---
# Source: testchart/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: blog-2-testchart
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: testchart
          image: "nginx:1.27.3"
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: not-watched
`;

test('manifest objects get the release namespace', () => {
  const objects = manifestObjects(manifest, 'ns1');
  assert.deepEqual(objects.map((o) => `${o.kind}/${o.metadata.name}/${o.metadata.namespace}`), ['Service/blog-2-testchart/ns1', 'Deployment/blog-2-testchart/ns1', 'CronJob/not-watched/ns1']);
});

test('live objects carrying server defaults are not drift; deleted and edited ones are', () => {
  const objects = manifestObjects(manifest, 'ns1');
  const service = { ...objects[0]!, metadata: { ...objects[0]!.metadata, uid: 'u1' }, spec: { type: 'ClusterIP', clusterIP: '10.0.0.1', ports: [{ port: 80, targetPort: 'http', protocol: 'TCP' }] }, status: {} };
  const deployment = { ...objects[1]!, spec: { replicas: 1, template: { spec: { containers: [{ name: 'testchart', image: 'nginx:1.27.3', imagePullPolicy: 'IfNotPresent' }] } }, strategy: {} } };
  const live = new Map<string, KubeObject>([[`Service/blog-2-testchart`, service], [`Deployment/blog-2-testchart`, deployment]]);
  const lookup = (type: { kind: string }, name: string) => live.get(`${type.kind}/${name}`);
  assert.deepEqual(findDrift(objects, lookup), []);

  live.delete('Deployment/blog-2-testchart');
  live.set('Service/blog-2-testchart', { ...service, spec: { ...service.spec, ports: [{ port: 8080, targetPort: 'http', protocol: 'TCP' }] } });
  const drifts = findDrift(objects, lookup);
  assert.deepEqual(drifts, [
    { object: 'service/blog-2-testchart', change: 'edited', fields: ['.spec.ports[0].port'] },
    { object: 'deployment/blog-2-testchart', change: 'deleted' },
  ]);
  assert.equal(describeDrift(drifts), 'service/blog-2-testchart was edited (.spec.ports[0].port); deployment/blog-2-testchart was deleted');
});

test('a resource names its release through Helm\'s annotations', () => {
  const obj: KubeObject = { metadata: { name: 'x', namespace: 'a', annotations: { 'meta.helm.sh/release-name': 'blog-2', 'meta.helm.sh/release-namespace': 'b' } } };
  assert.deepEqual(releaseOf(obj), { release: 'blog-2', namespace: 'b' });
  assert.equal(releaseOf({ metadata: { name: 'y' } }), undefined);
});

test('Helm\'s storage Secrets read back into a release history; payloads are dropped', () => {
  const secret = (name: string, version: number, status: string): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'helm.sh/release.v1',
    metadata: { name: `sh.helm.release.v1.${name}.v${version}`, namespace: 'ns', labels: { owner: 'helm', name, version: String(version), status } },
    data: { release: 'H4sI...' },
  });
  const secrets = [secret('blog-1', 2, 'failed'), secret('blog-1', 1, 'deployed'), secret('blog-2', 1, 'deployed'), { metadata: { name: 'other', labels: { owner: 'helm' } } }];
  const history = releaseHistory(secrets, 'blog-1');
  assert.deepEqual(history.map((r) => [r.revision, r.status]), [[1, 'deployed'], [2, 'failed']]);
  assert.equal(lastGoodRevision(history, 2)?.revision, 1);
  assert.equal(lastGoodRevision(history, 1), undefined);
  assert.equal('data' in withoutPayload(secrets[0]!), false);
  assert.equal(Kinds.Secret.kind, 'Secret');
});

test('Helm\'s message is its last Error: line', () => {
  assert.equal(helmErrorMessage('some warning\nError: UPGRADE FAILED: failed to create resource: Service "x" is invalid\n'), 'UPGRADE FAILED: failed to create resource: Service "x" is invalid');
  assert.equal(helmErrorMessage('plain failure\n'), 'plain failure');
});

test('wait.resources: readiness per kind, min_ready, wait.labels merged into each check', async () => {
  const { isReady, notReady } = await import('../src/chart/readiness.ts');
  const deployment = (ready: number, generation = 1, observed = 1): KubeObject => ({ metadata: { name: 'd', generation }, spec: { replicas: 2 }, status: { observedGeneration: observed, updatedReplicas: 2, readyReplicas: ready } });
  assert.equal(isReady('deployment', deployment(2)), true);
  assert.equal(isReady('deployment', deployment(1)), false);
  assert.equal(isReady('deployment', deployment(2, 2, 1)), false, 'a generation not yet observed is not ready');
  assert.equal(isReady('pod', { metadata: { name: 'p' }, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } }), true);
  assert.equal(isReady('job', { metadata: { name: 'j' }, status: { succeeded: 1 } }), true);

  const selectors: string[] = [];
  const list = (_check: unknown, selector: string) => {
    selectors.push(selector);
    return [deployment(2), deployment(0)];
  };
  assert.deepEqual(notReady([{ type: 'deployment', labels: { app: 'x' } }], { release: 'r' }, list), ['1 of 2 deployment(s) ready (labels release=r,app=x)']);
  assert.deepEqual(notReady([{ type: 'Deployment', min_ready: 1 }], {}, list), []);
  assert.deepEqual(notReady([{ type: 'cronjob' }], {}, list), ['wait.resources type "cronjob" is unknown: use one of deployment, statefulset, daemonset, pod, job']);
  assert.deepEqual(notReady([{ type: 'pod' }], {}, () => []), ['0 of 1 pod(s) ready']);
  assert.equal(selectors[0], 'release=r,app=x');
});

test('no false drift: quantities written another way, ignored paths; every differing field is named', () => {
  const desired: KubeObject = { kind: 'Deployment', metadata: { name: 'd', namespace: 'ns1', labels: { a: '1' } }, spec: { replicas: 2, template: { spec: { containers: [{ name: 'c', resources: { limits: { cpu: '0.5', memory: '1Gi' }, requests: { cpu: 1 } } }] } } } };
  const live: KubeObject = { ...desired, spec: { replicas: 2, template: { spec: { containers: [{ name: 'c', resources: { limits: { cpu: '500m', memory: '1073741824' }, requests: { cpu: '1' } } }] } } } };
  assert.deepEqual(findDrift([desired], () => live), []);
  const edited: KubeObject = { ...live, metadata: { ...live.metadata, labels: { a: '2' } }, spec: { ...(live.spec as object), replicas: 5 } };
  assert.deepEqual(findDrift([desired], () => edited), [{ object: 'deployment/d', change: 'edited', fields: ['.metadata.labels.a', '.spec.replicas'] }]);
  assert.deepEqual(findDrift([desired], () => edited, [{ paths: ['/spec/replicas'], target: { kind: 'Deployment' } }]), [{ object: 'deployment/d', change: 'edited', fields: ['.metadata.labels.a'] }]);
  assert.deepEqual(findDrift([desired], () => edited, [{ paths: ['/spec/replicas', '/metadata/labels'], target: { name: 'other' } }]).length, 1, 'a rule for another object does not apply');
  assert.equal(quantityValue('250m'), 0.25);
  assert.equal(quantityValue('2Ki'), 2048);
  assert.equal(quantityValue('1e3'), 1000);
  assert.equal(quantityValue('nginx'), undefined);
  assert.deepEqual(pointerPath('/spec/template/spec/containers/0/image'), ['spec', 'template', 'spec', 'containers', 0, 'image']);
  assert.deepEqual(parseFormattedPath(formatPath(['spec', 'ports', 0, 'port'])), ['spec', 'ports', 0, 'port']);
});

test("fields another controller owns (an autoscaler through the scale subresource) are told apart from Helm's and a person's", () => {
  const live: KubeObject = {
    metadata: {
      name: 'd',
      managedFields: [
        { manager: 'helm', operation: 'Update', fieldsV1: { 'f:spec': { 'f:replicas': {}, 'f:template': {} } } },
        { manager: 'kube-controller-manager', operation: 'Update', subresource: 'scale', fieldsV1: { 'f:spec': { 'f:replicas': {} } } },
        { manager: 'kubectl-edit', operation: 'Update', fieldsV1: { 'f:metadata': { 'f:labels': { 'f:a': {} } } } },
      ],
    },
  };
  const owned = ownedByOtherController(live);
  assert.equal(owned(['spec', 'replicas']), true);
  assert.equal(owned(['metadata', 'labels', 'a']), false, 'a hand edit is drift');
  assert.equal(owned(['spec', 'template', 'spec']), false);
});
