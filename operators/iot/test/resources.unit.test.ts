import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Container, V1Deployment, V1PodDisruptionBudget, V1PodSpec, V1Secret, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import { parse } from 'yaml';
import {
  childKey,
  componentImage,
  configChecksum,
  CONFIG_CHECKSUM_ANNOTATION,
  desiredChildren,
  desiredConfigMap,
  desiredGatewayDeployment,
  desiredGatewayService,
  desiredImagePullSecret,
  desiredCredentialsSecret,
  credentialsPatch,
  credentialsRotation,
  CREDENTIAL_KEYS,
  desiredBrokerStatefulSet,
  desiredDatabaseStatefulSet,
  hasEmptyDirData,
  type KeptEmptyDirs,
  desiredBrokerService,
  generateCredentials,
  instanceIdOf,
  instanceNamespaceName,
  landscapeSelector,
  namespaceOwnership,
  resolveInstance,
  type DesiredChildren,
  type IoTCredentials,
  writeStages,
} from '../src/resources/index.ts';
import { iotService, PERMISSIVE_CONFIG, TEST_CONFIG, TEST_CREDENTIALS, testGatewayTls, testInstance } from './fixtures.ts';
import type { OperatorConfig } from '../src/resources/instance.ts';

const PULL_SECRET: V1Secret = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'image-pull-secret', namespace: 'devawsk8s', labels: { team: 'platform' }, resourceVersion: '42' },
  type: 'kubernetes.io/dockerconfigjson',
  data: { '.dockerconfigjson': 'eyJhdXRocyI6e319' },
};
const CREDENTIALS: IoTCredentials = TEST_CREDENTIALS;

function children(spec: Record<string, unknown> = {}, config: OperatorConfig = TEST_CONFIG): DesiredChildren {
  return desiredChildren(testInstance(spec, config), { imagePullSecret: PULL_SECRET, credentials: CREDENTIALS, keptEmptyDirs: new Set(), gatewayTls: testGatewayTls() });
}

function find<T>(all: DesiredChildren, kind: string, name: string): T {
  const child = all.children.find((c) => c.object.kind === kind && c.object.metadata.name === name);
  assert.ok(child, `${kind} ${name} is desired`);
  return child.object as T;
}

function podSpecs(all: DesiredChildren): Array<[string, V1PodSpec]> {
  return all.children
    .filter((c) => c.object.kind === 'Deployment' || c.object.kind === 'StatefulSet')
    .map((c) => {
      const spec = (c.object as V1Deployment | V1StatefulSet).spec?.template.spec;
      assert.ok(spec);
      return [c.object.metadata.name, spec];
    });
}

function onlyContainer(spec: V1PodSpec): V1Container {
  assert.equal(spec.containers.length, 1);
  const [container] = spec.containers;
  assert.ok(container);
  return container;
}

describe('instance namespace', () => {
  it('is <operatorName>-<id>', () => {
    assert.deepEqual(instanceNamespaceName('devawsk8s', 'tenant-a'), { ok: true, name: 'devawsk8s-tenant-a' });
    assert.equal(testInstance().namespace, 'devawsk8s-tenant-a');
  });

  it('longer than 63 characters is a typed error that names the limit', () => {
    const id = 'x'.repeat(54); // 9 + 1 + 54 = 64
    const result = instanceNamespaceName('devawsk8s', id);
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.equal(result.error.kind, 'TooLong');
    if (result.error.kind !== 'TooLong') return;
    assert.equal(result.error.limit, 63);
    assert.equal(result.error.length, 64);
    assert.match(result.error.message, /at most 63/);
    assert.match(result.error.message, /at most 53 characters/);
    assert.ok(instanceNamespaceName('devawsk8s', 'x'.repeat(53)).ok, '63 characters are fine');
  });

  it('with a dot (valid IoTService name, invalid namespace) is rejected', () => {
    const result = instanceNamespaceName('devawsk8s', 'tenant.a');
    assert.equal(result.ok, false);
    if (!result.ok) assert.equal(result.error.kind, 'NotDns1123Label');
  });

  it('makes the instance fail to resolve with reason NamespaceNameInvalid', () => {
    const resolved = resolveInstance(iotService('y'.repeat(60), { version: '1' }), TEST_CONFIG);
    assert.equal(resolved.ok, false);
    if (!resolved.ok) {
      assert.equal(resolved.failure.reason, 'NamespaceNameInvalid');
      assert.match(resolved.failure.message, /63/);
    }
  });

  it('an invalid spec resolves to an InvalidSpec failure naming the field', () => {
    const resolved = resolveInstance(iotService('tenant-a', { version: '1', gateway: { replicas: 99 } }), TEST_CONFIG);
    assert.equal(resolved.ok, false);
    if (!resolved.ok) {
      assert.equal(resolved.failure.reason, 'InvalidSpec');
      assert.match(resolved.failure.message, /spec\.gateway\.replicas/);
      assert.equal(resolved.namespace, 'devawsk8s-tenant-a');
    }
  });

  it('is enforced as restricted for pod security', () => {
    const ns = find<{ metadata: { labels: Record<string, string> } }>(children(), 'Namespace', 'devawsk8s-tenant-a');
    assert.equal(ns.metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted');
  });

  it('is owned only when it carries this instance’s labels and this IoTService’s UID', () => {
    const owner = { landscape: 'devawsk8s', id: 'tenant-a', ownerUid: 'uid-of-tenant-a' };
    const ours = find<{ metadata: { labels: Record<string, string>; annotations: Record<string, string> } }>(children(), 'Namespace', 'devawsk8s-tenant-a');
    assert.deepEqual(ours.metadata.annotations, { 'cp.iotservices.io/owner-uid': 'uid-of-tenant-a' });
    assert.equal(namespaceOwnership(undefined, owner), 'absent');
    assert.equal(namespaceOwnership({ metadata: ours.metadata }, owner), 'owned');
    assert.equal(namespaceOwnership({ metadata: { name: 'devawsk8s-tenant-a' } }, owner), 'foreign');
    assert.equal(namespaceOwnership({ metadata: { name: 'devawsk8s-tenant-a', labels: ours.metadata.labels } }, owner), 'foreign', 'merely labelled');
    const earlierOwner = { 'cp.iotservices.io/owner-uid': 'uid-of-a-deleted-tenant-a' };
    assert.equal(namespaceOwnership({ metadata: { name: 'devawsk8s-tenant-a', labels: ours.metadata.labels, annotations: earlierOwner } }, owner), 'foreign', 'another IoTService’s');
    const otherLandscape = { ...ours.metadata.labels, 'cp.iotservices.io/landscape': 'prod' };
    assert.equal(namespaceOwnership({ metadata: { name: 'devawsk8s-tenant-a', labels: otherLandscape, annotations: ours.metadata.annotations } }, owner), 'foreign');
  });
});

describe('desired children', () => {
  it('lists every child once, namespace first, workloads last, all in the instance namespace', () => {
    const all = children();
    const keys = all.children.map((c) => childKey(c.object));
    assert.deepEqual(keys, [
      'Namespace//devawsk8s-tenant-a',
      'NetworkPolicy/devawsk8s-tenant-a/instance-isolation',
      'NetworkPolicy/devawsk8s-tenant-a/gateway-devices',
      'NetworkPolicy/devawsk8s-tenant-a/core-applications',
      'NetworkPolicy/devawsk8s-tenant-a/instance-egress',
      'NetworkPolicy/devawsk8s-tenant-a/operator-monitoring',
      'NetworkPolicy/devawsk8s-tenant-a/gateway-peers',
      'NetworkPolicy/devawsk8s-tenant-a/core-peers',
      'NetworkPolicy/devawsk8s-tenant-a/processing-peers',
      'NetworkPolicy/devawsk8s-tenant-a/broker-peers',
      'NetworkPolicy/devawsk8s-tenant-a/database-peers',
      'ResourceQuota/devawsk8s-tenant-a/instance-quota',
      'LimitRange/devawsk8s-tenant-a/instance-limits',
      'Secret/devawsk8s-tenant-a/image-pull-secret',
      'Secret/devawsk8s-tenant-a/iot-credentials',
      'Secret/devawsk8s-tenant-a/gateway-ca',
      'Secret/devawsk8s-tenant-a/gateway-tls',
      'ConfigMap/devawsk8s-tenant-a/iot-config',
      'ConfigMap/devawsk8s-tenant-a/gateway-ca',
      'Service/devawsk8s-tenant-a/broker',
      'Service/devawsk8s-tenant-a/database',
      'Service/devawsk8s-tenant-a/broker-client',
      'Service/devawsk8s-tenant-a/database-client',
      'Service/devawsk8s-tenant-a/core',
      'Service/devawsk8s-tenant-a/gateway',
      'PodDisruptionBudget/devawsk8s-tenant-a/gateway',
      'PodDisruptionBudget/devawsk8s-tenant-a/core',
      'PodDisruptionBudget/devawsk8s-tenant-a/processing',
      'PodDisruptionBudget/devawsk8s-tenant-a/broker',
      'PodDisruptionBudget/devawsk8s-tenant-a/database',
      'StatefulSet/devawsk8s-tenant-a/broker',
      'StatefulSet/devawsk8s-tenant-a/database',
      'Deployment/devawsk8s-tenant-a/core',
      'Deployment/devawsk8s-tenant-a/processing',
      'Deployment/devawsk8s-tenant-a/gateway',
    ]);
    assert.deepEqual(
      all.children.filter((c) => c.generated).map((c) => c.object.metadata.name),
      ['iot-credentials'],
      'only the credentials are generated',
    );
  });

  it('are written in three stages: the namespace; policies, quota, secrets, config and services; then the workloads', () => {
    const all = children();
    const stages = writeStages(all.children).map((indexes) => indexes.map((i) => `${all.children[i]!.object.kind}/${all.children[i]!.object.metadata.name}`));
    assert.deepEqual(stages, [
      ['Namespace/devawsk8s-tenant-a'],
      [
        'NetworkPolicy/instance-isolation',
        'NetworkPolicy/gateway-devices',
        'NetworkPolicy/core-applications',
        'NetworkPolicy/instance-egress',
        'NetworkPolicy/operator-monitoring',
        'NetworkPolicy/gateway-peers',
        'NetworkPolicy/core-peers',
        'NetworkPolicy/processing-peers',
        'NetworkPolicy/broker-peers',
        'NetworkPolicy/database-peers',
        'ResourceQuota/instance-quota',
        'LimitRange/instance-limits',
        'Secret/image-pull-secret',
        'Secret/iot-credentials',
        'Secret/gateway-ca',
        'Secret/gateway-tls',
        'ConfigMap/iot-config',
        'ConfigMap/gateway-ca',
        'Service/broker',
        'Service/database',
        'Service/broker-client',
        'Service/database-client',
        'Service/core',
        'Service/gateway',
        'PodDisruptionBudget/gateway',
        'PodDisruptionBudget/core',
        'PodDisruptionBudget/processing',
        'PodDisruptionBudget/broker',
        'PodDisruptionBudget/database',
      ],
      ['StatefulSet/broker', 'StatefulSet/database', 'Deployment/core', 'Deployment/processing', 'Deployment/gateway'],
    ]);
  });

  it('a kind without a write stage is an error, not a child left unwritten', () => {
    const stray = { object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', labels: {} } }, generated: false } as unknown as DesiredChildren['children'][number];
    assert.throws(() => writeStages([...children().children, stray]), /no write stage for kind Pod/);
  });

  it('sets apiVersion, kind and the landscape labels on every child', () => {
    for (const { object } of children().children) {
      assert.ok(object.apiVersion && object.kind, childKey(object));
      assert.equal(object.metadata.labels['app.kubernetes.io/managed-by'], 'iot-operator', childKey(object));
      assert.equal(object.metadata.labels['cp.iotservices.io/landscape'], 'devawsk8s', childKey(object));
      assert.equal(object.metadata.labels['cp.iotservices.io/instance'], 'tenant-a', childKey(object));
      assert.equal(instanceIdOf(object.metadata.labels, 'devawsk8s'), 'tenant-a', 'child maps back to its instance');
      assert.equal(instanceIdOf(object.metadata.labels, 'other-landscape'), undefined);
    }
  });

  it('labels workloads and their pods with the recommended app.kubernetes.io labels', () => {
    const gateway = find<V1Deployment>(children(), 'Deployment', 'gateway');
    for (const labels of [gateway.metadata?.labels, gateway.spec?.template.metadata?.labels]) {
      assert.equal(labels?.['app.kubernetes.io/name'], 'iot-gateway');
      assert.equal(labels?.['app.kubernetes.io/instance'], 'tenant-a');
      assert.equal(labels?.['app.kubernetes.io/component'], 'gateway');
      assert.equal(labels?.['app.kubernetes.io/part-of'], 'iot-service');
    }
    const selector = gateway.spec?.selector.matchLabels ?? {};
    for (const [k, v] of Object.entries(selector)) assert.equal(gateway.spec?.template.metadata?.labels?.[k], v);
  });

  it('the landscape selector matches exactly the landscape labels', () => {
    assert.equal(landscapeSelector('devawsk8s'), 'app.kubernetes.io/managed-by=iot-operator,cp.iotservices.io/landscape=devawsk8s');
  });

  it('is deterministic', () => {
    assert.deepEqual(children({ config: { b: '2', a: '1' } }), children({ config: { a: '1', b: '2' } }));
  });

  it('has no undefined values, empty strings, or empty lists and maps the API server would drop', () => {
    const spec = { broker: { storage: '10Gi', storageClassName: 'fast' }, gateway: { placement: { nodeSelector: {} }, resources: {} } };
    for (const { object } of children(spec).children) {
      const walk = (value: unknown, path: string): void => {
        assert.notEqual(value, undefined, `${childKey(object)} ${path} is undefined`);
        assert.notEqual(value, '', `${childKey(object)} ${path} is an empty string`);
        if (Array.isArray(value)) {
          assert.ok(value.length > 0, `${childKey(object)} ${path} is an empty list`);
          value.forEach((v, i) => walk(v, `${path}[${i}]`));
        } else if (value !== null && typeof value === 'object') {
          // emptyDir: {} is the API server's own form of a default emptyDir
          if (!path.endsWith('.emptyDir')) assert.ok(Object.keys(value).length > 0, `${childKey(object)} ${path} is an empty map`);
          for (const [k, v] of Object.entries(value)) walk(v, `${path}.${k}`);
        }
      };
      walk(object, '');
    }
  });
});

describe('images', () => {
  it('are <registry>/iot-<component>:<version> with the operator default registry', () => {
    const gateway = find<V1Deployment>(children(), 'Deployment', 'gateway');
    assert.equal(onlyContainer(gateway.spec!.template.spec!).image, 'registry.example.com/iot/iot-gateway:2.4.1');
  });

  it('use spec.registry over the default, and spec.<component>.image over both', () => {
    const instance = testInstance({ registry: 'mirror.local:5000/iot', core: { image: 'custom/core@sha256:abc' } }, PERMISSIVE_CONFIG);
    assert.equal(componentImage(instance, 'broker'), 'mirror.local:5000/iot/iot-broker:2.4.1');
    assert.equal(componentImage(instance, 'core'), 'custom/core@sha256:abc');
  });

  it('have no registry prefix when neither spec nor operator names one', () => {
    const instance = testInstance({}, { operatorName: 'devawsk8s', defaultRegistry: '' });
    assert.equal(componentImage(instance, 'database'), 'iot-database:2.4.1');
  });

  it('change with spec.version on every workload', () => {
    for (const [name, spec] of podSpecs(children({ version: '2.5.0' }))) {
      assert.match(onlyContainer(spec).image ?? '', /:2\.5\.0$/, name);
    }
  });
});

describe('pods', () => {
  it('every container runs non-root, read-only, without privilege escalation or capabilities, with RuntimeDefault seccomp', () => {
    const specs = podSpecs(children());
    assert.equal(specs.length, 5);
    for (const [name, spec] of specs) {
      assert.equal(spec.securityContext?.runAsNonRoot, true, name);
      assert.equal(spec.securityContext?.seccompProfile?.type, 'RuntimeDefault', name);
      for (const container of [...spec.containers, ...(spec.initContainers ?? [])]) {
        const sc = container.securityContext;
        assert.equal(sc?.runAsNonRoot, true, name);
        assert.ok((sc?.runAsUser ?? 0) > 0, name);
        assert.equal(sc?.readOnlyRootFilesystem, true, name);
        assert.equal(sc?.allowPrivilegeEscalation, false, name);
        assert.deepEqual(sc?.capabilities, { drop: ['ALL'] }, name);
        assert.equal(sc?.seccompProfile?.type, 'RuntimeDefault', name);
        assert.ok(container.readinessProbe, `${name} has a readiness probe`);
        assert.deepEqual(
          [container.readinessProbe?.periodSeconds, container.readinessProbe?.failureThreshold],
          [2, 2],
          `${name}: readiness lost within seconds of a dependency lost`,
        );
        assert.ok(container.livenessProbe, `${name} has a liveness probe`);
      }
    }
  });

  it('pull with image-pull-secret and mount config.yml read-only at /etc/sap/config.yml', () => {
    for (const [name, spec] of podSpecs(children())) {
      assert.deepEqual(spec.imagePullSecrets, [{ name: 'image-pull-secret' }], name);
      const mount = onlyContainer(spec).volumeMounts?.find((m) => m.mountPath === '/etc/sap/config.yml');
      assert.deepEqual(mount, { name: 'config', mountPath: '/etc/sap/config.yml', subPath: 'config.yml', readOnly: true }, name);
      const volume = spec.volumes?.find((v) => v.name === 'config');
      assert.equal(volume?.configMap?.name, 'iot-config', name);
    }
  });

  it('mount config.yml where the operator is told to, and say where in IOT_CONFIG_FILE', () => {
    for (const [name, spec] of podSpecs(children({}, { ...TEST_CONFIG, configMountPath: '/srv/iot/config.yml' }))) {
      assert.equal(onlyContainer(spec).volumeMounts?.find((m) => m.name === 'config')?.mountPath, '/srv/iot/config.yml', name);
      assert.equal(onlyContainer(spec).env?.find((e) => e.name === 'IOT_CONFIG_FILE')?.value, '/srv/iot/config.yml', name);
    }
  });

  it('get only the credentials they need, from iot-credentials, never as literal values', () => {
    const fromSecret = Object.fromEntries(
      podSpecs(children()).map(([name, spec]) => [
        name,
        (onlyContainer(spec).env ?? []).filter((e) => e.valueFrom?.secretKeyRef?.name === 'iot-credentials').map((e) => `${e.name}=${e.valueFrom?.secretKeyRef?.key}`),
      ]),
    );
    assert.deepEqual(fromSecret, {
      broker: [
        'IOT_BROKER_GATEWAY_PASSWORD=broker-gateway-password',
        'IOT_BROKER_PROCESSING_PASSWORD=broker-processing-password',
        'IOT_BROKER_CORE_PASSWORD=broker-core-password',
        'IOT_BROKER_ROUTE_PASSWORD=broker-route-password',
      ],
      database: [
        'IOT_DATABASE_PASSWORD=database-password',
        'IOT_DATABASE_CORE_PASSWORD=database-core-password',
        'IOT_DATABASE_PROCESSING_PASSWORD=database-processing-password',
      ],
      core: ['IOT_API_TOKEN=api-token', 'IOT_DEVICE_CHECK_TOKEN=device-check-token', 'IOT_BROKER_CORE_PASSWORD=broker-core-password', 'IOT_DATABASE_CORE_PASSWORD=database-core-password'],
      processing: ['IOT_BROKER_PROCESSING_PASSWORD=broker-processing-password', 'IOT_DATABASE_PROCESSING_PASSWORD=database-processing-password'],
      gateway: ['IOT_DEVICE_CHECK_TOKEN=device-check-token', 'IOT_BROKER_GATEWAY_PASSWORD=broker-gateway-password'],
    });
    for (const [, spec] of podSpecs(children())) {
      for (const env of onlyContainer(spec).env ?? []) {
        assert.ok(!Object.values(CREDENTIALS).includes(env.value ?? ''), 'no credential as a literal env value');
      }
    }
  });

  it('take resources (in canonical form) and nodeSelector from the spec', () => {
    const all = children({
      core: { resources: { limits: { memory: '1024Mi', cpu: 1 }, requests: { cpu: '0.25' } }, placement: { nodeSelector: { 'kubernetes.io/os': 'linux' } } },
    });
    const core = find<V1Deployment>(all, 'Deployment', 'core').spec!.template.spec!;
    assert.deepEqual(onlyContainer(core).resources, { limits: { cpu: '1', memory: '1Gi' }, requests: { cpu: '250m' } });
    assert.deepEqual(core.nodeSelector, { 'kubernetes.io/os': 'linux' });
    const gateway = find<V1Deployment>(all, 'Deployment', 'gateway').spec!.template.spec!;
    assert.equal(onlyContainer(gateway).resources, undefined);
    assert.equal(gateway.nodeSelector, undefined);
  });

  it('take tolerations from the spec, per component', () => {
    const toleration = { key: 'dedicated', operator: 'Equal' as const, value: 'iot', effect: 'NoSchedule' as const };
    const all = children({ broker: { placement: { tolerations: [toleration] } } }, PERMISSIVE_CONFIG);
    assert.deepEqual(find<V1StatefulSet>(all, 'StatefulSet', 'broker').spec!.template.spec!.tolerations, [toleration]);
    assert.equal(find<V1Deployment>(all, 'Deployment', 'gateway').spec!.template.spec!.tolerations, undefined);
  });

  it('take affinity from the spec, per component, as a copy; none when absent', () => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In' as const, values: ['node-000001'] }] }] },
        preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 20, preference: { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In' as const, values: ['zone-a'] }] } }],
      },
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 100, podAffinityTerm: { labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'database' } }, topologyKey: 'kubernetes.io/hostname' } },
        ],
      },
    };
    const instance = testInstance({ gateway: { placement: { affinity } }, database: { placement: { affinity } }, core: { placement: { affinity: {} } } });
    const all = desiredChildren(instance, { imagePullSecret: PULL_SECRET, credentials: CREDENTIALS, keptEmptyDirs: new Set(), gatewayTls: testGatewayTls() });
    const gateway = find<V1Deployment>(all, 'Deployment', 'gateway').spec!.template.spec!;
    const database = find<V1StatefulSet>(all, 'StatefulSet', 'database').spec!.template.spec!;
    assert.deepEqual(gateway.affinity, affinity);
    assert.deepEqual(database.affinity, affinity);
    assert.notEqual(gateway.affinity, instance.spec.gateway.placement?.affinity, 'a copy, not the spec itself');
    gateway.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms[0]!.matchExpressions![0]!.values!.push('node-000002');
    assert.deepEqual(instance.spec.gateway.placement?.affinity, affinity, 'changing the rendered copy leaves the spec alone');
    for (const [name, spec] of podSpecs(all).filter(([n]) => n !== 'gateway' && n !== 'database')) {
      assert.equal(spec.affinity, undefined, `${name}: absent or empty affinity is omitted`);
    }
  });

  it('run the replicas of the spec', () => {
    const all = children({ gateway: { replicas: 5 }, core: { replicas: 0 }, broker: { replicas: 3 } });
    assert.equal(find<V1Deployment>(all, 'Deployment', 'gateway').spec?.replicas, 5);
    assert.equal(find<V1Deployment>(all, 'Deployment', 'core').spec?.replicas, 0);
    assert.equal(find<V1Deployment>(all, 'Deployment', 'processing').spec?.replicas, 1);
    assert.equal(find<V1StatefulSet>(all, 'StatefulSet', 'broker').spec?.replicas, 3);
    assert.equal(find<V1StatefulSet>(all, 'StatefulSet', 'database').spec?.replicas, 1);
  });

  it('roll processing without a surge (one holder of the broker session at a time); gateway and core with the default strategy', () => {
    const all = children();
    assert.deepEqual(find<V1Deployment>(all, 'Deployment', 'processing').spec?.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } });
    assert.equal(find<V1Deployment>(all, 'Deployment', 'gateway').spec?.strategy, undefined);
    assert.equal(find<V1Deployment>(all, 'Deployment', 'core').spec?.strategy, undefined);
  });
});

describe('config map and checksum', () => {
  it('config.yml holds instance, landscape, version, endpoints, stream, retention and spec.config', () => {
    const cm = desiredConfigMap(testInstance({ config: { logLevel: 'debug', 'batch.size': '30' } }));
    assert.equal(cm.metadata?.name, 'iot-config');
    const config = parse(cm.data?.['config.yml'] ?? '') as Record<string, unknown>;
    assert.deepEqual(Object.keys(config), ['instance', 'landscape', 'namespace', 'version', 'endpoints', 'stream', 'retention', 'batch.size', 'logLevel']);
    assert.equal(config['instance'], 'tenant-a');
    assert.equal(config['landscape'], 'devawsk8s');
    assert.equal(config['version'], '2.4.1');
    assert.deepEqual(config['endpoints'], {
      broker: 'broker-client.devawsk8s-tenant-a.svc:4222',
      database: 'database-client.devawsk8s-tenant-a.svc:5432',
      core: 'core.devawsk8s-tenant-a.svc:8080',
    });
    assert.deepEqual(config['stream'], { replicas: 1, maxBytes: 805306368 });
    assert.deepEqual(config['retention'], { seconds: 2592000 });
    assert.equal(config['logLevel'], 'debug');
    assert.equal(config['batch.size'], '30');
  });

  it('stream: the broker replicas, and maxBytes from maxBacklog, else 75 % of the volume, else (an emptyDir) 256 MiB, as YAML integers', () => {
    const stream = (broker: Record<string, unknown>, kept: KeptEmptyDirs = new Set()) => {
      const text = desiredConfigMap(testInstance({ broker }), kept).data?.['config.yml'] ?? '';
      return { text, stream: (parse(text) as { stream: unknown }).stream };
    };
    const plain = stream({});
    assert.deepEqual(plain.stream, { replicas: 1, maxBytes: 805306368 }, 'no maxBacklog, no storage: 75 % of the default 1Gi');
    assert.match(plain.text, /^"stream":\n {2}"replicas": 1\n {2}"maxBytes": 805306368\n/m, 'numbers, not quoted strings');
    assert.deepEqual(stream({ storage: 'ephemeral' }).stream, { replicas: 1, maxBytes: 268435456 }, 'an emptyDir: 256Mi');
    assert.deepEqual(stream({}, new Set(['broker'])).stream, { replicas: 1, maxBytes: 268435456 }, 'a kept emptyDir: 256Mi');
    assert.deepEqual(stream({ replicas: 3, storage: 'ephemeral' }).stream, { replicas: 3, maxBytes: 268435456 });
    assert.deepEqual(stream({ storage: '10Gi' }).stream, { replicas: 1, maxBytes: 8053063680 }, '75 % of 10Gi');
    assert.deepEqual(stream({ storage: '1G' }).stream, { replicas: 1, maxBytes: 750000000 }, '75 % of 1G');
    assert.deepEqual(stream({ storage: '3' }).stream, { replicas: 1, maxBytes: 2 }, '75 % of 3 bytes, rounded down');
    assert.deepEqual(stream({ storage: '1' }).stream, { replicas: 1, maxBytes: 1 }, 'never 0');
    assert.deepEqual(stream({ storage: '10Gi', maxBacklog: '512Mi' }).stream, { replicas: 1, maxBytes: 536870912 }, 'maxBacklog over storage');
    assert.deepEqual(stream({ maxBacklog: '1.5Gi', replicas: 3 }).stream, { replicas: 3, maxBytes: 1610612736 });
    assert.deepEqual(stream({ maxBacklog: '2G' }).stream, { replicas: 1, maxBytes: 2000000000 });
    assert.deepEqual(stream({ maxBacklog: '1.5' }).stream, { replicas: 1, maxBytes: 1 }, 'whole bytes, rounded down');
    assert.match(stream({ maxBacklog: '16Pi' }).text, /"maxBytes": 18014398509481984\n/, 'beyond 2^53: exact');
  });

  it('retention: spec.retention in seconds, 30d by default, as a YAML integer', () => {
    const retention = (spec: Record<string, unknown>) => {
      const text = desiredConfigMap(testInstance(spec)).data?.['config.yml'] ?? '';
      return { text, retention: (parse(text) as { retention: unknown }).retention };
    };
    const plain = retention({});
    assert.deepEqual(plain.retention, { seconds: 2592000 }, 'default 30d');
    assert.match(plain.text, /^"retention":\n {2}"seconds": 2592000\n/m, 'a number, not a quoted string');
    const twelveHours = retention({ retention: '12h' });
    assert.deepEqual(twelveHours.retention, { seconds: 43200 });
    assert.match(twelveHours.text, /^"retention":\n {2}"seconds": 43200\n/m);
    assert.deepEqual(retention({ retention: '90m' }).retention, { seconds: 5400 });
    assert.deepEqual(retention({ retention: '45s' }).retention, { seconds: 45 });
    assert.deepEqual(retention({ retention: '999999d' }).retention, { seconds: 86399913600 });
  });

  it('a bad retention renders nothing: the instance is refused with the reason', () => {
    for (const bad of ['30', '0d', '1w', '1.5h', '30D']) {
      const resolved = resolveInstance(iotService('tenant-a', { version: '2.4.1', retention: bad }), TEST_CONFIG);
      assert.ok(!resolved.ok, bad);
      assert.equal(resolved.failure.reason, 'InvalidSpec', bad);
      assert.match(resolved.failure.message, /spec\.retention: retention must be a whole number of s, m, h or d, e\.g\. 30d/, bad);
    }
  });

  it('keeps a version that looks like a number a string', () => {
    const config = parse(desiredConfigMap(testInstance({ version: '1.10' })).data?.['config.yml'] ?? '') as Record<string, unknown>;
    assert.equal(config['version'], '1.10');
  });

  it('the checksum on the gateway, core and processing pod templates changes when the configuration changes', () => {
    const checksums = (all: DesiredChildren) =>
      all.children
        .filter((c) => c.object.kind === 'Deployment')
        .map((c) => (c.object as V1Deployment).spec?.template.metadata?.annotations?.[CONFIG_CHECKSUM_ANNOTATION]);
    const before = checksums(children({ config: { logLevel: 'info' } }));
    assert.equal(before.length, 3);
    assert.equal(new Set(before).size, 1, 'one checksum for all three');
    assert.match(before[0] ?? '', /^[0-9a-f]{64}$/);
    assert.deepEqual(checksums(children({ config: { logLevel: 'info' }, gateway: { replicas: 7 } })), before, 'unchanged by replicas');
    assert.deepEqual(checksums(children({ config: { logLevel: 'info' }, core: { resources: { limits: { cpu: 1 } } } })), before);
    assert.notDeepEqual(checksums(children({ config: { logLevel: 'debug' } })), before, 'changed by spec.config');
    assert.notDeepEqual(checksums(children({ config: { logLevel: 'info' }, broker: { maxBacklog: '1Gi' } })), before, 'changed by the stream settings');
    assert.deepEqual(checksums(children({ config: { logLevel: 'info' }, retention: '30d' })), before, 'unchanged by the default written out');
    assert.notDeepEqual(checksums(children({ config: { logLevel: 'info' }, retention: '12h' })), before, 'changed by the retention');
  });

  it('broker and database do not read config.yml: no checksum on their pod templates, a spec.config change leaves them as they are', () => {
    const statefulSets = (all: DesiredChildren) => all.children.filter((c) => c.object.kind === 'StatefulSet').map((c) => c.object as V1StatefulSet);
    const before = statefulSets(children({ config: { logLevel: 'info' } }));
    assert.deepEqual(before.map((s) => s.metadata?.name), ['broker', 'database']);
    for (const statefulSet of before) {
      assert.equal(statefulSet.spec?.template.metadata?.annotations, undefined, statefulSet.metadata?.name);
      const mount = onlyContainer(statefulSet.spec!.template.spec!).volumeMounts?.find((m) => m.name === 'config');
      assert.equal(mount?.mountPath, '/etc/sap/config.yml', `${statefulSet.metadata?.name}: still mounted, as in every pod`);
    }
    assert.deepEqual(statefulSets(children({ config: { logLevel: 'debug', 'batch.size': '30' } })), before);
  });

  it('configChecksum depends on content only', () => {
    assert.equal(configChecksum({ a: '1', b: '2' }), configChecksum({ b: '2', a: '1' }));
    assert.notEqual(configChecksum({ a: '1' }), configChecksum({ a: '2' }));
    assert.notEqual(configChecksum({ ab: 'c' }), configChecksum({ a: 'bc' }));
  });
});

describe('secrets', () => {
  it('generated credentials are 32 random bytes each, base64url, and distinct', () => {
    const credentials = generateCredentials();
    assert.deepEqual(Object.keys(credentials).sort(), Object.keys(CREDENTIAL_KEYS).sort(), 'one per key of iot-credentials');
    const values = Object.values(credentials);
    for (const value of values) {
      assert.match(value, /^[A-Za-z0-9_-]+$/);
      assert.equal(Buffer.from(value, 'base64url').length, 32);
    }
    assert.equal(new Set(values).size, values.length);
    assert.notDeepEqual(generateCredentials(), credentials, 'fresh every time');
  });

  it('credentials come from the injected randomness, drawn in the order of the keys', () => {
    let counter = 0;
    const fake = (size: number) => new Uint8Array(size).fill(++counter);
    const credentials = generateCredentials(fake);
    (Object.keys(CREDENTIAL_KEYS) as Array<keyof typeof CREDENTIAL_KEYS>).forEach((name, i) => {
      assert.deepEqual(Buffer.from(credentials[name], 'base64url'), Buffer.alloc(32, i + 1), name);
    });
  });

  it('iot-credentials holds each credential under its key', () => {
    const secret = desiredCredentialsSecret(testInstance(), CREDENTIALS);
    const decoded = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
    assert.deepEqual(decoded, {
      'api-token': 'apiToken-value',
      'broker-core-password': 'brokerCorePassword-value',
      'broker-gateway-password': 'brokerGatewayPassword-value',
      'broker-processing-password': 'brokerProcessingPassword-value',
      'broker-route-password': 'brokerRoutePassword-value',
      'database-core-password': 'databaseCorePassword-value',
      'database-password': 'databasePassword-value',
      'database-processing-password': 'databaseProcessingPassword-value',
      'database-replication-password': 'databaseReplicationPassword-value',
      'device-check-token': 'deviceCheckToken-value',
    });
  });

  it('an existing iot-credentials is completed with the keys it lacks, fresh; the keys it has never change', () => {
    const desired = desiredCredentialsSecret(testInstance(), CREDENTIALS);
    const encode = (value: string) => Buffer.from(value).toString('base64');
    // As an instance made before the device-check token and the broker users and database roles existed has it.
    const existing: V1Secret = {
      metadata: { name: 'iot-credentials', resourceVersion: '17' },
      data: { 'api-token': encode('old-token'), 'broker-password': encode('old-broker'), 'database-password': encode('old-db') },
    };
    assert.deepEqual(credentialsPatch(existing, desired), {
      patch: {
        metadata: { resourceVersion: '17' },
        data: {
          'broker-core-password': encode('brokerCorePassword-value'),
          'broker-gateway-password': encode('brokerGatewayPassword-value'),
          'broker-processing-password': encode('brokerProcessingPassword-value'),
          'broker-route-password': encode('brokerRoutePassword-value'),
          'database-core-password': encode('databaseCorePassword-value'),
          'database-processing-password': encode('databaseProcessingPassword-value'),
          'database-replication-password': encode('databaseReplicationPassword-value'),
          'device-check-token': encode('deviceCheckToken-value'),
        },
      },
      rotates: false,
    }, 'the keys it lacks; neither the ones it has nor the one no longer used');
    assert.equal(credentialsPatch(desired, desired), undefined, 'nothing lacking, nothing written');
    const emptied: V1Secret = { metadata: { name: 'iot-credentials', resourceVersion: '18' } };
    assert.deepEqual(Object.keys(credentialsPatch(emptied, desired)?.patch.data ?? {}).sort(), Object.values(CREDENTIAL_KEYS).sort(), 'a Secret without data gets every key');
  });

  it('a rotation asked for that the Secret does not record writes every key afresh and records it; one it records writes nothing', () => {
    const current = desiredCredentialsSecret(testInstance(), CREDENTIALS, 'r1');
    assert.deepEqual(current.metadata?.annotations, { 'cp.iotservices.io/credentials-rotation': 'r1' });
    const existing: V1Secret = { ...current, metadata: { ...current.metadata, resourceVersion: '30' } };
    const fresh = generateCredentials();
    assert.equal(credentialsPatch(existing, desiredCredentialsSecret(testInstance(), fresh, 'r1')), undefined, 'the same rotation: nothing');
    const rotated = credentialsPatch(existing, desiredCredentialsSecret(testInstance(), fresh, 'r2'))!;
    assert.equal(rotated.rotates, true);
    assert.deepEqual(rotated.patch.metadata, { resourceVersion: '30', annotations: { 'cp.iotservices.io/credentials-rotation': 'r2' } });
    assert.deepEqual(rotated.patch.data, desiredCredentialsSecret(testInstance(), fresh).data, 'every key, afresh');
    const unrotated: V1Secret = { ...existing, metadata: { ...existing.metadata, annotations: {} } };
    assert.equal(credentialsPatch(unrotated, desiredCredentialsSecret(testInstance(), fresh, 'r1'))?.rotates, true, 'a first rotation of a Secret that records none');
    assert.equal(credentialsPatch(existing, desiredCredentialsSecret(testInstance(), fresh)), undefined, 'no rotation asked for: nothing');
  });

  it('the rotation asked for is the IoTService\'s annotation, else the one the Secret records', () => {
    assert.equal(credentialsRotation('r2', 'r1'), 'r2');
    assert.equal(credentialsRotation(undefined, 'r1'), 'r1', 'removing the annotation rotates nothing');
    assert.equal(credentialsRotation('', 'r1'), 'r1');
    assert.equal(credentialsRotation(undefined, undefined), undefined);
  });

  it('every pod template carries the rotation when there is one, so a rotation rolls every workload; none without', () => {
    const rotated = desiredChildren(testInstance(), { imagePullSecret: PULL_SECRET, credentials: CREDENTIALS, credentialsRotation: 'r7', keptEmptyDirs: new Set(), gatewayTls: testGatewayTls() });
    const rotatedSpecs = rotated.children.filter((c) => c.object.kind === 'Deployment' || c.object.kind === 'StatefulSet');
    assert.equal(rotatedSpecs.length, 5);
    for (const child of rotatedSpecs) {
      const template = (child.object as V1Deployment | V1StatefulSet).spec!.template;
      assert.equal(template.metadata?.annotations?.['cp.iotservices.io/credentials-rotation'], 'r7', child.object.metadata.name);
    }
    assert.equal(find<V1Secret>(rotated, 'Secret', 'iot-credentials').metadata?.annotations?.['cp.iotservices.io/credentials-rotation'], 'r7');
    for (const child of children().children.filter((c) => c.object.kind === 'Deployment' || c.object.kind === 'StatefulSet')) {
      assert.equal((child.object as V1Deployment | V1StatefulSet).spec!.template.metadata?.annotations?.['cp.iotservices.io/credentials-rotation'], undefined);
    }
    const broker = find<V1StatefulSet>(children(), 'StatefulSet', 'broker').spec!.template.metadata;
    assert.equal(broker?.annotations, undefined, 'the broker\'s template has no annotations at all without a rotation');
  });

  it('the image-pull-secret copy has the source type and data, and our labels instead of the source’s', () => {
    const copy = desiredImagePullSecret(testInstance(), PULL_SECRET);
    assert.equal(copy.metadata?.name, 'image-pull-secret');
    assert.equal(copy.metadata?.namespace, 'devawsk8s-tenant-a');
    assert.equal(copy.type, 'kubernetes.io/dockerconfigjson');
    assert.deepEqual(copy.data, PULL_SECRET.data);
    assert.equal(copy.metadata?.labels?.['team'], undefined);
    assert.equal(copy.metadata?.resourceVersion, undefined);
    const changed = desiredImagePullSecret(testInstance(), { ...PULL_SECRET, data: { '.dockerconfigjson': 'bmV3' } });
    assert.deepEqual(changed.data, { '.dockerconfigjson': 'bmV3' }, 'follows the source');
  });
});

describe('disruption budgets', () => {
  it('one per component: evictions take at most one of its pods at a time, and the pods they select are exactly its own', () => {
    const all = children({ gateway: { replicas: 3 }, database: { replicas: 1 } });
    for (const component of ['gateway', 'core', 'processing', 'broker', 'database'] as const) {
      const budget = find<V1PodDisruptionBudget>(all, 'PodDisruptionBudget', component);
      assert.equal(budget.spec?.maxUnavailable, 1, `${component}: one pod at a time, and a single replica can still be evicted`);
      assert.equal(budget.spec?.minAvailable, undefined);
      const workload = find<V1Deployment | V1StatefulSet>(all, component === 'broker' || component === 'database' ? 'StatefulSet' : 'Deployment', component);
      assert.deepEqual(budget.spec?.selector?.matchLabels, workload.spec?.selector.matchLabels, `${component}: the budget selects what its workload does`);
    }
  });
});

describe('services', () => {
  const ports = (service: V1Service) => service.spec?.ports?.map((p) => `${p.name}:${p.port}/${p.protocol}->${p.targetPort}`);

  it('gateway exposes one port per enabled protocol, in a fixed order', () => {
    assert.deepEqual(ports(desiredGatewayService(testInstance())), ['mqtts:8883/TCP->8883', 'https:8443/TCP->8443']);
    assert.deepEqual(ports(desiredGatewayService(testInstance({ gateway: { protocols: ['coap', 'mqtts', 'http', 'mqtt'] } }))), [
      'mqtt:1883/TCP->1883',
      'mqtts:8883/TCP->8883',
      'http:8080/TCP->8080',
      'coap:5683/UDP->5683',
    ]);
    assert.deepEqual(ports(desiredGatewayService(testInstance({ gateway: { protocols: ['mqtts'] } }))), ['mqtts:8883/TCP->8883']);
  });

  it('gateway container ports follow the protocols too', () => {
    const deployment = desiredGatewayDeployment(testInstance({ gateway: { protocols: ['coap'] } }), 'x');
    const container = onlyContainer(deployment.spec!.template.spec!);
    assert.deepEqual(
      container.ports?.map((p) => `${p.name}:${p.containerPort}/${p.protocol}`),
      ['coap:5683/UDP', 'health:8081/TCP'],
    );
  });

  it('gateway is told its enabled protocols in IOT_GATEWAY_PROTOCOLS, in the order mqtt, mqtts, http, coap', () => {
    const protocolsOf = (protocols: ('mqtt' | 'mqtts' | 'http' | 'coap')[]) =>
      onlyContainer(desiredGatewayDeployment(testInstance({ gateway: { protocols } }), 'x').spec!.template.spec!).env?.find(
        (e) => e.name === 'IOT_GATEWAY_PROTOCOLS',
      )?.value;
    assert.equal(protocolsOf(['http', 'mqtt']), 'mqtt,http');
    assert.equal(protocolsOf(['coap', 'mqtts']), 'mqtts,coap');
  });

  it('gateway is told spec.gateway.connections in IOT_GATEWAY_MAX_CONNECTIONS; unset, no variable (the gateway has no cap)', () => {
    const envOf = (gateway: Record<string, unknown>) => onlyContainer(desiredGatewayDeployment(testInstance({ gateway }), 'x').spec!.template.spec!).env ?? [];
    assert.deepEqual(envOf({ connections: 5000 }).filter((e) => e.name === 'IOT_GATEWAY_MAX_CONNECTIONS'), [{ name: 'IOT_GATEWAY_MAX_CONNECTIONS', value: '5000' }]);
    assert.equal(envOf({}).find((e) => e.name === 'IOT_GATEWAY_MAX_CONNECTIONS'), undefined);
    const others = (gateway: Record<string, unknown>) => envOf(gateway).filter((e) => e.name !== 'IOT_GATEWAY_MAX_CONNECTIONS');
    assert.deepEqual(others({ connections: 5000 }), others({}), 'nothing else of the gateway changes');
    for (const component of ['core', 'processing'] as const) {
      const pod = find<V1Deployment>(children({ gateway: { connections: 5000 } }), 'Deployment', component).spec!.template.spec!;
      assert.equal(onlyContainer(pod).env?.find((e) => e.name === 'IOT_GATEWAY_MAX_CONNECTIONS'), undefined, `${component} is not told`);
    }
  });

  it('the broker (NATS JetStream): client 4222, cluster 6222, monitor 8222; ready once JetStream is, alive while it takes clients', () => {
    const broker = onlyContainer(find<V1StatefulSet>(children(), 'StatefulSet', 'broker').spec!.template.spec!);
    assert.deepEqual(broker.ports, [
      { name: 'client', containerPort: 4222, protocol: 'TCP' },
      { name: 'cluster', containerPort: 6222, protocol: 'TCP' },
      { name: 'monitor', containerPort: 8222, protocol: 'TCP' },
    ]);
    assert.deepEqual(broker.readinessProbe?.httpGet, { path: '/healthz?js-enabled-only=true', port: 8222, scheme: 'HTTP' });
    assert.equal(broker.readinessProbe?.tcpSocket, undefined);
    assert.deepEqual(broker.livenessProbe?.tcpSocket, { port: 4222 });
    assert.equal(broker.livenessProbe?.httpGet, undefined);
  });

  it('the broker is told its users\' and routes\' passwords, its pod name and namespace and the replica count', () => {
    for (const replicas of [1, 3]) {
      const broker = onlyContainer(find<V1StatefulSet>(children({ broker: { replicas } }), 'StatefulSet', 'broker').spec!.template.spec!);
      assert.deepEqual(broker.env, [
        { name: 'IOT_CONFIG_FILE', value: '/etc/sap/config.yml' },
        { name: 'IOT_BROKER_GATEWAY_PASSWORD', valueFrom: { secretKeyRef: { name: 'iot-credentials', key: 'broker-gateway-password' } } },
        { name: 'IOT_BROKER_PROCESSING_PASSWORD', valueFrom: { secretKeyRef: { name: 'iot-credentials', key: 'broker-processing-password' } } },
        { name: 'IOT_BROKER_CORE_PASSWORD', valueFrom: { secretKeyRef: { name: 'iot-credentials', key: 'broker-core-password' } } },
        { name: 'IOT_BROKER_ROUTE_PASSWORD', valueFrom: { secretKeyRef: { name: 'iot-credentials', key: 'broker-route-password' } } },
        { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
        { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
        { name: 'IOT_BROKER_REPLICAS', value: String(replicas) },
      ]);
    }
  });

  it('gateway Service type comes from spec.gateway.serviceType', () => {
    assert.equal(desiredGatewayService(testInstance()).spec?.type, 'ClusterIP');
    assert.equal(desiredGatewayService(testInstance({ gateway: { serviceType: 'LoadBalancer' } }, PERMISSIVE_CONFIG)).spec?.type, 'LoadBalancer');
  });

  it("a NodePort or LoadBalancer gateway Service keeps devices' own addresses (externalTrafficPolicy Local), for deviceSources to judge", () => {
    const policy = (gateway: Record<string, unknown>) => desiredGatewayService(testInstance({ gateway }, PERMISSIVE_CONFIG)).spec?.externalTrafficPolicy;
    assert.equal(policy({}), undefined, 'a ClusterIP Service has none');
    assert.equal(policy({ serviceType: 'NodePort' }), 'Local');
    assert.equal(policy({ serviceType: 'LoadBalancer', deviceSources: ['203.0.113.0/24'] }), 'Local');
  });

  it('core serves 8080; broker and database are headless, the broker with its cluster port for its peers', () => {
    const all = children();
    assert.deepEqual(ports(find<V1Service>(all, 'Service', 'core')), ['http:8080/TCP->8080']);
    const broker = desiredBrokerService(testInstance());
    assert.equal(broker.spec?.clusterIP, 'None');
    assert.equal(broker.spec?.publishNotReadyAddresses, true, 'broker-<i>.broker.<namespace>.svc resolves while the peers start');
    assert.deepEqual(ports(broker), ['client:4222/TCP->4222', 'cluster:6222/TCP->6222', 'monitor:8222/TCP->8222']);
    assert.equal(find<V1StatefulSet>(all, 'StatefulSet', 'broker').spec?.serviceName, 'broker');
    const database = find<V1Service>(all, 'Service', 'database');
    assert.equal(database.spec?.clusterIP, 'None');
    assert.deepEqual(ports(database), ['database:5432/TCP->5432']);
  });

  it('broker-client and database-client: ClusterIP Services of the same pods on their client ports, what config.yml names', () => {
    const all = children();
    for (const [name, component, port] of [['broker-client', 'broker', 'client:4222/TCP->4222'], ['database-client', 'database', 'database:5432/TCP->5432']] as const) {
      const client = find<V1Service>(all, 'Service', name);
      const headless = find<V1Service>(all, 'Service', component);
      assert.equal(client.spec?.type, 'ClusterIP', name);
      assert.equal(client.spec?.clusterIP, undefined, `${name}: the API server allocates its address`);
      assert.equal(client.spec?.publishNotReadyAddresses, undefined, `${name}: ready pods only`);
      assert.deepEqual(ports(client), [port], name);
      assert.deepEqual(client.spec?.selector, headless.spec?.selector, name);
    }
  });

  it('select the pods of their own component', () => {
    const all = children();
    for (const name of ['gateway', 'core', 'broker', 'database']) {
      const service = find<V1Service>(all, 'Service', name);
      const workload =
        all.children.find((c) => c.object.metadata.name === name && c.object.kind !== 'Service')?.object as V1Deployment;
      assert.deepEqual(service.spec?.selector, workload.spec?.selector.matchLabels, name);
    }
  });
});

describe('statefulsets', () => {
  it('claim a volume of the default size in the default class when no storage is set', () => {
    const broker = desiredBrokerStatefulSet(testInstance());
    const [claim] = broker.spec?.volumeClaimTemplates ?? [];
    assert.deepEqual(claim?.spec, { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } });
    assert.equal(broker.spec?.template.spec?.volumes?.find((v) => v.name === 'data'), undefined);
    assert.equal(broker.spec?.template.spec?.securityContext?.fsGroupChangePolicy, 'OnRootMismatch', 'a data directory keeps its modes');
    assert.equal(broker.spec?.serviceName, 'broker');
  });

  it('keep data in an emptyDir with storage: ephemeral, or when the StatefulSet was made with one', () => {
    const requested = desiredBrokerStatefulSet(testInstance({ broker: { storage: 'ephemeral' } }));
    assert.equal(requested.spec?.volumeClaimTemplates, undefined);
    assert.deepEqual(requested.spec?.template.spec?.volumes?.find((v) => v.name === 'data'), { name: 'data', emptyDir: {} });
    const kept = desiredDatabaseStatefulSet(testInstance(), new Set(['database']));
    assert.equal(kept.spec?.volumeClaimTemplates, undefined);
    assert.deepEqual(kept.spec?.template.spec?.volumes?.find((v) => v.name === 'data'), { name: 'data', emptyDir: {} });
    assert.ok(hasEmptyDirData(kept));
    assert.equal(hasEmptyDirData(desiredDatabaseStatefulSet(testInstance())), false);
    assert.equal(desiredDatabaseStatefulSet(testInstance({ database: { storage: '5Gi' } }), new Set(['broker'])).spec?.volumeClaimTemplates?.length, 1, 'only the kept one');
  });

  it('claim a persistent volume of the given size and class when storage is set', () => {
    const database = desiredDatabaseStatefulSet(testInstance({ database: { storage: '2048Mi', storageClassName: 'fast' } }));
    const [claim] = database.spec?.volumeClaimTemplates ?? [];
    assert.equal(claim?.metadata?.name, 'data');
    assert.deepEqual(claim?.spec?.accessModes, ['ReadWriteOnce']);
    assert.deepEqual(claim?.spec?.resources?.requests, { storage: '2Gi' });
    assert.equal(claim?.spec?.storageClassName, 'fast');
    assert.equal(database.spec?.template.spec?.volumes?.find((v) => v.name === 'data'), undefined);
    const mount = onlyContainer(database.spec!.template.spec!).volumeMounts?.find((m) => m.name === 'data');
    assert.equal(mount?.mountPath, '/var/lib/iot');
  });
});
