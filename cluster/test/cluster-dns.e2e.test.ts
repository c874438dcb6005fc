// End-to-end tests of the real node's cluster DNS (cluster/parts/dns): pods of the real
// node resolve and connect to a Service by its full name, by <svc>.<ns>.svc and by its short name
// through their search path, to a StatefulSet pod by its name under a headless Service, and to the
// API server as `kubernetes.default`; a name outside the cluster domain gets NXDOMAIN at once (no
// query goes further); CoreDNS answers from a kube-system pod on port 53, behind the kube-dns
// Service at the address the kubelet hands pods, so a pod whose egress admits only DNS to
// kube-system on port 53 still resolves. Reported as not run, with the reason, where a
// real node cannot run.
//
//   node --import tsx --test cluster/test/cluster-dns.e2e.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { busyboxImage, localTestEnv, onRealNode, realNode, REAL_NODE_NAME } from '../src/index.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const CLUSTER_DNS_IP = '10.96.0.10';
let image = '';
let namespace = '';

type Pod = KubeObject & {
  spec: { nodeName?: string; containers: Array<{ ports?: Array<{ containerPort: number; protocol?: string }> }> };
  status?: { phase?: string; podIP?: string; containerStatuses?: Array<{ ready?: boolean }> };
};

async function podLogs(name: string): Promise<string> {
  const kubectl = path.join((await run('bash', ['cluster/engines/build.sh', 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
  return (await run(kubectl, ['--kubeconfig', env.kubeconfigPath, 'logs', '-n', namespace, name])).stdout;
}

/** Runs SCRIPT in a busybox pod on the real node (dnsPolicy ClusterFirst, the default), labelled LABELS, and returns its output. */
async function probe(name: string, script: string, labels: Record<string, string> = {}): Promise<string> {
  await env.client.create(Kinds.Pod, {
    metadata: { name, namespace, labels },
    spec: { ...onRealNode, restartPolicy: 'Never', containers: [{ name: 'probe', image, imagePullPolicy: 'Never', command: ['/bin/sh', '-c', script] }] },
  });
  await waitFor(`probe pod ${name} to finish`, async () => {
    const p = (await env.client.get(Kinds.Pod, name, namespace)) as Pod;
    return { done: p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed', value: p, seen: p.status };
  }, { timeoutMs: 120_000 });
  return podLogs(name);
}

/**
 * A shell line that fetches URL with wget (which names the address it connects to), up to 20 times
 * a second apart, and prints its output with LABEL: before each line (`timeout`: busybox 1.35's
 * `wget -T` crashes).
 */
const fetchAs = (label: string, url: string) =>
  `for i in $(seq 20); do out=$(timeout 5 wget -O- ${url} 2>&1) && break; sleep 1; done; echo "$out" | sed "s/^/${label}: /"`;

/** A printf format of a DNS query (length-prefixed, as over TCP) for NAME's A record. */
function dnsTcpQuery(name: string): string {
  const labels = name.split('.').flatMap((label) => [label.length, ...Buffer.from(label)]);
  const message = [0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, ...labels, 0, 0, 1, 0, 1];
  return [message.length >> 8, message.length & 255, ...message].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

before(async () => {
  if (skip) return;
  image = await busyboxImage(env);
  namespace = await env.namespace('cluster-dns');
  // A StatefulSet `web` whose pods serve their own name over HTTP, under the headless Service `web`
  // (pod names) and the ClusterIP Service `hello` (a Service address).
  const labels = { app: 'web' };
  await env.client.create(Kinds.Service, { metadata: { name: 'web', namespace }, spec: { clusterIP: 'None', selector: labels, ports: [{ name: 'http', port: 8080 }] } });
  await env.client.create(Kinds.Service, { metadata: { name: 'hello', namespace }, spec: { selector: labels, ports: [{ name: 'http', port: 80, targetPort: 8080 }] } });
  await env.client.create(Kinds.StatefulSet, {
    metadata: { name: 'web', namespace },
    spec: {
      serviceName: 'web',
      replicas: 1,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          ...onRealNode,
          containers: [{
            name: 'httpd',
            image,
            imagePullPolicy: 'Never',
            command: ['/bin/sh', '-c', 'mkdir -p /tmp/www && echo "served by $(hostname)" >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www'],
            ports: [{ containerPort: 8080 }],
            readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
          }],
        },
      },
    },
  });
  await waitFor('web-0 to be ready', async () => {
    const p = (await env.client.get(Kinds.Pod, 'web-0', namespace)) as Pod;
    return { done: p.status?.containerStatuses?.[0]?.ready === true, value: p, seen: p.status };
  }, { timeoutMs: 120_000 });
});
after(() => env.cleanup());

describe('cluster DNS on the real node', { skip }, () => {
  test('CoreDNS answers from a kube-system pod on the real node, port 53, behind kube-dns at the address pods are given', async () => {
    const service = (await env.client.get(Kinds.Service, 'kube-dns', 'kube-system')) as KubeObject & { spec: { clusterIP: string; ports: Array<{ port: number; protocol: string }> } };
    assert.equal(service.spec.clusterIP, CLUSTER_DNS_IP);
    assert.deepEqual(service.spec.ports.filter((p) => p.port === 53).map((p) => p.protocol).sort(), ['TCP', 'UDP']);
    const pods = (await env.client.list(Kinds.Pod, { namespace: 'kube-system', labelSelector: 'k8s-app=kube-dns' })).items as Pod[];
    // A pod of an earlier rollout may still be terminating.
    const serving = pods.filter((p) => p.status?.containerStatuses?.[0]?.ready && !p.metadata.deletionTimestamp);
    assert.equal(serving.length, 1, `one ready CoreDNS pod not being deleted: ${JSON.stringify(pods.map((p) => [p.metadata.name, p.status]))}`);
    assert.equal(serving[0]!.spec.nodeName, REAL_NODE_NAME);
    assert.deepEqual(serving[0]!.spec.containers[0]!.ports?.filter((p) => p.containerPort === 53).map((p) => p.protocol).sort(), ['TCP', 'UDP']);
    const resolvConf = await probe('resolv-conf', 'cat /etc/resolv.conf');
    assert.match(resolvConf, new RegExp(`^nameserver ${escape(CLUSTER_DNS_IP)}$`, 'm'));
    assert.match(resolvConf, new RegExp(`^search ${namespace}\\.svc\\.cluster\\.local svc\\.cluster\\.local cluster\\.local$`, 'm'));
  });

  test('a pod resolves a Service and connects to it by its full name, by <svc>.<ns>.svc and by its short name', async () => {
    const hello = (await env.client.get(Kinds.Service, 'hello', namespace)) as KubeObject & { spec: { clusterIP: string } };
    const names = { fqdn: `hello.${namespace}.svc.cluster.local`, svc: `hello.${namespace}.svc`, short: 'hello' };
    const logs = await probe('by-service', Object.entries(names).map(([label, name]) => fetchAs(label, `http://${name}/`)).join('\n'));
    for (const [label, name] of Object.entries(names)) {
      assert.match(logs, new RegExp(`^${label}: Connecting to ${escape(name)} \\(${escape(hello.spec.clusterIP)}:80\\)$`, 'm'), `${name} is the Service's address: ${logs}`);
      assert.match(logs, new RegExp(`^${label}: served by web-0$`, 'm'), logs);
    }
  });

  test('a pod reaches a StatefulSet pod by its name through the headless Service', async () => {
    const web0 = (await env.client.get(Kinds.Pod, 'web-0', namespace)) as Pod;
    const names = { pod: `web-0.web.${namespace}.svc.cluster.local`, 'pod-short': 'web-0.web' };
    const logs = await probe('by-pod-name', Object.entries(names).map(([label, name]) => fetchAs(label, `http://${name}:8080/`)).join('\n'));
    for (const [label, name] of Object.entries(names)) {
      assert.match(logs, new RegExp(`^${label}: Connecting to ${escape(name)}:8080 \\(${escape(web0.status!.podIP!)}:8080\\)$`, 'm'), `${name} is the pod's own address: ${logs}`);
      assert.match(logs, new RegExp(`^${label}: served by web-0$`, 'm'), logs);
    }
  });

  test('kubernetes.default resolves through the search path to the API server, which answers there', async () => {
    const kubernetes = (await env.client.get(Kinds.Service, 'kubernetes', 'default')) as KubeObject & { spec: { clusterIP: string } };
    // Without a token: its version where anonymous requests may read it, else 401 or 403; an answer is all this needs.
    const logs = await probe('kubernetes-default', 'timeout 5 wget --no-check-certificate -O- https://kubernetes.default/version 2>&1 | sed "s/^/api: /"');
    assert.match(logs, new RegExp(`^api: Connecting to kubernetes\\.default \\(${escape(kubernetes.spec.clusterIP)}:443\\)$`, 'm'), logs);
    assert.match(logs, /^api: .*("gitVersion"|401|403)/m, `the API server answered at kubernetes.default: ${logs}`);
  });

  test('a pod whose egress is denied but for DNS to kube-system on port 53 (the IoT operator\'s rule) resolves names, and connects nowhere else', async () => {
    const web0 = (await env.client.get(Kinds.Pod, 'web-0', namespace)) as Pod;
    // The rule of operators/iot/src/resources/network-policies.ts (instance-egress) and nothing else.
    await env.client.create(Kinds.NetworkPolicy, {
      metadata: { name: 'dns-only', namespace },
      spec: {
        podSelector: { matchLabels: { egress: 'dns-only' } },
        policyTypes: ['Egress'],
        egress: [{ to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] }],
      },
    });
    const logs = await probe('dns-only', [
      // The firewall takes the new policy in a moment: the questions are asked once it holds.
      'for i in $(seq 30); do timeout 3 wget -O- http://hello/ >/dev/null 2>&1 || break; sleep 1; done',
      'timeout 3 wget -O- http://hello/ >/dev/null 2>&1 && echo "http: connected" || echo "http: blocked"',
      `nslookup web-0.web.${namespace}.svc.cluster.local | sed -n '/^Name:/,$ s/^Address: /udp: /p'`,
      // The same question over TCP (a truncated answer's retry; busybox's nslookup asks over UDP only).
      `printf '${dnsTcpQuery(`web-0.web.${namespace}.svc.cluster.local`)}' | nc -w 3 ${CLUSTER_DNS_IP} 53 | od -An -tx1 | tr -d ' \\n' | sed 's/^/tcp: /'; echo`,
    ].join('\n'), { egress: 'dns-only' });
    assert.match(logs, new RegExp(`^udp: ${escape(web0.status!.podIP!)}$`, 'm'), logs);
    const tcp = /^tcp: ([0-9a-f]*)$/m.exec(logs)?.[1] ?? '';
    assert.ok(tcp.endsWith(web0.status!.podIP!.split('.').map((b) => Number(b).toString(16).padStart(2, '0')).join('')), `an answer over TCP ending in the pod's address: ${logs}`);
    assert.match(logs, /^http: blocked$/m, `the policy holds for this pod: ${logs}`);
  });

  test('a name outside the cluster domain gets NXDOMAIN at once: nothing is forwarded', async () => {
    const logs = await probe('outside', [
      'start=$(date +%s)',
      'nslookup registry.npmjs.org 2>&1 | sed "s/^/lookup: /"',
      'timeout 5 wget -q -O- http://registry.npmjs.org/ 2>&1 | sed "s/^/wget: /"',
      'echo "seconds: $(( $(date +%s) - start ))"',
    ].join('\n'));
    assert.match(logs, /^lookup: .*can't find registry\.npmjs\.org.*NXDOMAIN/m, `the cluster DNS answered NXDOMAIN: ${logs}`);
    assert.doesNotMatch(logs, /^lookup: Address: /m, logs);
    assert.match(logs, /^wget: .*bad address 'registry\.npmjs\.org'/m, logs);
    const seconds = Number(/^seconds: (\d+)$/m.exec(logs)?.[1]);
    assert.ok(seconds <= 2, `answered at once, not after a resolver timeout (${seconds} s): ${logs}`);
  });
});
