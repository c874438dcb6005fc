// End-to-end tests of NetworkPolicy enforcement on the local cluster's real node
// (cluster/parts/network-policy: kube-router's firewall), with real packets between busybox pods
// of the node in namespaces of the test's own: a default-deny ingress policy stops another
// namespace's connections; an allow rule (namespace and pod selector, port) and an ipBlock rule
// admit exactly what they name; a port not listed stays closed; an egress policy stops a pod's own
// connections while the DNS it allows keeps resolving; Services and the API server stay reachable.
// Every address dialled is a pod or Service of the test, the kube-dns Service or the kubernetes
// Service. Reported as not run, with the reason, where a real node cannot run.
//
//   node --import tsx --test cluster/test/network-policy.e2e.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { busyboxImage, localTestEnv, onRealNode, realNode } from '../src/index.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;

type Pod = KubeObject & { status?: { podIP?: string; conditions?: Array<{ type: string; status: string }> } };

let kubectl = '';
let image = '';
let serverNs = '';
let clientNs = '';
let server = ''; // the server pod's IP: httpd on 8080 and 9090
let serverService = ''; // a ClusterIP Service in front of the server's 8080

// Listens on 8080 and 9090 and answers "ok" on both.
const serve = 'mkdir -p /tmp/www && echo ok >/tmp/www/index.html && httpd -p 9090 -h /tmp/www && exec httpd -f -p 8080 -h /tmp/www';

async function startPod(namespace: string, name: string, labels: Record<string, string>, script = 'exec sleep 3600'): Promise<string> {
  await env.client.create(Kinds.Pod, {
    metadata: { name, namespace, labels },
    spec: {
      ...onRealNode,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'c', image, imagePullPolicy: 'Never', command: ['/bin/sh', '-c', script] }],
    },
  });
  return waitFor(`pod ${namespace}/${name} to be Ready`, async () => {
    const p = (await env.client.get(Kinds.Pod, name, namespace)) as Pod;
    const ready = p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
    return { done: ready && !!p.status?.podIP, value: p.status?.podIP ?? '', seen: p.status };
  }, { timeoutMs: 90_000 });
}

/** Runs a shell command in a pod; its output, or undefined when it fails. */
async function inPod(namespace: string, pod: string, command: string): Promise<string | undefined> {
  try {
    return (await run(kubectl, ['--kubeconfig', env.kubeconfigPath, 'exec', '-n', namespace, pod, '--', '/bin/sh', '-c', command], { timeout: 20_000 })).stdout;
  } catch {
    return undefined;
  }
}

/** Whether an HTTP request from the pod to address:port is answered within 5 s (busybox 1.35's `wget -T` crashes: `timeout` bounds it). */
async function reaches(namespace: string, pod: string, address: string, port: number): Promise<boolean> {
  return (await inPod(namespace, pod, `timeout 5 wget -q -O- http://${address}:${port}/`))?.trim() === 'ok';
}

/** Waits until the connection's fate is `expected` (policies take effect within kube-router's sync). */
async function expectReach(namespace: string, pod: string, address: string, port: number, expected: boolean): Promise<void> {
  await waitFor(`${namespace}/${pod} → ${address}:${port} to be ${expected ? 'answered' : 'refused by policy'}`, async () => {
    const now = await reaches(namespace, pod, address, port);
    return { done: now === expected, value: undefined, seen: now };
  }, { timeoutMs: 45_000, intervalMs: 500 });
}

async function policy(namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await env.client.create(Kinds.NetworkPolicy, { metadata: { name, namespace }, spec });
}

before(async () => {
  if (skip) return;
  kubectl = path.join((await run('bash', ['cluster/engines/build.sh', 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
  image = await busyboxImage(env);
  serverNs = await env.namespace('np-server');
  clientNs = await env.namespace('np-client');
  [server] = await Promise.all([
    startPod(serverNs, 'server', { app: 'server' }, serve),
    startPod(serverNs, 'neighbour', { app: 'neighbour' }),
    startPod(clientNs, 'client', { role: 'client' }),
    startPod(clientNs, 'stranger', { role: 'stranger' }),
  ]);
  await env.client.create(Kinds.Service, { metadata: { name: 'server', namespace: serverNs }, spec: { selector: { app: 'server' }, ports: [{ port: 80, targetPort: 8080 }] } });
  serverService = ((await env.client.get(Kinds.Service, 'server', serverNs)) as KubeObject & { spec: { clusterIP: string } }).spec.clusterIP;
});
after(() => env.cleanup());

describe('NetworkPolicy on the real node', { skip }, () => {
  test('without a policy every pod reaches the server, through its Service too, and the API server through the kubernetes Service', async () => {
    for (const [ns, pod] of [[clientNs, 'client'], [clientNs, 'stranger'], [serverNs, 'neighbour']] as const) {
      assert.ok(await reaches(ns, pod, server, 8080), `${ns}/${pod} → server:8080`);
    }
    // A new Service answers once the node's kube-proxy has its endpoints: eventually, not at once.
    await expectReach(clientNs, 'client', serverService, 80, true);
    const api = await inPod(clientNs, 'client', 'timeout 5 wget -O- --no-check-certificate https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/version 2>&1; true');
    assert.match(api ?? '', /gitVersion|401|403/, `the API server answers through the kubernetes Service: ${api}`);
  });

  test('default-deny ingress stops connections from another namespace and from the same one', async () => {
    await policy(serverNs, 'default-deny', { podSelector: {}, policyTypes: ['Ingress'] });
    await expectReach(clientNs, 'client', server, 8080, false);
    await expectReach(serverNs, 'neighbour', server, 8080, false);
    assert.equal(await reaches(clientNs, 'client', serverService, 80), false, 'nor through the Service');
  });

  test('an allow rule admits the pods and the port it names, nothing else', async () => {
    await policy(serverNs, 'allow-client', {
      podSelector: { matchLabels: { app: 'server' } },
      policyTypes: ['Ingress'],
      ingress: [{
        from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': clientNs } }, podSelector: { matchLabels: { role: 'client' } } }],
        ports: [{ protocol: 'TCP', port: 8080 }],
      }],
    });
    await expectReach(clientNs, 'client', server, 8080, true);
    assert.ok(await reaches(clientNs, 'client', serverService, 80), 'and through the Service');
    assert.equal(await reaches(clientNs, 'client', server, 9090), false, 'port 9090 is not listed: closed');
    assert.equal(await reaches(clientNs, 'stranger', server, 8080), false, 'a pod of that namespace without the label');
    assert.equal(await reaches(serverNs, 'neighbour', server, 8080), false, 'a pod of another namespace than the one named');
  });

  test('an ipBlock rule admits its addresses on its port, and its except list stays out', async () => {
    const neighbour = ((await env.client.get(Kinds.Pod, 'neighbour', serverNs)) as Pod).status!.podIP!;
    const client = ((await env.client.get(Kinds.Pod, 'client', clientNs)) as Pod).status!.podIP!;
    await policy(serverNs, 'allow-block', {
      podSelector: { matchLabels: { app: 'server' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ ipBlock: { cidr: '10.244.0.0/24', except: [`${client}/32`] } }], ports: [{ protocol: 'TCP', port: 9090 }] }],
    });
    await expectReach(serverNs, 'neighbour', server, 9090, true);
    assert.equal(await reaches(clientNs, 'client', server, 9090), false, `the excepted ${client}/32`);
    assert.equal(await reaches(serverNs, 'neighbour', server, 8080), false, `${neighbour} on a port the block does not list`);
  });

  test('an egress policy stops a pod’s own connections; the DNS it allows still resolves', async () => {
    await expectReach(clientNs, 'client', server, 8080, true);
    const dns = await env.client.get(Kinds.Service, 'kube-dns', 'kube-system').catch(() => undefined);
    await policy(clientNs, 'egress-dns-only', {
      podSelector: { matchLabels: { role: 'client' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] }],
    });
    await expectReach(clientNs, 'client', server, 8080, false);
    assert.equal(await reaches(clientNs, 'client', serverService, 80), false, 'nor through the Service');
    assert.ok(await reaches(clientNs, 'stranger', server, 9090), 'a pod the egress policy does not select still connects (where the server’s ingress rules admit it)');
    assert.ok(dns, 'cluster DNS (Service kube-system/kube-dns) runs beside the real node');
    const answer = await waitFor('the client to resolve the server’s Service name', async () => {
      const out = await inPod(clientNs, 'client', `nslookup server.${serverNs}.svc.cluster.local`);
      return { done: out?.includes(serverService) === true, value: out, seen: out };
    }, { timeoutMs: 30_000, intervalMs: 1000 });
    assert.ok(answer?.includes(serverService));
  });
});
