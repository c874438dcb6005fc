import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import type { V1ConfigMap, V1Deployment, V1Secret, V1Service } from '@kubernetes/client-node';
import { ApiError, Kinds, type KubeApi, type KubeObject } from '@iot-operator/runtime';
import { validateIoTServiceSpec } from '../src/api/validation.ts';
import type { ChildBodies } from '../src/child-bodies.ts';
import { GatewayCertificateKeeper, type TlsContext } from '../src/gateway-certificates.ts';
import {
  desiredChildren,
  desiredGatewayCaConfigMap,
  desiredGatewayCaSecret,
  desiredGatewayTlsSecret,
  GATEWAY_CERTIFICATE_PROFILE,
  gatewayCertificateNames,
  gatewayServiceAddresses,
  instanceCaMaterial,
  keepOrIssue,
  renewalTime,
  type GatewayTlsMaterial,
  type Instance,
} from '../src/resources/index.ts';
import type { NetworkPolicy } from '../src/resources/network-policies.ts';
import { TEST_CREDENTIALS, testGatewayCertificates, testGatewayTls, testInstance } from './fixtures.ts';

const NS = 'devawsk8s-tenant-a';
const decode = (secret: V1Secret, key: string) => Buffer.from(secret.data![key]!, 'base64').toString('utf8');
const certificates = (pem: string) => pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)!.map((block) => new X509Certificate(block));

describe('gateway TLS: the certificates', () => {
  it("covers the gateway Service's names and addresses and spec.gateway.tls.hostnames, IP addresses as such", () => {
    const instance = testInstance({ gateway: { tls: { hostnames: ['iot.example.com', '203.0.113.7', '2001:db8::7'] } } });
    assert.deepEqual(gatewayCertificateNames(instance), [
      'DNS:gateway',
      `DNS:gateway.${NS}`,
      `DNS:gateway.${NS}.svc`,
      `DNS:gateway.${NS}.svc.cluster.local`,
      'DNS:iot.example.com',
      'IP:203.0.113.7',
      'IP:2001:db8::7',
    ]);
    const service = { spec: { clusterIP: '10.96.0.17', clusterIPs: ['10.96.0.17', 'fd00::17'] }, status: { loadBalancer: { ingress: [{ ip: '198.51.100.4' }, { hostname: 'lb.example.com' }] } } };
    assert.deepEqual(gatewayServiceAddresses(service), ['10.96.0.17', 'fd00::17', '198.51.100.4']);
    assert.deepEqual(gatewayServiceAddresses({ spec: { clusterIP: 'None' } }), [], 'a headless Service has no address');
    assert.deepEqual(gatewayCertificateNames(instance, gatewayServiceAddresses(service)).slice(4, 7), ['IP:10.96.0.17', 'IP:fd00::17', 'IP:198.51.100.4'], 'the address kubectl shows for the Service');
    const { certificates: made } = keepOrIssue({}, gatewayCertificateNames(instance), new Date(), GATEWAY_CERTIFICATE_PROFILE);
    const [leaf, chained] = certificates(made.server.cert);
    assert.equal(leaf!.checkHost(`gateway.${NS}.svc`), `gateway.${NS}.svc`);
    assert.equal(leaf!.checkHost('iot.example.com'), 'iot.example.com');
    assert.equal(leaf!.checkIP('203.0.113.7'), '203.0.113.7');
    assert.equal(leaf!.checkHost('other.example.com'), undefined);
    const ca = new X509Certificate(made.ca.cert);
    assert.ok(ca.ca, 'the CA is a CA');
    assert.ok(leaf!.checkIssued(ca) && leaf!.verify(ca.publicKey), 'the server certificate verifies against the CA');
    assert.equal(chained!.fingerprint256, ca.fingerprint256, 'tls.crt carries the chain: the server certificate, then the CA');
    const days = (cert: X509Certificate) => (Date.parse(cert.validTo) - Date.now()) / 86400_000;
    assert.ok(days(leaf!) > 89 && days(leaf!) <= 90, `the server certificate is valid for 90 days, ${days(leaf!)}`);
    assert.ok(days(ca) > 3649, 'the CA for 10 years');
  });

  it('renews the server certificate 30 days before it expires, with the same CA', () => {
    const names = gatewayCertificateNames(testInstance());
    const current = testGatewayCertificates();
    const renewAt = renewalTime(current.server.cert);
    assert.equal(renewAt.getTime() + 30 * 86400_000, Date.parse(certificates(current.server.cert)[0]!.validTo), '30 days before it expires');
    const before = keepOrIssue(current, names, new Date(renewAt.getTime() - 1000), GATEWAY_CERTIFICATE_PROFILE);
    assert.equal(before.serverIssued, undefined);
    assert.equal(before.certificates.server, current.server, 'kept until its renewal time');
    const at = keepOrIssue(current, names, renewAt, GATEWAY_CERTIFICATE_PROFILE);
    assert.match(at.serverIssued ?? '', /in less than 30 days/);
    assert.notEqual(at.certificates.server.cert, current.server.cert);
    assert.equal(at.certificates.ca, current.ca, 'the CA stays');
    assert.equal(at.caReplaced, undefined);
  });

  it('issues a new server certificate when the names change, with the same CA', () => {
    const current = testGatewayCertificates();
    const names = gatewayCertificateNames(testInstance({ gateway: { tls: { hostnames: ['iot.example.com'] } } }));
    const changed = keepOrIssue(current, names, new Date(), GATEWAY_CERTIFICATE_PROFILE);
    assert.match(changed.serverIssued ?? '', /names changed/);
    assert.equal(changed.certificates.ca, current.ca);
    assert.equal(certificates(changed.certificates.server.cert)[0]!.checkHost('iot.example.com'), 'iot.example.com');
    // and back: a name removed is a change too
    const back = keepOrIssue(changed.certificates, gatewayCertificateNames(testInstance()), new Date(), GATEWAY_CERTIFICATE_PROFILE);
    assert.match(back.serverIssued ?? '', /names changed/);
  });
});

describe('gateway TLS: the children', () => {
  it('Secret gateway-tls (kubernetes.io/tls) holds the chain, key, CA and the client CA; gateway-ca the CA key; ConfigMap gateway-ca the CA', () => {
    const instance = testInstance();
    const material = { ...testGatewayTls(), clientCA: '-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n' };
    const tls = desiredGatewayTlsSecret(instance, material);
    assert.equal(tls.type, 'kubernetes.io/tls');
    assert.deepEqual(Object.keys(tls.data!), ['ca.crt', 'client-ca.crt', 'tls.crt', 'tls.key']);
    assert.equal(decode(tls, 'client-ca.crt'), material.clientCA);
    assert.equal(decode(tls, 'tls.crt'), material.server.cert);
    assert.equal(decode(tls, 'ca.crt'), material.caCert);
    assert.deepEqual(Object.keys(desiredGatewayTlsSecret(instance, testGatewayTls()).data!), ['ca.crt', 'tls.crt', 'tls.key'], 'no client-ca.crt without spec.gateway.tls.clientCA');
    const ca = desiredGatewayCaSecret(instance, material.instanceCa!);
    assert.equal(decode(ca, 'ca.key'), material.instanceCa!.key);
    assert.deepEqual(desiredGatewayCaConfigMap(instance, material).data, { 'ca.crt': material.caCert });
  });

  function rendered(spec: Record<string, unknown>) {
    const { children } = desiredChildren(testInstance(spec), {
      imagePullSecret: { metadata: { name: 'image-pull-secret' }, data: {} },
      credentials: TEST_CREDENTIALS,
      keptEmptyDirs: new Set(),
      gatewayTls: testGatewayTls(),
    });
    const find = <T>(kind: string, name: string) => children.find((c) => c.object.kind === kind && c.object.metadata.name === name)!.object as T;
    return { deployment: find<V1Deployment>('Deployment', 'gateway'), service: find<V1Service>('Service', 'gateway'), policy: find<NetworkPolicy>('NetworkPolicy', 'gateway-devices') };
  }

  it('mqtts (8883) and https (8443) reach the Deployment, the Service and the NetworkPolicy', () => {
    const { deployment, service, policy } = rendered({ gateway: { protocols: ['https', 'mqtts'], deviceSources: ['203.0.113.0/24'] } });
    const container = deployment.spec!.template.spec!.containers[0]!;
    assert.deepEqual(container.ports, [
      { name: 'mqtts', containerPort: 8883, protocol: 'TCP' },
      { name: 'https', containerPort: 8443, protocol: 'TCP' },
      { name: 'health', containerPort: 8081, protocol: 'TCP' },
    ]);
    assert.deepEqual(container.env?.find((e) => e.name === 'IOT_GATEWAY_PROTOCOLS')?.value, 'mqtts,https');
    assert.deepEqual(service.spec!.ports, [
      { name: 'mqtts', port: 8883, targetPort: 8883, protocol: 'TCP' },
      { name: 'https', port: 8443, targetPort: 8443, protocol: 'TCP' },
    ]);
    assert.deepEqual(policy.spec.ingress![0]!.ports, [
      { protocol: 'TCP', port: 8883 },
      { protocol: 'TCP', port: 8443 },
    ]);
  });

  it('the gateway pods mount Secret gateway-tls read-only at /etc/iot/tls, whole (no subPath), with no hash of it on the template', () => {
    const tlsSpec = { gateway: { protocols: ['mqtts'] } };
    const { deployment } = rendered(tlsSpec);
    const pod = deployment.spec!.template.spec!;
    const container = pod.containers[0]!;
    assert.deepEqual(
      container.volumeMounts?.find((m) => m.name === 'gateway-tls'),
      { name: 'gateway-tls', mountPath: '/etc/iot/tls', readOnly: true },
    );
    assert.deepEqual(pod.volumes?.find((v) => v.name === 'gateway-tls'), { name: 'gateway-tls', secret: { secretName: 'gateway-tls', defaultMode: 0o440 } });
    assert.equal(container.env?.find((e) => e.name === 'IOT_GATEWAY_TLS_DIR')?.value, '/etc/iot/tls');
    // A renewal changes the Secret only: the template stays the same.
    const renewed = instanceCaMaterial(keepOrIssue(testGatewayCertificates(), gatewayCertificateNames(testInstance(tlsSpec)), renewalTime(testGatewayCertificates().server.cert), GATEWAY_CERTIFICATE_PROFILE).certificates);
    const again = desiredChildren(testInstance(tlsSpec), {
      imagePullSecret: { metadata: { name: 'image-pull-secret' }, data: {} },
      credentials: TEST_CREDENTIALS,
      keptEmptyDirs: new Set(),
      gatewayTls: renewed,
    }).children.find((c) => c.object.kind === 'Deployment' && c.object.metadata.name === 'gateway')!.object as V1Deployment;
    assert.deepEqual(again.spec!.template, deployment.spec!.template);
  });

  it('an instance serving only plaintext protocols gets no CA, no certificate, no ConfigMap gateway-ca and no mount', () => {
    const { children } = desiredChildren(testInstance({ gateway: { protocols: ['mqtt', 'http'] } }), {
      imagePullSecret: { metadata: { name: 'image-pull-secret' }, data: {} },
      credentials: TEST_CREDENTIALS,
      keptEmptyDirs: new Set(),
    });
    assert.deepEqual(children.filter((c) => c.object.metadata.name?.startsWith('gateway-ca') || c.object.metadata.name === 'gateway-tls'), []);
    const pod = (children.find((c) => c.object.kind === 'Deployment' && c.object.metadata.name === 'gateway')!.object as V1Deployment).spec!.template.spec!;
    assert.equal(pod.volumes?.find((v) => v.name === 'gateway-tls'), undefined);
    assert.equal(pod.containers[0]!.env?.find((e) => e.name === 'IOT_GATEWAY_TLS_DIR'), undefined);
    assert.throws(
      () => desiredChildren(testInstance({ gateway: { protocols: ['https'] } }), { imagePullSecret: { metadata: { name: 'image-pull-secret' }, data: {} }, credentials: TEST_CREDENTIALS, keptEmptyDirs: new Set() }),
      /serves TLS but no TLS material/,
    );
  });
});

/** A keeper over Secrets held in `secrets` (by name), as cache metadata and bodies. */
function keeperWorld(instance: Instance, configMaps: Record<string, V1ConfigMap> = {}) {
  const secrets = new Map<string, V1Secret & KubeObject>();
  let version = 0;
  const store = (secret: V1Secret) => secrets.set(secret.metadata!.name!, { ...secret, metadata: { ...secret.metadata!, name: secret.metadata!.name!, resourceVersion: String(++version) } } as V1Secret & KubeObject);
  const services = new Map<string, V1Service & KubeObject>();
  const events: string[] = [];
  const bodies = { read: async (_client: unknown, _type: unknown, observed: KubeObject) => secrets.get(observed.metadata.name!) } as unknown as ChildBodies;
  /** Secrets and Services the API server holds but the cache does not show yet. */
  const uncached = new Set<string>();
  const held = (type: unknown, name: string) => (type === Kinds.Secret ? secrets.get(name) : type === Kinds.Service ? services.get(name) : configMaps[name]);
  const ctx: TlsContext = {
    client: {
      get: async (type: unknown, name: string) => held(type, name) ?? Promise.reject(new ApiError(404, 'NotFound', 'not found')),
    } as unknown as KubeApi,
    cache: { get: (type: unknown, name: string) => (uncached.has(name) || type === Kinds.ConfigMap ? undefined : held(type, name)), served: () => true } as never,
    event: (type: string, reason: string) => void events.push(`${type} ${reason}`),
    permitted: (_request, call) => call(),
    stamp: (certificate) => certificate,
  };
  /** What the reconcile would write: the material's Secrets. */
  const write = (material: GatewayTlsMaterial) => {
    store(desiredGatewayCaSecret(instance, material.instanceCa!));
    store(desiredGatewayTlsSecret(instance, material));
  };
  return { secrets, services, uncached, store, events, bodies, ctx, write };
}

describe('gateway TLS: kept across reconciles and restarts', () => {
  const instance = testInstance();

  it('keeps the CA of Secret gateway-ca across reconciles and a restart (a new keeper reads it back)', async () => {
    const world = keeperWorld(instance);
    const first = await new GatewayCertificateKeeper(world.bodies).material(world.ctx, 'k', instance, new Date());
    assert.ok(first.kind === 'ready');
    assert.deepEqual(world.events, ['Normal GatewayCertificateIssued']);
    world.write(first.tls.material);
    const keeper = new GatewayCertificateKeeper(world.bodies);
    const again = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(again.kind === 'ready');
    assert.equal(again.tls.material.caCert, first.tls.material.caCert, 'the CA read back is kept');
    assert.equal(again.tls.material.server.cert, first.tls.material.server.cert, 'and the server certificate');
    assert.equal(again.tls.fingerprint, first.tls.fingerprint);
    assert.equal(again.tls.renewAt?.getTime(), renewalTime(first.tls.material.server.cert).getTime());
    const third = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(third.kind === 'ready' && third.tls.material.caCert === first.tls.material.caCert);
    assert.deepEqual(world.events, ['Normal GatewayCertificateIssued'], 'nothing issued after the first');
  });

  it('with nothing remembered and its Secrets and Service not in the cache yet (a shard taking the instance over), keeps what the API server holds', async () => {
    const world = keeperWorld(instance);
    world.services.set('gateway', { metadata: { name: 'gateway', namespace: instance.namespace }, spec: { clusterIP: '10.96.0.17', clusterIPs: ['10.96.0.17'] } } as V1Service & KubeObject);
    const first = await new GatewayCertificateKeeper(world.bodies).material(world.ctx, 'k', instance, new Date());
    assert.ok(first.kind === 'ready');
    world.write(first.tls.material);
    world.uncached.add('gateway-ca').add('gateway-tls').add('gateway');
    const keeper = new GatewayCertificateKeeper(world.bodies);
    const takenOver = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(takenOver.kind === 'ready');
    assert.equal(takenOver.tls.material.caCert, first.tls.material.caCert, 'the CA devices trust');
    assert.equal(takenOver.tls.material.server.cert, first.tls.material.server.cert, "and the server certificate, the Service's address included");
    // The next reconcile: the relabelled Secrets are cached, the relabelled Service not yet.
    for (const name of ['gateway-ca', 'gateway-tls']) world.uncached.delete(name);
    const next = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(next.kind === 'ready');
    assert.equal(next.tls.material.server.cert, first.tls.material.server.cert, 'the same names while the Service is not cached yet');
    assert.deepEqual(world.events, ['Normal GatewayCertificateIssued'], 'nothing made anew');
  });

  it('issues a new server certificate with the same CA when Secret gateway-tls is deleted; restores a deleted gateway-ca', async () => {
    const world = keeperWorld(instance);
    const keeper = new GatewayCertificateKeeper(world.bodies);
    const first = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(first.kind === 'ready');
    assert.equal((await keeper.material(world.ctx, 'k', instance, new Date())).kind, 'ready', 'not cached yet: kept');
    world.write(first.tls.material);
    await keeper.material(world.ctx, 'k', instance, new Date());
    world.secrets.delete('gateway-tls');
    const reissued = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(reissued.kind === 'ready');
    assert.equal(reissued.tls.material.caCert, first.tls.material.caCert, 'the same CA');
    assert.notEqual(reissued.tls.material.server.cert, first.tls.material.server.cert, 'a new server certificate');
    assert.notEqual(reissued.tls.material.server.key, first.tls.material.server.key, 'with a new key');
    assert.deepEqual(world.events, ['Normal GatewayCertificateIssued', 'Normal GatewayCertificateIssued']);
    const notCachedYet = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(notCachedYet.kind === 'ready' && notCachedYet.tls.material.server.cert === reissued.tls.material.server.cert, 'its own write not cached yet: kept, not issued again');
    world.write(reissued.tls.material);
    await keeper.material(world.ctx, 'k', instance, new Date());

    world.secrets.delete('gateway-ca');
    const restored = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(restored.kind === 'ready');
    assert.equal(restored.tls.material.caCert, first.tls.material.caCert, 'the CA remembered');
    assert.equal(restored.tls.material.server.cert, reissued.tls.material.server.cert, 'and the server certificate');
    assert.equal(world.events.length, 2, 'nothing issued');
  });

  it('replaces a CA Secret edited into garbage, with a Warning Event: by the remembered CA, or a new one after a restart', async () => {
    const world = keeperWorld(instance);
    const keeper = new GatewayCertificateKeeper(world.bodies);
    const first = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(first.kind === 'ready');
    world.write(first.tls.material);
    await keeper.material(world.ctx, 'k', instance, new Date());
    world.store({ ...world.secrets.get('gateway-ca')!, data: { 'ca.crt': Buffer.from('garbage').toString('base64') } });
    const restored = await keeper.material(world.ctx, 'k', instance, new Date());
    assert.ok(restored.kind === 'ready');
    assert.equal(restored.tls.material.caCert, first.tls.material.caCert, 'the CA remembered is restored');
    assert.deepEqual(world.events, ['Normal GatewayCertificateIssued', 'Warning GatewayCAReplaced']);

    const restarted = await new GatewayCertificateKeeper(world.bodies).material(world.ctx, 'k', instance, new Date());
    assert.ok(restarted.kind === 'ready');
    assert.notEqual(restarted.tls.material.caCert, first.tls.material.caCert, 'without one, a new CA');
    assert.deepEqual(world.events.slice(2), ['Warning GatewayCAReplaced', 'Normal GatewayCertificateIssued']);
  });

  it('copies the client CA of spec.gateway.tls.clientCA; a missing ConfigMap is a ClientCANotFound failure', async () => {
    const withClientCA = testInstance({ gateway: { tls: { clientCA: 'device-cas' } } });
    const world = keeperWorld(withClientCA, { 'device-cas': { data: { 'ca.crt': 'PEM' } } });
    const keeper = new GatewayCertificateKeeper(world.bodies);
    const made = await keeper.material(world.ctx, 'k', withClientCA, new Date());
    assert.ok(made.kind === 'ready');
    assert.equal(made.tls.material.clientCA, 'PEM');
    const missing = await keeper.material(keeperWorld(withClientCA).ctx, 'k', withClientCA, new Date());
    assert.ok(missing.kind === 'failed');
    assert.equal(missing.failure.reason, 'ClientCANotFound');
    assert.match(missing.failure.message, /ConfigMap device-cas in namespace devawsk8s/);
  });
});

describe('gateway TLS: spec.gateway.tls validation', () => {
  it('accepts DNS names and IP addresses as hostnames, and a ConfigMap name as clientCA', () => {
    const result = validateIoTServiceSpec({ version: '1', gateway: { protocols: ['mqtts', 'https'], tls: { hostnames: ['iot.example.com', '203.0.113.7', '2001:db8::1'], clientCA: 'device-cas' } } });
    assert.ok(result.ok, JSON.stringify(result));
  });

  it('rejects hostnames that are neither, naming the rule', () => {
    for (const bad of ['Iot.Example.com', 'iot_example.com', 'https://iot.example.com', '*.example.com', '-iot.example.com', '']) {
      const result = validateIoTServiceSpec({ version: '1', gateway: { tls: { hostnames: [bad] } } });
      assert.ok(!result.ok, `${bad} is refused`);
      assert.match(result.errors.join(';'), /spec\.gateway\.tls\.hostnames/);
    }
    const unknown = validateIoTServiceSpec({ version: '1', gateway: { tls: { certificate: 'x' } } });
    assert.ok(!unknown.ok);
  });
});
