/**
 * The gateway's server certificate from cert-manager (spec.gateway.tls.issuerRef) on the local
 * cluster, against a real cert-manager (its controller, built from its Go module, run by cluster up
 * with CLUSTER_CERT_MANAGER=1; kwok nodes suffice, no pod needs to run a program). With a CA
 * ClusterIssuer and a namespaced CA Issuer, each holding a CA made here:
 * - the IoTService becomes Available; Secret gateway-tls holds a certificate signed by that CA,
 *   covering the gateway Service's names and cluster IP, with its key and the CA; ConfigMap
 *   gateway-ca and status.gateway.tls show that CA; the instance has no CA of its own; at rest a
 *   forced resync writes nothing;
 * - an IoTService naming an issuer that does not exist is Failed (CertificateNotReady, naming the
 *   issuer) with nothing created in its namespace, and becomes Available once the issuer exists;
 * - the Certificate deleted is written again, and cert-manager's next issue (its Secret deleted)
 *   reaches Secret gateway-tls;
 * - issuerRef removed: the Certificate and its Secret go, the instance CA signs again; the
 *   IoTService deleted: its Certificate and the Secret it was issued into go with it.
 * (cert-manager not installed is shown by cert-manager.unit.test.ts: its CRDs stay on the shared
 * cluster.)
 *
 *   CLUSTER_CERT_MANAGER=1 node scripts/run-tests.mjs e2e operators/iot/test/cert-manager
 */
import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import { Kinds, makeCertificateAuthority, type CertificateAuthority, type KubeObject, type Manager, type ResourceType } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { createLandscape, getIoT, getOrUndefined, iotService, iotTestEnv, startOperator, stopOperator, waitForPhase, writeRequests, type IoTObject } from './e2e-support.ts';
import { CertificateType, ClusterIssuerType, IoTServiceV1alpha1Type, IssuerType } from '../src/iotservice-types.ts';
import type { GatewayCertificate } from '../src/resources/index.ts';

process.env.CLUSTER_CERT_MANAGER = '1'; // cluster up (run by localTestEnv) starts cert-manager unless it runs

/** Where cert-manager (cluster/parts/cert-manager) finds the Secrets of ClusterIssuers. */
const CLUSTER_RESOURCE_NAMESPACE = 'cert-manager';

let env: TestEnv;
let landscape: string;
let mgr: Manager | undefined;
let clusterCa: CertificateAuthority;
let issuerCa: CertificateAuthority;
const clusterIssuers: string[] = [];

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
const text = (secret: V1Secret | undefined, key: string) => Buffer.from(secret?.data?.[key] ?? '', 'base64').toString('utf8');
const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;
const leafOf = (chain: string) => new X509Certificate(chain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)![0]);

/** A CA issuer of cert-manager: its key pair in a kubernetes.io/tls Secret, and the issuer naming it. */
async function caIssuer(type: ResourceType, name: string, ca: CertificateAuthority, namespace?: string): Promise<void> {
  const secretNamespace = namespace ?? CLUSTER_RESOURCE_NAMESPACE;
  await env.client.create(Kinds.Secret, { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: secretNamespace }, type: 'kubernetes.io/tls', data: { 'tls.crt': b64(ca.cert), 'tls.key': b64(ca.key) } });
  await env.client.create(type, { apiVersion: 'cert-manager.io/v1', kind: type.kind, metadata: { name, ...(namespace ? { namespace } : {}) }, spec: { ca: { secretName: name } } });
  if (!namespace) clusterIssuers.push(name);
}

async function createWithIssuer(name: string, kind: 'Issuer' | 'ClusterIssuer', issuer: string): Promise<void> {
  await env.client.create(IoTServiceV1alpha1Type, iotService(name, landscape, { gateway: { tls: { issuerRef: { kind, name: issuer } } } }));
}

/** What the instance's gateway is given: Secret gateway-tls and ConfigMap gateway-ca of its namespace. */
async function gatewayTls(name: string): Promise<{ namespace: string; tls: V1Secret | undefined; caConfigMap: V1ConfigMap | undefined }> {
  const namespace = `${landscape}-${name}`;
  const tls = await getOrUndefined<V1Secret & KubeObject>(env, Kinds.Secret, 'gateway-tls', namespace);
  const caConfigMap = await getOrUndefined<V1ConfigMap & KubeObject>(env, Kinds.ConfigMap, 'gateway-ca', namespace);
  return { namespace, tls, caConfigMap };
}

/** Checks what the instance shows devices: a certificate signed by `ca` for the gateway's names, with its key, and `ca` as the CA to trust. */
async function assertIssuedBy(name: string, ca: CertificateAuthority, iot: IoTObject): Promise<X509Certificate> {
  const { namespace, tls, caConfigMap } = await gatewayTls(name);
  const leaf = leafOf(text(tls, 'tls.crt'));
  const caCert = new X509Certificate(ca.cert);
  assert.ok(leaf.checkIssued(caCert) && leaf.verify(caCert.publicKey), `${name}: the server certificate is signed by the issuer's CA`);
  assert.ok(leaf.checkPrivateKey(createPrivateKey(text(tls, 'tls.key'))), `${name}: tls.key is the certificate's key`);
  for (const host of ['gateway', `gateway.${namespace}`, `gateway.${namespace}.svc`, `gateway.${namespace}.svc.cluster.local`]) assert.equal(leaf.checkHost(host, { wildcards: false }), host, `${name}: covers ${host}`);
  const service = await env.client.get<V1Service & KubeObject>(Kinds.Service, 'gateway', namespace);
  assert.equal(leaf.checkIP(service.spec!.clusterIP!), service.spec!.clusterIP, `${name}: covers the gateway Service's cluster IP`);
  assert.equal(fingerprint(text(tls, 'ca.crt')), caCert.fingerprint256, `${name}: gateway-tls's ca.crt is the issuer's CA`);
  assert.equal(fingerprint(caConfigMap?.data?.['ca.crt'] ?? ''), caCert.fingerprint256, `${name}: ConfigMap gateway-ca holds the issuer's CA`);
  assert.equal(fingerprint(iot.status?.gateway?.tls?.caCertificate ?? ''), caCert.fingerprint256, `${name}: status.gateway.tls shows the issuer's CA`);
  assert.equal(iot.status?.gateway?.tls?.notAfter, new Date(leaf.validTo).toISOString(), `${name}: status.gateway.tls.notAfter is the certificate's`);
  assert.equal(await getOrUndefined(env, Kinds.Secret, 'gateway-ca', namespace), undefined, `${name}: no instance CA`);
  return leaf;
}

const certificateOf = (name: string) => getOrUndefined<GatewayCertificate>(env, CertificateType, `${name}-gateway`, landscape);

before(async () => {
  env = await iotTestEnv();
  landscape = await createLandscape(env);
  [clusterCa, issuerCa] = [makeCertificateAuthority('cert-manager e2e cluster CA', 30), makeCertificateAuthority('cert-manager e2e issuer CA', 30)];
  await caIssuer(ClusterIssuerType, `${landscape}-ca`, clusterCa);
  await caIssuer(IssuerType, 'landscape-ca', issuerCa, landscape);
  mgr = await startOperator(env, landscape);
});

after(async () => {
  await stopOperator(env, landscape, mgr);
  for (const name of clusterIssuers) {
    await env.client.delete(ClusterIssuerType, name).catch(() => undefined);
    await env.client.delete(Kinds.Secret, name, CLUSTER_RESOURCE_NAMESPACE).catch(() => undefined);
  }
  await env?.cleanup();
});

describe("the gateway's certificate from cert-manager", () => {
  it('a CA ClusterIssuer: Available, Secret gateway-tls signed by its CA for the gateway’s names, the CA in ConfigMap gateway-ca and status', async () => {
    await createWithIssuer('by-cluster', 'ClusterIssuer', `${landscape}-ca`);
    const iot = await waitForPhase(env, landscape, 'by-cluster', 'Available');
    await assertIssuedBy('by-cluster', clusterCa, iot);
    const certificate = await certificateOf('by-cluster');
    assert.equal(certificate?.spec.issuerRef.kind, 'ClusterIssuer');
    assert.deepEqual(certificate?.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}/${o.uid}`), [`IoTService/by-cluster/${iot.metadata.uid}`], 'owned by the IoTService');
    assert.equal(certificate?.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');

    // At rest: a forced resync writes nothing, the Certificate included (cert-manager's writes to it are no difference).
    const reconciles = async () => (await mgr!.metrics.reconcileTotal.get()).values.reduce((sum, v) => sum + v.value, 0);
    const [writes, reconciled] = [await writeRequests(mgr!), await reconciles()];
    mgr!.resyncAll();
    await waitFor('the forced resync to reconcile', async () => ({ done: (await reconciles()) > reconciled, value: undefined }), { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await writeRequests(mgr!), writes, 'no POST/PUT/PATCH/DELETE during a resync of an unchanged instance');
  });

  it('a CA Issuer in the landscape: the same, signed by its CA', async () => {
    await createWithIssuer('by-issuer', 'Issuer', 'landscape-ca');
    const iot = await waitForPhase(env, landscape, 'by-issuer', 'Available');
    await assertIssuedBy('by-issuer', issuerCa, iot);
  });

  it('an issuer that does not exist: Failed, saying which, with nothing in the instance namespace; Available once it exists', async () => {
    const missing = `${landscape}-later`;
    await createWithIssuer('no-issuer', 'ClusterIssuer', missing);
    const failed = await waitForPhase(env, landscape, 'no-issuer', 'Failed');
    assert.match(failed.status?.reason ?? '', new RegExp(`^Certificate ${landscape}/no-issuer-gateway \\(spec\\.gateway\\.tls\\.issuerRef\\) is not ready: .*ClusterIssuer ${missing} does not exist`));
    assert.equal(failed.status?.conditions?.find((c) => c.type === 'Degraded')?.reason, 'CertificateNotReady');
    assert.equal(failed.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'False');
    assert.equal(await getOrUndefined(env, Kinds.Namespace, `${landscape}-no-issuer`), undefined, 'nothing written but the Certificate');
    await caIssuer(ClusterIssuerType, missing, clusterCa);
    const available = await waitForPhase(env, landscape, 'no-issuer', 'Available', 120_000);
    await assertIssuedBy('no-issuer', clusterCa, available);
  });

  it('the Certificate deleted is written again; a new issue by cert-manager reaches Secret gateway-tls', async () => {
    const before = await certificateOf('by-cluster');
    await env.client.delete(CertificateType, 'by-cluster-gateway', landscape);
    const again = await waitFor('the Certificate to be written again', async () => {
      const now = await certificateOf('by-cluster');
      return { done: !!now && now.metadata.uid !== before?.metadata.uid, value: now!, seen: now?.metadata };
    });
    assert.equal(again.spec.secretName, 'by-cluster-gateway-tls');

    const served = leafOf(text((await gatewayTls('by-cluster')).tls, 'tls.crt'));
    // cert-manager issues anew when the Secret it issued into is gone (as it does on renewal).
    await env.client.delete(Kinds.Secret, 'by-cluster-gateway-tls', landscape);
    const next = await waitFor('Secret gateway-tls to hold the certificate cert-manager issued next', async () => {
      const now = text((await gatewayTls('by-cluster')).tls, 'tls.crt');
      const leaf = now ? leafOf(now) : undefined;
      return { done: !!leaf && leaf.serialNumber !== served.serialNumber, value: leaf!, seen: leaf?.serialNumber ?? 'none' };
    }, { timeoutMs: 60_000 });
    const iot = await waitFor('the IoTService to be Available with the new certificate in its status', async () => {
      const now = await getIoT(env, landscape, 'by-cluster');
      const done = now?.status?.phase === 'Available' && now.status.gateway?.tls?.notAfter === new Date(next.validTo).toISOString();
      return { done, value: now!, seen: now?.status };
    });
    const renewed = await assertIssuedBy('by-cluster', clusterCa, iot);
    assert.equal(renewed.serialNumber, next.serialNumber);
  });

  it('issuerRef removed: the Certificate and its Secret go and the instance CA signs again; the IoTService deleted: its Certificate and Secret go with it', async () => {
    const iot = (await getIoT(env, landscape, 'by-issuer'))!;
    await env.client.patch(IoTServiceV1alpha1Type, 'by-issuer', landscape, { spec: { gateway: { tls: { issuerRef: null } } } }, 'merge');
    await waitFor('the Certificate and the Secret it was issued into to be gone', async () => {
      const [certificate, secret] = [await certificateOf('by-issuer'), await getOrUndefined(env, Kinds.Secret, 'by-issuer-gateway-tls', landscape)];
      return { done: !certificate && !secret, value: undefined, seen: { certificate: certificate?.metadata.name, secret: secret?.metadata.name } };
    });
    const own = await waitForPhase(env, landscape, 'by-issuer', 'Available');
    assert.ok((own.metadata.generation ?? 0) > (iot.metadata.generation ?? 0));
    const ownCa = await waitFor('the instance CA', async () => {
      const secret = await getOrUndefined<V1Secret & KubeObject>(env, Kinds.Secret, 'gateway-ca', `${landscape}-by-issuer`);
      return { done: !!secret, value: text(secret, 'ca.crt'), seen: secret?.metadata.name };
    });
    assert.equal(fingerprint(own.status?.gateway?.tls?.caCertificate ?? ''), fingerprint(ownCa), 'status.gateway.tls shows the instance CA');
    assert.notEqual(fingerprint(ownCa), fingerprint(issuerCa.cert));

    await env.client.delete(IoTServiceV1alpha1Type, 'no-issuer', landscape);
    await waitFor('IoTService no-issuer, its Certificate and the Secret it was issued into to be gone', async () => {
      const left = [await getIoT(env, landscape, 'no-issuer'), await certificateOf('no-issuer'), await getOrUndefined(env, Kinds.Secret, 'no-issuer-gateway-tls', landscape)];
      return { done: left.every((o) => !o), value: undefined, seen: left.map((o) => o?.metadata.name) };
    }, { timeoutMs: 120_000 });
  });
});
