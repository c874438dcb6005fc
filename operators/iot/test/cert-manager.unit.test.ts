/**
 * The gateway's certificate from cert-manager (spec.gateway.tls.issuerRef), on the runtime's fake
 * client with cert-manager played by the test (its Certificate status, the Secret it issues into):
 * the Certificate the operator writes; what it makes of cert-manager's reports — not installed,
 * an issuer missing or not ready, an issuance failed (Failed, saying why), issuing (waiting, with
 * cert-manager's message), Ready (the issued certificate copied, read once per issuance); a
 * reissue for new names rendered with the certificate issued before; the Certificate written
 * again when deleted; removed with its Secret when issuerRef goes; and the reconcile writing
 * nothing but the Certificate until cert-manager has issued, then the children with the issuer's
 * certificate and CA, which a restarted operator finds as it wants them.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import { Kinds, issueCertificate, makeCertificateAuthority, withDesiredHash, type CertificateAuthority, type KubeObject, type ResourceType } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import type { IoTService } from '../src/api/iotservice.ts';
import { validateIoTServiceSpec } from '../src/api/validation.ts';
import { ChildBodies } from '../src/child-bodies.ts';
import { iotReconciler } from '../src/controller.ts';
import { GatewayCertificateKeeper, type TlsContext } from '../src/gateway-certificates.ts';
import { CertificateType, ClusterIssuerType, IoTServiceType, IssuerType } from '../src/iotservice-types.ts';
import {
  certificateState,
  desiredGatewayCertificate,
  gatewayCertificateNames,
  instanceLabels,
  issuedMaterial,
  type GatewayCertificate,
  type Instance,
} from '../src/resources/index.ts';
import { iotService, TEST_CONFIG, testInstance } from './fixtures.ts';

const LS = TEST_CONFIG.operatorName;
const NS = `${LS}-tenant-a`;
const CERTIFICATE = 'tenant-a-gateway';
const ISSUED_SECRET = 'tenant-a-gateway-tls';
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
const decode = (secret: V1Secret | undefined, key: string) => Buffer.from(secret?.data?.[key] ?? '', 'base64').toString('utf8');
const withIssuer = (kind: 'Issuer' | 'ClusterIssuer', name: string, more: Record<string, unknown> = {}) => ({ gateway: { tls: { issuerRef: { kind, name }, ...more } } });

let ca: CertificateAuthority | undefined;
/** The issuer's CA (made once). */
const issuerCa = () => (ca ??= makeCertificateAuthority('issuer CA', 30));

/** A fake cluster that records the GETs made of it, beside the writes. */
class Cluster extends FakeClient {
  readonly gets: string[] = [];
  override async get<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace?: string): Promise<T> {
    this.gets.push(`${type.kind}/${name}`);
    return super.get<T>(type, name, namespace);
  }
}

function issuer(type: ResourceType, name: string, ready: boolean, message = ''): KubeObject {
  const namespace = type === IssuerType ? { namespace: LS } : {};
  return { apiVersion: 'cert-manager.io/v1', kind: type.kind, metadata: { name, ...namespace }, spec: { ca: { secretName: 'ca' } }, status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False', message }] } } as KubeObject;
}

const certificate = (cluster: Cluster) => cluster.peek<GatewayCertificate>(CertificateType, CERTIFICATE, LS);

/** cert-manager reports `conditions` on the Certificate, for its current generation. */
async function report(cluster: Cluster, conditions: Array<{ type: string; status: string; reason?: string; message?: string }>, revision?: number): Promise<void> {
  const current = certificate(cluster)!;
  const observedGeneration = current.metadata.generation;
  await cluster.replaceStatus(CertificateType, { ...current, status: { conditions: conditions.map((c) => ({ ...c, observedGeneration })), ...(revision ? { revision } : {}) } });
}

/** cert-manager issues the Certificate as it stands: its Secret, then Ready with `revision`. Returns the certificate issued. */
async function issue(cluster: Cluster, revision: number, withCaCrt = true): Promise<{ cert: string; key: string }> {
  const { spec } = certificate(cluster)!;
  const names = [...(spec.dnsNames ?? []).map((n) => `DNS:${n}`), ...(spec.ipAddresses ?? []).map((a) => `IP:${a}`)];
  const leaf = issueCertificate(issuerCa(), names, 90, 'gateway');
  const data = { 'tls.crt': b64(leaf.cert), 'tls.key': b64(leaf.key), ...(withCaCrt ? { 'ca.crt': b64(issuerCa().cert) } : {}) };
  await cluster.apply(Kinds.Secret, { apiVersion: 'v1', kind: 'Secret', metadata: { name: spec.secretName, namespace: LS, labels: spec.secretTemplate.labels }, type: 'kubernetes.io/tls', data }, { fieldManager: 'cert-manager', force: true });
  await report(cluster, [{ type: 'Ready', status: 'True', reason: 'Ready', message: 'Certificate is up to date and has not expired' }], revision);
  return leaf;
}

/** The keeper of one instance on a fake cluster holding `seeded` issuers. */
function world(...seeded: KubeObject[]) {
  const cluster = new Cluster();
  for (const obj of seeded) cluster.seed(obj.kind === 'Issuer' ? IssuerType : ClusterIssuerType, obj);
  const ctx: TlsContext = {
    client: cluster,
    cache: cluster.cacheReader(),
    event: () => undefined,
    permitted: (_request, call) => call(),
    stamp: (certificate) => withDesiredHash(certificate as KubeObject),
  };
  const keeper = new GatewayCertificateKeeper(new ChildBodies({ labelSelector: '' }, () => true));
  const material = (instance: Instance) => keeper.material(ctx, 'k', instance, new Date());
  return { cluster, keeper, material };
}

describe('the Certificate the operator writes for spec.gateway.tls.issuerRef', () => {
  it("is cert-manager's Certificate <instance>-gateway in the landscape, owned by the IoTService, for the names the instance CA's certificate covers", () => {
    const instance = testInstance(withIssuer('ClusterIssuer', 'ca', { hostnames: ['iot.example.com', '203.0.113.7'] }));
    const certificate = desiredGatewayCertificate(instance, { kind: 'ClusterIssuer', name: 'ca' }, gatewayCertificateNames(instance, ['10.96.0.17']));
    assert.equal(certificate.apiVersion, 'cert-manager.io/v1');
    assert.equal(certificate.kind, 'Certificate');
    assert.deepEqual(certificate.metadata, {
      name: CERTIFICATE,
      namespace: LS,
      labels: instanceLabels(instance),
      ownerReferences: [{ apiVersion: 'cp.iotservices.io/v1beta1', kind: 'IoTService', name: 'tenant-a', uid: 'uid-of-tenant-a', controller: true }],
    });
    assert.deepEqual(certificate.spec, {
      secretName: ISSUED_SECRET,
      secretTemplate: { labels: instanceLabels(instance) },
      dnsNames: ['gateway', `gateway.${NS}`, `gateway.${NS}.svc`, `gateway.${NS}.svc.cluster.local`, 'iot.example.com'],
      ipAddresses: ['10.96.0.17', '203.0.113.7'],
      duration: '2160h',
      renewBefore: '720h',
      usages: ['server auth', 'digital signature', 'key encipherment'],
      issuerRef: { group: 'cert-manager.io', kind: 'ClusterIssuer', name: 'ca' },
    });
  });

  it("reads cert-manager's report: Ready only for the Certificate's current generation; a failed issuance with its message", () => {
    const at = (generation: number, conditions: object[]) => ({ metadata: { generation }, spec: {}, status: { conditions } }) as unknown as GatewayCertificate;
    assert.deepEqual(certificateState(at(2, [{ type: 'Ready', status: 'True', message: 'up to date', observedGeneration: 2 }])), { ready: true, message: 'up to date' });
    assert.equal(certificateState(at(3, [{ type: 'Ready', status: 'True', observedGeneration: 2 }])).ready, false, 'Ready for a spec since changed');
    assert.deepEqual(certificateState(at(1, [])), { ready: false });
    const failed = certificateState(at(1, [
      { type: 'Ready', status: 'False', message: 'Issuing certificate as Secret does not exist', observedGeneration: 1 },
      { type: 'Issuing', status: 'False', reason: 'Failed', message: 'The certificate request has failed to complete and will be retried: denied', observedGeneration: 1 },
    ]));
    assert.deepEqual(failed, { ready: false, message: 'Issuing certificate as Secret does not exist', issuanceFailed: 'The certificate request has failed to complete and will be retried: denied' });
  });

  it('reads what cert-manager issued: certificate, key and ca.crt, or says what is missing', () => {
    const leaf = issueCertificate(issuerCa(), ['DNS:gateway'], 1, 'gateway');
    const secret = (data: Record<string, string>) => ({ data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])) });
    assert.deepEqual(issuedMaterial(secret({ 'tls.crt': leaf.cert, 'tls.key': leaf.key, 'ca.crt': issuerCa().cert })), { ok: true, material: { caCert: issuerCa().cert, server: leaf } });
    assert.deepEqual(issuedMaterial(undefined), { ok: false, problem: 'it does not exist' });
    assert.match((issuedMaterial(secret({ 'tls.crt': leaf.cert, 'tls.key': leaf.key })) as { problem: string }).problem, /no ca\.crt/);
    assert.match((issuedMaterial(secret({ 'tls.crt': leaf.cert, 'tls.key': issuerCa().key, 'ca.crt': issuerCa().cert })) as { problem: string }).problem, /tls\.key does not belong to its tls\.crt/);
  });
});

describe("the gateway's TLS from cert-manager: what the reconcile makes of it", () => {
  it('cert-manager not installed: Failed CertManagerNotInstalled; nothing written, nothing of cert-manager asked', async () => {
    const { cluster, material } = world();
    cluster.notServed(CertificateType);
    const result = await material(testInstance(withIssuer('ClusterIssuer', 'ca')));
    assert.ok(result.kind === 'failed');
    assert.equal(result.failure.reason, 'CertManagerNotInstalled');
    assert.match(result.failure.message, /^cert-manager is not installed: .*certificates\.cert-manager\.io\/v1/);
    assert.deepEqual([cluster.writes, cluster.gets], [[], ['Service/gateway']], "only the gateway Service's addresses, which the cache does not hold yet");
  });

  it('an issuer that does not exist: the Certificate is written, and the instance Failed saying which issuer is missing', async () => {
    const { cluster, material } = world();
    const result = await material(testInstance(withIssuer('ClusterIssuer', 'missing')));
    assert.ok(result.kind === 'failed');
    assert.equal(result.failure.reason, 'CertificateNotReady');
    assert.equal(
      result.failure.message,
      `Certificate ${LS}/${CERTIFICATE} (spec.gateway.tls.issuerRef) is not ready: cert-manager has not reported on it yet (is its controller running?); ClusterIssuer missing does not exist: create it, or name an existing one in spec.gateway.tls.issuerRef.`,
    );
    assert.deepEqual(cluster.writes.map((w) => `${w.verb} ${w.kind}`), ['apply Certificate']);
    const namespaced = await world().material(testInstance(withIssuer('Issuer', 'missing')));
    assert.ok(namespaced.kind === 'failed');
    assert.match(namespaced.failure.message, /Issuer missing in namespace devawsk8s does not exist/);
  });

  it("an issuer not ready, or an issuance that failed: Failed with cert-manager's messages; issuing: waiting, with cert-manager's message", async () => {
    const { cluster, material } = world(issuer(ClusterIssuerType, 'ca', false, 'Error getting keypair for CA issuer: secret "ca" not found'));
    const instance = testInstance(withIssuer('ClusterIssuer', 'ca'));
    const notReady = await material(instance);
    assert.ok(notReady.kind === 'failed');
    assert.match(notReady.failure.message, /ClusterIssuer ca is not ready: Error getting keypair for CA issuer: secret "ca" not found\.$/);

    await cluster.replaceStatus(ClusterIssuerType, issuer(ClusterIssuerType, 'ca', true));
    await report(cluster, [{ type: 'Ready', status: 'False', reason: 'DoesNotExist', message: 'Issuing certificate as Secret does not exist' }]);
    const waiting = await material(instance);
    assert.ok(waiting.kind === 'waiting');
    assert.deepEqual(waiting.waiting, {
      reason: 'WaitingForCertificate',
      message: `Waiting for cert-manager to issue Certificate ${LS}/${CERTIFICATE} (spec.gateway.tls.issuerRef ClusterIssuer ca): Issuing certificate as Secret does not exist.`,
    });

    await report(cluster, [
      { type: 'Ready', status: 'False', message: 'Issuing certificate as Secret does not exist' },
      { type: 'Issuing', status: 'False', reason: 'Failed', message: 'The certificate request has failed to complete and will be retried: signing failed' },
    ]);
    const failed = await material(instance);
    assert.ok(failed.kind === 'failed');
    assert.match(failed.failure.message, /cert-manager's last issuance failed: The certificate request has failed to complete and will be retried: signing failed\.$/);
  });

  it('Ready: the issued certificate with the issuer CA, read from its Secret once per issuance; a renewal is copied', async () => {
    const { cluster, material } = world(issuer(ClusterIssuerType, 'ca', true));
    const instance = testInstance(withIssuer('ClusterIssuer', 'ca'));
    await material(instance);
    const first = await issue(cluster, 1);
    const ready = await material(instance);
    assert.ok(ready.kind === 'ready');
    assert.equal(ready.waiting, undefined);
    assert.deepEqual(ready.tls.material, { caCert: issuerCa().cert, server: first });
    assert.equal(ready.tls.renewAt, undefined, 'renewal is cert-manager’s');
    const reads = () => cluster.gets.filter((g) => g === `Secret/${ISSUED_SECRET}`).length;
    const readsWhenReady = reads();
    const writes = cluster.writes.length;
    const again = await material(instance);
    assert.ok(again.kind === 'ready' && again.tls.fingerprint === ready.tls.fingerprint);
    assert.equal(reads(), readsWhenReady, 'the same revision: no read');
    assert.equal(cluster.writes.length, writes, 'an unchanged Certificate is not written again');

    const renewed = await issue(cluster, 2);
    const after = await material(instance);
    assert.ok(after.kind === 'ready');
    assert.equal(after.tls.material.server.cert, renewed.cert);
    assert.notEqual(after.tls.fingerprint, ready.tls.fingerprint);
    assert.equal(reads(), readsWhenReady + 1);
  });

  it('new names: the Certificate is written anew; until cert-manager reissues, the certificate issued before is rendered and the instance waits', async () => {
    const { cluster, material } = world(issuer(ClusterIssuerType, 'ca', true));
    await material(testInstance(withIssuer('ClusterIssuer', 'ca')));
    const first = await issue(cluster, 1);
    await material(testInstance(withIssuer('ClusterIssuer', 'ca')));
    const renamed = testInstance(withIssuer('ClusterIssuer', 'ca', { hostnames: ['iot.example.com'] }));
    const reissuing = await material(renamed);
    assert.deepEqual(certificate(cluster)!.spec.dnsNames?.at(-1), 'iot.example.com', 'written with the new name');
    assert.ok(reissuing.kind === 'ready');
    assert.equal(reissuing.tls.material.server.cert, first.cert, 'the certificate issued before');
    assert.equal(reissuing.waiting?.reason, 'WaitingForCertificate', "Ready was reported for the Certificate's former generation");
    const second = await issue(cluster, 2);
    const done = await material(renamed);
    assert.ok(done.kind === 'ready' && !done.waiting);
    assert.equal(done.tls.material.server.cert, second.cert);
  });

  it('a Certificate deleted is written again; one that is Ready but issued no ca.crt fails, saying so', async () => {
    const { cluster, material } = world(issuer(ClusterIssuerType, 'ca', true));
    const instance = testInstance(withIssuer('ClusterIssuer', 'ca'));
    await material(instance);
    await cluster.delete(CertificateType, CERTIFICATE, LS);
    await material(instance);
    assert.ok(certificate(cluster), 'written again');
    await issue(cluster, 1, false);
    const unusable = await material(instance);
    assert.ok(unusable.kind === 'failed');
    assert.equal(unusable.failure.reason, 'CertificateNotReady');
    assert.match(unusable.failure.message, new RegExp(`cert-manager reports it Ready, but Secret ${LS}/${ISSUED_SECRET} it issued into is unusable: it holds no ca\\.crt`));
  });

  it("without issuerRef the instance's Certificate is deleted with the Secret it was issued into (only one labelled for it); with none, nothing of cert-manager is asked", async () => {
    const { cluster, material } = world(issuer(ClusterIssuerType, 'ca', true));
    await material(testInstance(withIssuer('ClusterIssuer', 'ca')));
    await issue(cluster, 1);
    const own = await material(testInstance());
    assert.ok(own.kind === 'ready' && own.tls.material.instanceCa, 'the instance CA signs again');
    assert.equal(certificate(cluster), undefined);
    assert.equal(cluster.peek(Kinds.Secret, ISSUED_SECRET, LS), undefined);

    const other = world(issuer(ClusterIssuerType, 'ca', true));
    await other.material(testInstance(withIssuer('ClusterIssuer', 'ca')));
    other.cluster.seed(Kinds.Secret, { metadata: { name: ISSUED_SECRET, namespace: LS, labels: { someone: 'else' } }, data: {} });
    await other.material(testInstance());
    assert.equal(certificate(other.cluster), undefined);
    assert.ok(other.cluster.peek(Kinds.Secret, ISSUED_SECRET, LS), 'a Secret not labelled for the instance stays');

    const none = world();
    await none.material(testInstance());
    assert.deepEqual(none.cluster.writes, []);
    // Nothing remembered and nothing cached: the gateway Service and the instance CA's Secrets are asked of the API server, nothing else.
    assert.deepEqual(none.cluster.gets, ['Service/gateway', 'Secret/gateway-ca', 'Secret/gateway-tls']);
  });
});

describe('the IoTService reconcile with spec.gateway.tls.issuerRef', () => {
  it("writes only the Certificate until cert-manager has issued it (Processing, saying so); then the children, with the issuer's certificate and CA", async () => {
    const cluster = new Cluster();
    cluster.seed(Kinds.Secret, { metadata: { name: 'image-pull-secret', namespace: LS }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': 'e30=' } });
    cluster.seed(ClusterIssuerType, issuer(ClusterIssuerType, 'ca', true));
    cluster.seed(IoTServiceType, iotService('tenant-a', { version: '2.4.1', ...withIssuer('ClusterIssuer', 'ca') }) as unknown as KubeObject);
    const config = { ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1 };
    const reconciler = iotReconciler(config);
    const reconcile = (by = reconciler) => by({ namespace: LS, name: 'tenant-a' }, cluster.reconcileContext());
    const status = () => cluster.peek<IoTService & KubeObject>(IoTServiceType, 'tenant-a', LS)!.status!;

    await reconcile();
    assert.deepEqual(cluster.writes.filter((w) => w.kind !== 'IoTService').map((w) => `${w.verb} ${w.kind}`), ['apply Certificate'], 'nothing else before the certificate');
    assert.equal(status().phase, 'Processing');
    const ready = status().conditions!.find((c) => c.type === 'Ready')!;
    assert.equal(ready.reason, 'WaitingForCertificate');
    assert.match(ready.message, /Waiting for cert-manager to issue Certificate devawsk8s\/tenant-a-gateway/);

    const issued = await issue(cluster, 1);
    await reconcile();
    const tls = cluster.peek<V1Secret & KubeObject>(Kinds.Secret, 'gateway-tls', NS);
    assert.equal(decode(tls, 'tls.crt'), issued.cert);
    assert.equal(decode(tls, 'tls.key'), issued.key);
    assert.equal(decode(tls, 'ca.crt'), issuerCa().cert);
    assert.equal(cluster.peek(Kinds.Secret, 'gateway-ca', NS), undefined, 'no instance CA');
    assert.equal(cluster.peek<V1ConfigMap & KubeObject>(Kinds.ConfigMap, 'gateway-ca', NS)?.data?.['ca.crt'], issuerCa().cert);
    // An operator restarted reads the copy back once and finds every child as it wants it.
    const writes = cluster.writes.filter((w) => w.kind !== 'IoTService').length;
    await reconcile(iotReconciler(config));
    assert.equal(cluster.writes.filter((w) => w.kind !== 'IoTService').length, writes, 'no child written again');
    assert.equal(status().gateway?.tls?.caCertificate, issuerCa().cert);
    assert.equal(status().gateway?.tls?.notAfter, new Date(new X509Certificate(issued.cert).validTo).toISOString());
  });
});

describe('spec.gateway.tls.issuerRef validation', () => {
  it('takes an Issuer or ClusterIssuer by name, and nothing else', () => {
    for (const kind of ['Issuer', 'ClusterIssuer']) assert.ok(validateIoTServiceSpec({ version: '1', ...withIssuer(kind as 'Issuer', 'my-ca.example') }).ok, kind);
    for (const issuerRef of [{ kind: 'CertificateRequest', name: 'x' }, { kind: 'Issuer', name: 'My_CA' }, { kind: 'Issuer' }, { kind: 'Issuer', name: 'x', group: 'other.io' }]) {
      const result = validateIoTServiceSpec({ version: '1', gateway: { tls: { issuerRef } } });
      assert.ok(!result.ok, JSON.stringify(issuerRef));
      assert.match(result.errors.join(';'), /spec\.gateway\.tls\.issuerRef/);
    }
  });
});
