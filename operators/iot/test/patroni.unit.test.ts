/**
 * What three database replicas get and one does not: Patroni's access to the API server in the
 * instance namespace alone, its ports, probes and environment, database-client leading to the
 * primary, and the flows between database pods and to the API server — while one replica renders
 * exactly what it did before three were possible.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Role, V1RoleBinding, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import {
  desiredChildren,
  desiredDatabaseStatefulSet,
  DATABASE_RUNTIME,
  desiredPodTemplate,
  type DesiredChildren,
  type NetworkPolicy,
} from '../src/resources/index.ts';
import { TEST_CONFIG, TEST_CREDENTIALS, testGatewayTls, testInstance } from './fixtures.ts';

const API_SERVER = [{ address: '10.244.0.1', port: 6443 }];

function children(replicas: number): DesiredChildren {
  return desiredChildren(testInstance({ database: { replicas } }, { ...TEST_CONFIG, apiServer: API_SERVER }), {
    imagePullSecret: { metadata: { name: 'image-pull-secret' }, type: 'kubernetes.io/dockerconfigjson', data: {} },
    credentials: TEST_CREDENTIALS,
    keptEmptyDirs: new Set(),
    gatewayTls: testGatewayTls(),
  });
}

function find<T>(all: DesiredChildren, kind: string, name: string): T | undefined {
  return all.children.find((c) => c.object.kind === kind && c.object.metadata.name === name)?.object as T | undefined;
}

describe('database replicas', () => {
  it('one replica: no ServiceAccount, Role, API server policy or database flows, and the pod template of one database as before', () => {
    const all = children(1);
    for (const kind of ['ServiceAccount', 'Role', 'RoleBinding']) assert.equal(find(all, kind, 'database'), undefined, kind);
    assert.equal(find(all, 'NetworkPolicy', 'database-api-server'), undefined);
    const instance = testInstance({ database: { replicas: 1 } });
    assert.deepEqual(desiredDatabaseStatefulSet(instance).spec?.template, desiredPodTemplate(instance, 'database', DATABASE_RUNTIME, {}, { dataEmptyDir: false }));
    assert.equal(desiredDatabaseStatefulSet(instance).spec?.updateStrategy, undefined, "its StatefulSet's own RollingUpdate replaces the pod");
    const peers = find<NetworkPolicy>(all, 'NetworkPolicy', 'database-peers')!;
    assert.equal(peers.spec.egress, undefined, 'the database opens no connection');
    assert.deepEqual(find<V1Service>(all, 'Service', 'database-client')?.spec?.selector, { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': 'database' });
  });

  it('three replicas: Patroni may keep its ConfigMaps and label and annotate the pods of the instance namespace, nothing else', () => {
    const all = children(3);
    const role = find<V1Role>(all, 'Role', 'database')!;
    assert.equal(role.metadata?.namespace, 'devawsk8s-tenant-a');
    assert.deepEqual(role.rules, [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'update', 'patch'] },
    ]);
    const binding = find<V1RoleBinding>(all, 'RoleBinding', 'database')!;
    assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'database' });
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'database', namespace: 'devawsk8s-tenant-a' }]);
    assert.ok(find(all, 'ServiceAccount', 'database'));
  });

  it('three replicas: the pods run Patroni as ServiceAccount database, probed on its REST API, told their identity, the member labels and the replication password', () => {
    const statefulSet = find<V1StatefulSet>(children(3), 'StatefulSet', 'database')!;
    assert.deepEqual(statefulSet.spec?.updateStrategy, { type: 'OnDelete' }, 'the operator replaces the pods, the primary last (database-roll.ts)');
    const pod = statefulSet.spec!.template.spec!;
    assert.equal(pod.serviceAccountName, 'database');
    assert.equal(pod.automountServiceAccountToken, true);
    const [container] = pod.containers;
    assert.deepEqual(container!.ports?.map((p) => p.containerPort), [5432, 8008]);
    assert.deepEqual([container!.readinessProbe?.httpGet?.path, container!.livenessProbe?.httpGet?.path], ['/readiness', '/liveness']);
    const env = Object.fromEntries((container!.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom?.fieldRef?.fieldPath ?? e.valueFrom?.secretKeyRef?.key]));
    assert.equal(env['IOT_DATABASE_REPLICAS'], '3');
    assert.equal(env['IOT_DATABASE_REPLICATION_PASSWORD'], 'database-replication-password');
    assert.deepEqual(JSON.parse(env['IOT_DATABASE_MEMBER_LABELS']!), { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': 'database' });
    assert.deepEqual([env['POD_NAME'], env['POD_NAMESPACE'], env['POD_IP']], ['metadata.name', 'metadata.namespace', 'status.podIP']);
    const others = children(3).children.filter((c) => c.object.kind === 'Deployment' || (c.object.kind === 'StatefulSet' && c.object.metadata.name !== 'database'));
    for (const other of others) assert.equal((other.object as V1StatefulSet).spec?.template.spec?.automountServiceAccountToken, false, `${other.object.metadata.name} mounts no token`);
  });

  it('three replicas: database-client leads to the primary alone; database pods reach each other on 5432 and 8008, and the API server', () => {
    const all = children(3);
    assert.equal(find<V1Service>(all, 'Service', 'database-client')?.spec?.selector?.['role'], 'master');
    const peers = find<NetworkPolicy>(all, 'NetworkPolicy', 'database-peers')!;
    const database = [{ podSelector: { matchLabels: { 'cp.iotservices.io/instance': 'tenant-a', 'app.kubernetes.io/component': 'database' } } }];
    assert.deepEqual(peers.spec.egress, [
      { to: database, ports: [{ protocol: 'TCP', port: 5432 }] },
      { to: database, ports: [{ protocol: 'TCP', port: 8008 }] },
    ]);
    assert.ok(peers.spec.ingress?.some((rule) => JSON.stringify(rule.from) === JSON.stringify(database) && rule.ports?.[0]?.port === 8008), 'Patroni from the other members');
    const apiServer = find<NetworkPolicy>(all, 'NetworkPolicy', 'database-api-server')!;
    assert.deepEqual(apiServer.spec.egress, [{ to: [{ ipBlock: { cidr: '10.244.0.1/32' } }], ports: [{ protocol: 'TCP', port: 6443 }] }]);
  });
});
