/**
 * Devices over TLS on the real node: one IoTService of the reference images that lists no
 * protocols (so its gateway serves the default, mqtts and https only), with `gateway.tls.hostnames`
 * naming an outside DNS name and IP. What a user sees: the instance goes Available; status.gateway.tls.caCertificate is ConfigMap
 * gateway-ca's ca.crt; condition PlaintextProtocols is False; the gateway Service exposes
 * exactly 8883 and 8443 and nothing answers on 1883 or 8080; a device registered through core
 * publishes over MQTTS and HTTPS trusting only that CA (the certificate checked against the
 * Service's name and against a name of `tls.hostnames`) and its messages are read back from core;
 * a client that does not trust the CA, or checks another name, fails in the handshake; the
 * documented commands (`mosquitto_pub --cafile`, `curl --cacert` to the gateway Service's
 * address) deliver, and without the CA they fail; Secret
 * gateway-tls deleted is issued again by the same CA (Event GatewayCertificateIssued), served to
 * new connections, while a device connected before keeps publishing. The gateway's two pods hold
 * their limits: a wrong-password flood on one device id is cut short (CONNACK 3) while other
 * devices log in, a client id not the device's own is refused without disturbing its device, a
 * device connecting over and over is banned, and an MQTT packet announcing more than the cap is
 * closed before its body is read. Last, 1,000 devices connect at once over TLS and all get in
 * without giving up, and again after every gateway pod is deleted (their times to CONNACK logged;
 * the figures are bench/'s `fleet`).
 * The simulator on this machine dials the gateway's pod IP (as reference-service.e2e.test.ts
 * does, from the node's address on the pod bridge, a device source) and checks the certificate
 * against `servername`. Reported as not run where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import mqtt from 'mqtt';
import { Kinds, makeCertificateAuthority, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, realNode } from '@iot-operator/local-cluster';
import {
  connectFleet,
  mqttHeaderAnnouncing,
  postHttp,
  publishMqtt,
  readAllTelemetry,
  registerDevice,
  simulateDevice,
  startContinuousDevice,
  type ConnectRun,
  type DeviceCredentials,
  type ServiceAddresses,
} from '@iot-operator/iot-service/simulator';
import { apiToken, componentPod, iotService, realNodeSpec, startReferenceLandscape, stopServedLandscape, waitForPhase, type IoTObject } from './e2e-support.ts';
import type { Pod } from './chart-release.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const VERSION = '2.4.1';
const NAME = 'secure';
const OUTSIDE_NAME = 'iot.plant.example';
const OUTSIDE_IP = '203.0.113.7';
const MESSAGES = 5;
/** Devices of the fleet that connects at once. */
const FLEET = 1000;

type ConfigMap = KubeObject & { data?: Record<string, string> };
type Secret = KubeObject & { data?: Record<string, string> };
type Service = KubeObject & { spec: { ports?: { name?: string; port: number; protocol?: string }[] } };
type Event = KubeObject & { reason?: string; message?: string; involvedObject?: { name?: string }; lastTimestamp?: string; eventTime?: string; metadata: { creationTimestamp?: string } };

let landscape = '';
let mgr: Manager | undefined;
const run = promisify(execFile);

/** How a TCP connection to host:port ends within `timeoutMs`: 'connected', 'refused', 'no answer' or another error code. */
function dial(host: string, port: number, timeoutMs = 3_000): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('no answer');
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(error.code === 'ECONNREFUSED' ? 'refused' : (error.code ?? error.message));
    });
  });
}

/** The serial number of the certificate the gateway presents on host:port (not checked). */
function presentedSerial(host: string, port: number, servername: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host, port, servername, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().serialNumber);
      socket.end();
    });
    socket.once('error', reject);
  });
}

/** `count` devices registered through core, 8 at a time. */
async function registerMany(addresses: ServiceAddresses, count: number, prefix: string): Promise<DeviceCredentials[]> {
  const stamp = Date.now();
  const devices: DeviceCredentials[] = [];
  for (let i = 0; i < count; i += 8) {
    devices.push(...(await Promise.all(Array.from({ length: Math.min(8, count - i) }, (_, j) => registerDevice(addresses, `${prefix}-${stamp}-${i + j}`)))));
  }
  return devices;
}

/** Logs how long the devices of `runs` took to their CONNACK (p50, p99, max) and how many attempts they made. */
/** How the attempts of `runs` failed, by kind (connack-3, timeout, ...). */
function failuresOf(runs: readonly ConnectRun[]): Record<string, number> {
  const failures: Record<string, number> = {};
  for (const run of runs) for (const [kind, n] of Object.entries(run.failures)) failures[kind] = (failures[kind] ?? 0) + n;
  return failures;
}

function logFleet(what: string, runs: readonly ConnectRun[]): void {
  const times = runs.map((run) => run.connectedAt! - run.startedAt).sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)];
  const failures = failuresOf(runs);
  console.log(`device TLS: ${runs.length} devices ${what}: time to CONNACK p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${times.at(-1)} ms; attempts ${runs.reduce((sum, run) => sum + run.attempts, 0)}; refused ${JSON.stringify(failures)}`);
}

const decode = (secret: Secret, key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');

describe('devices over TLS on the real node', { skip }, () => {
  let namespace = '';
  let gatewayIp = '';
  let caCertificate = '';
  let available: IoTObject;
  /** The gateway dialled by pod IP over TLS, its certificate checked against the Service's name. */
  let addresses: ServiceAddresses;

  before(async () => {
    ({ landscape, mgr } = await startReferenceLandscape(env, VERSION));
    await env.client.create(IoTServiceV1alpha1Type, iotService(NAME, landscape, realNodeSpec({ gateway: { replicas: 2, tls: { hostnames: [OUTSIDE_NAME, OUTSIDE_IP] } } })));
    const applied = Date.now();
    available = await waitForPhase(env, landscape, NAME, 'Available', 300_000);
    console.log(`device TLS: apply → Available ${Date.now() - applied} ms`);
    namespace = `${landscape}-${NAME}`;
    const configMap = await env.client.get<ConfigMap>(Kinds.ConfigMap, 'gateway-ca', namespace);
    caCertificate = configMap.data?.['ca.crt'] ?? '';
    const [gateway, core] = [await componentPod(env, namespace, 'gateway'), await componentPod(env, namespace, 'core')];
    gatewayIp = gateway.ip;
    addresses = {
      coreUrl: `http://${core.ip}:8080`,
      gatewayMqttUrl: `mqtts://${gateway.ip}:8883`,
      gatewayHttpUrl: `https://${gateway.ip}:8443`,
      apiToken: await apiToken(env, namespace),
      gatewayTls: { ca: caCertificate, servername: `gateway.${namespace}.svc` },
    };
  });

  after(() => stopServedLandscape({ env, landscape, mgr }));

  it('goes Available; status.gateway.tls.caCertificate is ConfigMap gateway-ca’s ca.crt; PlaintextProtocols is False', () => {
    assert.match(caCertificate, /-----BEGIN CERTIFICATE-----/, 'ConfigMap gateway-ca holds ca.crt');
    const tls = available.status?.gateway?.tls;
    assert.equal(tls?.caCertificate, caCertificate);
    assert.ok(tls?.notAfter && Date.parse(tls.notAfter) > Date.now() + 60 * 24 * 3600_000, `the server certificate is valid for months: ${tls?.notAfter}`);
    const plaintext = available.status?.conditions?.find((c) => c.type === 'PlaintextProtocols');
    assert.equal(plaintext?.status, 'False', JSON.stringify(plaintext));
  });

  it('the gateway Service exposes exactly 8883 and 8443; nothing answers on 1883 or 8080', async () => {
    const service = await env.client.get<Service>(Kinds.Service, 'gateway', namespace);
    assert.deepEqual(
      (service.spec.ports ?? []).map((p) => [p.port, p.protocol ?? 'TCP']).sort(),
      [
        [8443, 'TCP'],
        [8883, 'TCP'],
      ],
    );
    for (const port of [1883, 8080]) assert.notEqual(await dial(gatewayIp, port), 'connected', `plaintext port ${port} of the gateway pod`);
    assert.equal(await dial(gatewayIp, 8883), 'connected', 'while 8883 answers');
  });

  it('a device registered through core publishes over MQTTS and HTTPS trusting only the instance CA; its messages are read back from core', async () => {
    const report = await simulateDevice(addresses, { messages: MESSAGES, timeoutMs: 60_000 });
    console.log(`device TLS: ${report.sent.total} sent over mqtts and https, ${report.stored} stored in ${report.elapsedMs} ms`);
    assert.deepEqual(report.sent, { mqtt: MESSAGES, http: MESSAGES, total: 2 * MESSAGES });
    assert.equal(report.stored, 2 * MESSAGES);

    // The certificate also covers the names of spec.gateway.tls.hostnames.
    const device = await registerDevice(addresses, `outside-${Date.now()}`);
    for (const servername of [OUTSIDE_NAME, `gateway.${namespace}.svc.cluster.local`]) {
      await publishMqtt(addresses.gatewayMqttUrl, device, [{ servername }], undefined, { ca: caCertificate, servername });
      await postHttp(addresses.gatewayHttpUrl, device, { servername }, undefined, { ca: caCertificate, servername });
    }
    const stored = await waitFor(
      `the 4 messages of ${device.id} in core`,
      async () => {
        const records = await readAllTelemetry(addresses, device.id);
        return { done: records.length === 4, value: records, seen: records.length };
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    assert.deepEqual(stored.map((r) => (r.payload as { servername: string }).servername).sort(), [OUTSIDE_NAME, OUTSIDE_NAME, `gateway.${namespace}.svc.cluster.local`, `gateway.${namespace}.svc.cluster.local`].sort());
    const leaf = new X509Certificate(await new Promise<Buffer>((resolve, reject) => {
      const socket = tlsConnect({ host: gatewayIp, port: 8443, servername: OUTSIDE_NAME, ca: caCertificate }, () => {
        resolve(socket.getPeerCertificate().raw);
        socket.end();
      });
      socket.once('error', reject);
    }));
    assert.ok(leaf.checkIP(OUTSIDE_IP), `the certificate covers ${OUTSIDE_IP}: ${leaf.subjectAltName}`);
  });

  it('a client that does not trust the instance CA, or checks a name the certificate lacks, fails in the handshake', async () => {
    const device = await registerDevice(addresses, `untrusting-${Date.now()}`);
    const stranger = makeCertificateAuthority('stranger CA', 1).cert;
    const servername = `gateway.${namespace}.svc`;
    const untrusted = /self[- ]signed|unable to (verify|get)|UNABLE_TO|SELF_SIGNED/i;
    for (const [tls, expected] of [
      [{ servername }, untrusted], // Node's default CAs
      [{ ca: stranger, servername }, untrusted],
      [{ ca: caCertificate, servername: 'gateway.elsewhere.svc' }, /altnames|ERR_TLS_CERT_ALTNAME_INVALID/i],
    ] as const) {
      await assert.rejects(publishMqtt(addresses.gatewayMqttUrl, device, [{ n: 1 }], undefined, tls), expected, `MQTTS with ${JSON.stringify({ ...tls, ca: tls.ca && 'stranger' })}`);
      await assert.rejects(postHttp(addresses.gatewayHttpUrl, device, { n: 1 }, undefined, tls), expected, `HTTPS with ${JSON.stringify({ ...tls, ca: tls.ca && 'stranger' })}`);
    }
    assert.deepEqual(await readAllTelemetry(addresses, device.id), [], 'nothing of the refused device stored');
  });

  it('the documented commands: mosquitto_pub --cafile and curl --cacert to the gateway Service deliver; without the CA they fail', async () => {
    const service = await env.client.get<Service & { spec: { clusterIP: string } }>(Kinds.Service, 'gateway', namespace);
    const address = service.spec.clusterIP;
    const device = await registerDevice(addresses, `documented-${Date.now()}`);
    const scratch = await mkdtemp(path.join(tmpdir(), 'device-tls-'));
    try {
      const [caFile, strangerFile] = [path.join(scratch, 'gateway-ca.crt'), path.join(scratch, 'stranger.crt')];
      await writeFile(caFile, caCertificate);
      await writeFile(strangerFile, makeCertificateAuthority('stranger CA', 1).cert);
      const mosquittoPub = (trust: readonly string[], n: number) =>
        run('mosquitto_pub', ['-h', address, '-p', '8883', ...trust, '-i', device.id, '-u', device.id, '-P', device.password, '-q', '1', '-t', `telemetry/${device.id}`, '-m', JSON.stringify({ via: 'mosquitto_pub', n })], { timeout: 20_000 });
      const curl = (trust: readonly string[], n: number) =>
        run('curl', ['-sS', '--fail', ...trust, '-u', `${device.id}:${device.password}`, '-H', 'Content-Type: application/json', '-H', `Message-Id: curl-${n}`, '-d', JSON.stringify({ via: 'curl', n }), `https://${address}:8443/v1/telemetry`], { timeout: 20_000 });
      await mosquittoPub(['--cafile', caFile], 1);
      await curl(['--cacert', caFile], 1);
      for (const trust of [[], ['--cafile', strangerFile]]) await assert.rejects(mosquittoPub(trust, 2), `mosquitto_pub ${trust.join(' ') || 'without --cafile'} fails`);
      for (const trust of [[], ['--cacert', strangerFile]]) await assert.rejects(curl(trust, 2), /SSL certificate|self[- ]signed|unable to get local issuer/i, `curl ${trust.join(' ') || 'without --cacert'} fails`);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
    const stored = await waitFor(
      `the two messages of ${device.id} in core`,
      async () => {
        const records = await readAllTelemetry(addresses, device.id);
        return { done: records.length >= 2, value: records, seen: records.length };
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    assert.deepEqual(stored.map((r) => (r.payload as { via: string; n: number })).sort((a, b) => a.via.localeCompare(b.via)), [{ via: 'curl', n: 1 }, { via: 'mosquitto_pub', n: 1 }], 'only what was sent trusting the instance CA');
  });

  it('Secret gateway-tls deleted: issued again by the same CA (Event GatewayCertificateIssued) and served, while a device connected before keeps publishing', async () => {
    const before = await env.client.get<Secret>(Kinds.Secret, 'gateway-tls', namespace);
    const oldLeaf = new X509Certificate(decode(before, 'tls.crt'));
    const device = startContinuousDevice(addresses, await registerDevice(addresses, `steady-${Date.now()}`), { intervalMs: 200 });
    try {
      await waitFor('the device to have published', async () => ({ done: device.messages.filter((m) => m.ackedAt).length >= 4, value: undefined, seen: device.messages.length }), { timeoutMs: 30_000 });
      const deletedAt = Date.now();
      await env.client.delete(Kinds.Secret, 'gateway-tls', namespace);

      const recreated = await waitFor(
        'Secret gateway-tls to be made again',
        async () => {
          const secret = await env.client.get<Secret>(Kinds.Secret, 'gateway-tls', namespace).catch(() => undefined);
          const fresh = !!secret && secret.metadata.uid !== before.metadata.uid;
          return { done: fresh, value: secret!, seen: secret?.metadata.uid ?? 'absent' };
        },
        { timeoutMs: 60_000, intervalMs: 300 },
      );
      console.log(`device TLS: gateway-tls made again ${Date.now() - deletedAt} ms after its deletion`);
      assert.equal(decode(recreated, 'ca.crt'), caCertificate, 'the same CA');
      const leaf = new X509Certificate(decode(recreated, 'tls.crt'));
      assert.notEqual(leaf.serialNumber, oldLeaf.serialNumber, 'a new server certificate');
      assert.ok(leaf.verify(new X509Certificate(caCertificate).publicKey), 'signed by the instance CA');
      assert.equal((await env.client.get<ConfigMap>(Kinds.ConfigMap, 'gateway-ca', namespace)).data?.['ca.crt'], caCertificate, 'ConfigMap gateway-ca unchanged');

      await waitFor(
        'Event GatewayCertificateIssued after the deletion',
        async () => {
          const events = (await env.client.list<Event>(Kinds.Event, { namespace: landscape })).items.filter(
            (e) => e.reason === 'GatewayCertificateIssued' && e.involvedObject?.name === NAME && /Secret gateway-tls was deleted/.test(e.message ?? ''),
          );
          const after = events.filter((e) => Date.parse(e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? '') >= Math.floor(deletedAt / 1000) * 1000);
          return { done: after.length > 0, value: undefined, seen: events.map((e) => [e.lastTimestamp, e.message]) };
        },
        { timeoutMs: 30_000, intervalMs: 500 },
      );

      // The kubelet brings the new Secret into the gateway's volume (within its sync period); the gateway then serves it to new connections.
      const servedAt = await waitFor(
        'the gateway to present the new certificate',
        async () => {
          const serial = await presentedSerial(gatewayIp, 8883, `gateway.${namespace}.svc`).catch((e: Error) => e.message);
          return { done: serial.toUpperCase() === leaf.serialNumber.toUpperCase(), value: Date.now(), seen: { presented: serial, issued: leaf.serialNumber } };
        },
        { timeoutMs: 180_000, intervalMs: 1_000 },
      );
      console.log(`device TLS: the new certificate served ${servedAt - deletedAt} ms after the deletion`);
      const fresh = await registerDevice(addresses, `after-${Date.now()}`);
      await publishMqtt(addresses.gatewayMqttUrl, fresh, [{ after: 'reissue' }], undefined, addresses.gatewayTls);
      await postHttp(addresses.gatewayHttpUrl, fresh, { after: 'reissue' }, undefined, addresses.gatewayTls);

      const ackedBefore = device.messages.filter((m) => m.ackedAt !== undefined && m.ackedAt <= servedAt && m.via === 'mqtt').length;
      await waitFor(
        'the device connected before to publish over MQTTS after the new certificate',
        async () => {
          const since = device.messages.filter((m) => m.via === 'mqtt' && m.ackedAt !== undefined && m.ackedAt > servedAt).length;
          return { done: since >= 3, value: undefined, seen: { since, ackedBefore } };
        },
        { timeoutMs: 30_000 },
      );
    } finally {
      await device.stop(60_000).catch(() => undefined);
    }
    const mqttFailures = device.failures.filter((f) => f.via === 'mqtt');
    assert.deepEqual(mqttFailures, [], 'the MQTTS connection made before stayed up throughout');
    const sent = new Set(device.messages.map((m) => m.messageId));
    const stored = await waitFor(
      `every message of ${device.deviceId} in core`,
      async () => {
        const records = await readAllTelemetry(addresses, device.deviceId);
        return { done: records.length >= sent.size, value: records, seen: { stored: records.length, sent: sent.size } };
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    assert.deepEqual(new Set(stored.map((r) => r.messageId)), sent);
  });
  it('the gateway pods hold their limits: a password flood, a borrowed client id, a device that reconnects over and over, an oversized packet', async () => {
    const tls = { ca: caCertificate, servername: `gateway.${namespace}.svc` };
    const service = (await env.client.get<Service & { spec: { clusterIP: string } }>(Kinds.Service, 'gateway', namespace)).spec.clusterIP;
    const known = await registerDevice(addresses, `known-${Date.now()}`);
    const others = await registerMany(addresses, 20, 'others');

    // A flood of wrong passwords for one known id, while 20 other devices log in through the Service.
    const outcomes: Record<string, number> = {};
    const flooding = (async () => {
      for (let i = 0; i < 40; i++) {
        const outcome = await publishMqtt(`mqtts://${service}:8883`, { id: known.id, password: `guess-${i}` }, [], undefined, { ca: caCertificate }).then(
          () => 'admitted',
          (error: Error) => (/Bad username or password/.test(error.message) ? 'bad credentials' : /Server unavailable/.test(error.message) ? 'come back later' : error.message),
        );
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      }
    })();
    const crowd = connectFleet(`mqtts://${service}:8883`, others, { tls: { ca: caCertificate }, keep: false });
    await flooding;
    await waitFor('the 20 other devices connected', async () => ({ done: crowd.connected() === 20, value: undefined, seen: crowd.connected() }), { timeoutMs: 60_000 });
    await crowd.close();
    console.log(`device TLS: a flood of 40 wrong passwords for ${known.id}: ${JSON.stringify(outcomes)}`);
    assert.equal(outcomes['admitted'], undefined, 'no guess admitted');
    assert.ok((outcomes['come back later'] ?? 0) >= 20, `after a few wrong passwords the id is refused without a check (CONNACK 3): ${JSON.stringify(outcomes)}`);
    assert.deepEqual(crowd.runs().map((runs) => runs.length === 1 && runs[0]!.connectedAt !== undefined), others.map(() => true), 'every other device got in');

    // A client id that is not the device's own: refused, and the device it names stays connected.
    const victim = connectFleet(`mqtts://${gatewayIp}:8883`, [known], { tls, keep: false });
    try {
      await waitFor(`${known.id} connected`, async () => ({ done: victim.connected() === 1, value: undefined, seen: victim.runs() }), { timeoutMs: 60_000 });
      const impostor = others[0]!;
      await assert.rejects(
        mqtt.connectAsync(`mqtts://${gatewayIp}:8883`, { clientId: known.id, username: impostor.id, password: impostor.password, reconnectPeriod: 0, ...tls }),
        /Not authorized/,
        'a device logging in with another device id as its client id',
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(victim.connected(), 1, 'the device whose id was borrowed stays connected');
    } finally {
      await victim.close();
    }

    // A device that connects over and over to one gateway pod is banned there for a while.
    const flapper = others[1]!;
    const refusals: string[] = [];
    for (let i = 0; i < 25 && refusals.length === 0; i++) {
      await publishMqtt(`mqtts://${gatewayIp}:8883`, flapper, [], undefined, tls).catch((error: Error) => refusals.push(error.message));
    }
    assert.match(refusals[0] ?? 'never refused', /Server unavailable/, 'banned after connecting too often (CONNACK 3)');

    // A CONNECT announcing a 200 MiB body: the connection is closed before the body is sent.
    const closedAfter = await new Promise<number>((resolve, reject) => {
      const socket = tlsConnect({ host: gatewayIp, port: 8883, ...tls }, () => {
        const started = Date.now();
        socket.write(mqttHeaderAnnouncing(200 * 1024 * 1024));
        socket.once('close', () => resolve(Date.now() - started));
      });
      socket.on('error', () => undefined);
      socket.setTimeout(20_000, () => reject(new Error('the gateway kept a connection announcing 200 MiB open for 20 s')));
    });
    console.log(`device TLS: a CONNECT announcing 200 MiB closed after ${closedAfter} ms`);
  });

  it(`${FLEET} devices connecting at once over TLS all get in, and again after every gateway pod is deleted`, async () => {
    const service = (await env.client.get<Service & { spec: { clusterIP: string } }>(Kinds.Service, 'gateway', namespace)).spec.clusterIP;
    const registering = Date.now();
    const devices = await registerMany(addresses, FLEET, 'fleet');
    console.log(`device TLS: ${FLEET} devices registered in ${Date.now() - registering} ms`);
    const fleet = connectFleet(`mqtts://${service}:8883`, devices, { tls: { ca: caCertificate } });
    const gaveUp = () => fleet.runs().filter((runs) => runs.some((run) => run.failures['connack-4'] || run.failures['connack-5'])).length;
    try {
      // What a failure shows: how the devices' attempts failed, and the gateway pods' state.
      const state = async () => ({
        connected: fleet.connected(),
        gaveUp: gaveUp(),
        failures: failuresOf(fleet.runs().flat()),
        gateways: (await env.client.list<Pod>(Kinds.Pod, { namespace, labelSelector: 'app.kubernetes.io/component=gateway' })).items.map((pod) => ({
          name: pod.metadata.name,
          phase: pod.status?.phase,
          restarts: pod.status?.containerStatuses?.map((c) => `${c.restartCount}${c.lastState?.terminated ? ` (${c.lastState.terminated.reason})` : ''}`),
        })),
      });
      await waitFor(`all ${FLEET} devices connected`, async () => ({ done: fleet.connected() === FLEET, value: undefined, seen: await state() }), { timeoutMs: 240_000, intervalMs: 1_000 });
      logFleet('connecting at once', fleet.runs().map((runs) => runs[0]!));

      const { items: pods } = await env.client.list<KubeObject>(Kinds.Pod, { namespace, labelSelector: 'app.kubernetes.io/component=gateway' });
      assert.equal(pods.length, 2, 'two gateway pods');
      const deletedAt = Date.now();
      await Promise.all(pods.map((pod) => env.client.delete(Kinds.Pod, pod.metadata.name!, namespace)));
      const reconnected = () => fleet.runs().map((runs) => runs.at(-1)!).filter((run) => run.startedAt >= deletedAt && run.connectedAt !== undefined);
      await waitFor(
        `all ${FLEET} devices connected again`,
        async () => ({ done: fleet.connected() === FLEET && reconnected().length === FLEET, value: undefined, seen: { reconnected: reconnected().length, ...(await state()) } }),
        { timeoutMs: 300_000, intervalMs: 1_000 },
      );
      logFleet(`reconnecting after the gateway pods were deleted (all in ${Math.max(...reconnected().map((run) => run.connectedAt!)) - deletedAt} ms)`, reconnected());
      assert.equal(gaveUp(), 0, 'no device was refused for good');
    } finally {
      await fleet.close();
    }
  });
});
