// End-to-end tests of the local cluster's real node (cluster/parts/node): a pod placed there
// really runs a container (a busybox image made here from Debian's busybox-static), with its
// ServiceAccount token, reaches the API server through the `kubernetes` Service, has no route to any
// address off this machine, and is seen by kubectl logs; pods that do not ask for the node stay on
// the kwok nodes. Reported as not run, with the reason, where a real node cannot run.
//
//   node --import tsx --test cluster/test/real-node.e2e.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { busyboxImage, localTestEnv, onRealNode, realNode, REAL_NODE_LABEL, REAL_NODE_NAME } from '../src/index.ts';

const run = promisify(execFile);
const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
let image = '';

type Pod = KubeObject & {
  spec: { nodeName?: string };
  status?: { phase?: string; podIP?: string; containerStatuses?: Array<{ state?: { terminated?: { exitCode: number } } }> };
};

async function podLogs(namespace: string, name: string): Promise<string> {
  const kubectl = path.join((await run('bash', ['cluster/engines/build.sh', 'control-plane'])).stdout.trim().split('\n').at(-1)!, 'kubectl');
  return (await run(kubectl, ['--kubeconfig', env.kubeconfigPath, 'logs', '-n', namespace, name])).stdout;
}

let namespace = '';
before(async () => {
  if (skip) return;
  image = await busyboxImage(env);
  namespace = await env.namespace('real-node');
});
after(() => env.cleanup());

describe('the real node', { skip }, () => {
  test('is Ready beside the kwok nodes, labelled and tainted, and left alone by kwok', async () => {
    const nodes = (await env.client.list(Kinds.Node)).items as Array<KubeObject & { spec?: { taints?: Array<{ key: string; value?: string; effect: string }> } }>;
    const real = nodes.find((n) => n.metadata.name === REAL_NODE_NAME)!;
    assert.equal(real.metadata.labels?.[REAL_NODE_LABEL], 'true');
    assert.deepEqual(real.spec?.taints?.map((t) => `${t.key}=${t.value}:${t.effect}`), [`${REAL_NODE_LABEL}=true:NoSchedule`]);
    assert.equal(real.metadata.annotations?.['kwok.x-k8s.io/node'], undefined, 'not a kwok node');
    assert.ok(nodes.some((n) => n.metadata.annotations?.['kwok.x-k8s.io/node'] === 'fake'), 'the kwok nodes are still there');
  });

  test('runs a pod for real: its token reaches the API server through the kubernetes Service, it has no route off this machine, its exit code is its own', async () => {
    // The pod's ServiceAccount may list pods in its namespace, nothing more.
    await env.client.create(Kinds.Role, { metadata: { name: 'list-pods', namespace }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }] });
    await env.client.create(Kinds.RoleBinding, {
      metadata: { name: 'list-pods', namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'list-pods' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace }],
    });
    const script = [
      'TOKEN=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)',
      `wget -q -O- --no-check-certificate --header "Authorization: Bearer $TOKEN" https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/${namespace}/pods | grep -o '"PodList"' | sed 's/^/api: listed /'`,
      `wget -q -O- --no-check-certificate --header "Authorization: Bearer $TOKEN" https://$KUBERNETES_SERVICE_HOST/api/v1/namespaces/kube-system/secrets >/dev/null 2>&1 || echo "api: kube-system secrets refused"`,
      // No address off this machine is dialled: the pod's routing table shows there is no way out.
      'ip route | sed "s/^/route: /"',
      'exit 3',
    ].join('\n');
    await env.client.create(Kinds.Pod, {
      metadata: { name: 'probe', namespace },
      spec: { ...onRealNode, restartPolicy: 'Never', containers: [{ name: 'probe', image, imagePullPolicy: 'Never', command: ['/bin/sh', '-c', script] }] },
    });
    const pod = await waitFor('the probe pod to finish', async () => {
      const p = (await env.client.get(Kinds.Pod, 'probe', namespace)) as Pod;
      return { done: p.status?.phase === 'Failed' || p.status?.phase === 'Succeeded', value: p, seen: p.status };
    }, { timeoutMs: 90_000 });
    assert.equal(pod.spec.nodeName, REAL_NODE_NAME);
    assert.match(pod.status?.podIP ?? '', /^10\.244\.0\./, 'an address of the real node’s pod network');
    assert.equal(pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 3, 'the container’s own exit code');
    const logs = await podLogs(namespace, 'probe');
    assert.match(logs, /api: listed "PodList"/);
    assert.match(logs, /api: kube-system secrets refused/);
    const routes = logs.split('\n').filter((l) => l.startsWith('route: ')).map((l) => l.slice('route: '.length).split(' ')[0]);
    assert.deepEqual(routes.sort(), ['10.244.0.0/24', '10.96.0.0/16'], `routes to the pod subnet and the Service range only, no default route: ${logs}`);
  });

  test('pods that do not ask for it stay on the kwok nodes', async () => {
    await env.client.create(Kinds.Deployment, {
      metadata: { name: 'plain', namespace },
      spec: {
        replicas: 4,
        selector: { matchLabels: { app: 'plain' } },
        template: { metadata: { labels: { app: 'plain' } }, spec: { containers: [{ name: 'c', image: 'registry.example.com/none:1' }] } },
      },
    });
    const pods = await waitFor('4 scheduled pods', async () => {
      const items = (await env.client.list(Kinds.Pod, { namespace, labelSelector: 'app=plain' })).items as Pod[];
      return { done: items.length === 4 && items.every((p) => p.spec.nodeName), value: items, seen: items.map((p) => p.spec.nodeName) };
    });
    for (const p of pods) assert.notEqual(p.spec.nodeName, REAL_NODE_NAME);
  });
});
