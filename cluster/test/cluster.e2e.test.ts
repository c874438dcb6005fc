// End-to-end tests of the local control plane (cluster up): they talk to the real
// kube-apiserver with the pinned kubectl and check that the controller-manager, the scheduler
// and kwok's fake nodes do their jobs.
//
//   node --import tsx --test cluster/test/cluster.e2e.test.ts
// run-tests: alone, before every other file: it restarts the API server.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const clusterDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Pinned versions, read from cluster/engines/versions.env (the single source of truth). */
function pinnedVersions(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(path.join(clusterDir, "engines", "versions.env"), "utf8").split("\n")) {
    const m = /^([A-Z0-9_]+)=(\S+)$/.exec(line.trim());
    if (m?.[1] && m[2]) out[m[1]] = m[2];
  }
  return out;
}

/** The cluster's command line: `node --import tsx cluster/cli/cluster.ts <command>`. */
const cli = (command: string) => [process.execPath, "--import", "tsx", path.join(clusterDir, "cli", "cluster.ts"), command];

/** Runs a cluster command; progress (stderr) goes to our stderr; returns the last stdout line. */
function runScript(argv: string[]): Promise<string> {
  const script = argv.slice(1).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.on("error", reject);
    child.on("close", (code) => {
      const last = stdout.trim().split("\n").pop() ?? "";
      if (code === 0) resolve(last);
      else reject(new Error(`${script} exited with ${code}; stdout: ${stdout.trim()}`));
    });
  });
}

let kubeconfig = "";
let kubectlPath = "";

interface KubectlResult {
  stdout: string;
  stderr: string;
}

function kubectl(args: string[], input?: string): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      kubectlPath,
      ["--kubeconfig", kubeconfig, "--request-timeout=20s", ...args],
      { maxBuffer: 64 * 1024 * 1024, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`kubectl ${args.join(" ")} failed: ${stderr.trim() || err.message}`));
        else resolve({ stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

async function kubectlJson<T>(args: string[]): Promise<T> {
  const { stdout } = await kubectl([...args, "-o", "json"]);
  return JSON.parse(stdout) as T;
}

/** kubectl get that returns null when the object does not exist. */
async function getOrNull<T>(args: string[]): Promise<T | null> {
  try {
    return await kubectlJson<T>(["get", ...args]);
  } catch (e) {
    if (/NotFound|not found/.test(String(e))) return null;
    throw e;
  }
}

async function apply(...objects: object[]): Promise<void> {
  await kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }));
}

/**
 * Polls `probe` until it reports done. On timeout the error says what was awaited and what was
 * seen last (or the last error the probe threw).
 */
async function waitUntil<T>(
  what: string,
  probe: () => Promise<{ done: boolean; seen: T }>,
  timeoutMs = 60_000,
  intervalMs = 500,
): Promise<T> {
  const start = Date.now();
  let lastSeen: unknown = "<nothing yet>";
  for (;;) {
    try {
      const { done, seen } = await probe();
      lastSeen = seen;
      if (done) return seen;
    } catch (e) {
      lastSeen = `error: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (Date.now() - start > timeoutMs) {
      throw new Error(
        `timed out after ${Math.round((Date.now() - start) / 1000)}s waiting for ${what}; last seen: ` +
          (typeof lastSeen === "string" ? lastSeen : JSON.stringify(lastSeen)),
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

interface Meta {
  name: string;
  namespace?: string;
  uid: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: { kind: string; name: string; uid: string }[];
  deletionTimestamp?: string;
}
interface Condition {
  type: string;
  status: string;
}
interface Pod {
  metadata: Meta;
  spec: { nodeName?: string; tolerations?: { key?: string }[] };
  status: { phase?: string; podIP?: string; conditions?: Condition[] };
}
interface Node {
  metadata: Meta;
  spec: { taints?: { key: string; effect: string }[]; unschedulable?: boolean };
  status: { conditions?: Condition[] };
}
interface List<T> {
  items: T[];
}

const isReady = (conds: Condition[] | undefined) => conds?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
const podSummary = (p: Pod) =>
  `${p.metadata.name}:${p.status.phase ?? "?"}/ready=${isReady(p.status.conditions)}/node=${p.spec.nodeName ?? "-"}`;

let nsCounter = 0;
/** Creates a fresh namespace for one test and deletes it (without waiting) afterwards. */
async function withNamespace(label: string, fn: (ns: string) => Promise<void>): Promise<void> {
  const ns = `e2e-${label}-${Date.now().toString(36)}-${nsCounter++}`.slice(0, 63);
  await apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { "iot-operator.test/e2e": "cluster" } } });
  try {
    await fn(ns);
  } finally {
    await kubectl(["delete", "namespace", ns, "--wait=false", "--ignore-not-found"]).catch(() => undefined);
  }
}

function deployment(ns: string, name: string, replicas: number) {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: ns },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        // No tolerations and no node selector: plain workloads must land on the kwok nodes.
        spec: { containers: [{ name: "app", image: "example.invalid/app:1" }] },
      },
    },
  };
}

async function waitPodsRunningReady(ns: string, selector: string, count: number, timeoutMs = 90_000): Promise<Pod[]> {
  return waitUntil(
    `${count} pods (${selector}) in ${ns} to be Running and Ready`,
    async () => {
      const pods = (await kubectlJson<List<Pod>>(["get", "pods", "-n", ns, "-l", selector])).items.filter(
        (p) => !p.metadata.deletionTimestamp,
      );
      const ok = pods.filter((p) => p.status.phase === "Running" && isReady(p.status.conditions));
      return { done: pods.length === count && ok.length === count, seen: pods.map(podSummary) };
    },
    timeoutMs,
  ).then(() => kubectlJson<List<Pod>>(["get", "pods", "-n", ns, "-l", selector]).then((l) => l.items));
}

before(async () => {
  const binDir = await runScript(["bash", path.join(clusterDir, "engines", "build.sh"), "control-plane"]);
  kubectlPath = path.join(binDir, "kubectl");
  const line = await runScript(cli("up"));
  const m = /^KUBECONFIG=(\/.+)$/.exec(line);
  assert.ok(m?.[1], `cluster up must print KUBECONFIG=<absolute path> as its last line, got: ${line}`);
  kubeconfig = m[1];
});

describe("local control plane", { timeout: 15 * 60_000 }, () => {
  test("/version reports the pinned Kubernetes version", async () => {
    const want = pinnedVersions().K8S_VERSION;
    assert.ok(want, "K8S_VERSION missing from cluster/engines/versions.env");
    const v = JSON.parse((await kubectl(["get", "--raw", "/version"])).stdout) as { gitVersion: string; minor: string };
    assert.equal(v.gitVersion, want);
    assert.equal(v.minor, want.split(".")[1]);
    const client = await kubectlJson<{ clientVersion: { gitVersion: string } }>(["version", "--client"]);
    assert.equal(client.clientVersion.gitVersion, want);
  });

  test("kwok nodes are Ready and carry no taints", async () => {
    const nodes = (await kubectlJson<List<Node>>(["get", "nodes"])).items;
    const kwokNodes = nodes.filter((n) => n.metadata.annotations?.["kwok.x-k8s.io/node"] === "fake");
    assert.ok(kwokNodes.length >= 2, `want at least 2 kwok nodes, have ${nodes.map((n) => n.metadata.name).join(",")}`);
    for (const n of kwokNodes) {
      assert.ok(isReady(n.status.conditions), `node ${n.metadata.name} is not Ready: ${JSON.stringify(n.status.conditions)}`);
      assert.deepEqual(n.spec.taints ?? [], [], `node ${n.metadata.name} has taints`);
      assert.notEqual(n.spec.unschedulable, true, `node ${n.metadata.name} is unschedulable`);
    }
  });

  test("a Deployment of 3 replicas gets 3 Running and Ready pods on kwok nodes", async () => {
    await withNamespace("deploy", async (ns) => {
      await apply(deployment(ns, "web", 3));
      const pods = await waitPodsRunningReady(ns, "app=web", 3);
      const nodes = (await kubectlJson<List<Node>>(["get", "nodes"])).items;
      const kwokNodes = new Set(
        nodes.filter((n) => n.metadata.annotations?.["kwok.x-k8s.io/node"] === "fake").map((n) => n.metadata.name),
      );
      for (const p of pods) {
        assert.ok(p.spec.nodeName && kwokNodes.has(p.spec.nodeName), `${p.metadata.name} is on ${p.spec.nodeName}`);
        assert.ok(p.status.podIP, `${p.metadata.name} has no pod IP`);
      }
      await waitUntil(
        "Deployment web to report 3 ready/available replicas",
        async () => {
          const d = await kubectlJson<{ status: { readyReplicas?: number; availableReplicas?: number } }>([
            "get", "deployment", "web", "-n", ns,
          ]);
          return { done: d.status.readyReplicas === 3 && d.status.availableReplicas === 3, seen: d.status };
        },
      );
    });
  });

  test("a DaemonSet runs one Ready pod per kwok node", async () => {
    await withNamespace("ds", async (ns) => {
      const nodes = (await kubectlJson<List<Node>>(["get", "nodes"])).items.filter(
        (n) => n.metadata.annotations?.["kwok.x-k8s.io/node"] === "fake",
      );
      await apply({
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        metadata: { name: "agent", namespace: ns },
        spec: {
          selector: { matchLabels: { app: "agent" } },
          template: {
            metadata: { labels: { app: "agent" } },
            spec: { containers: [{ name: "agent", image: "example.invalid/agent:1" }] },
          },
        },
      });
      const pods = await waitPodsRunningReady(ns, "app=agent", nodes.length);
      assert.deepEqual(
        pods.map((p) => p.spec.nodeName).sort(),
        nodes.map((n) => n.metadata.name).sort(),
      );
    });
  });

  test("deleting an owner garbage-collects its dependents", async () => {
    await withNamespace("gc", async (ns) => {
      await apply({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "owner", namespace: ns }, data: { a: "1" } });
      const owner = await kubectlJson<{ metadata: Meta }>(["get", "configmap", "owner", "-n", ns]);
      await apply({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: "dependent",
          namespace: ns,
          ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: owner.metadata.uid }],
        },
        data: { b: "2" },
      });
      await kubectl(["delete", "configmap", "owner", "-n", ns]);
      await waitUntil("ConfigMap 'dependent' to be garbage-collected after its owner was deleted", async () => {
        const cm = await getOrNull<{ metadata: Meta }>(["configmap", "dependent", "-n", ns]);
        return { done: cm === null, seen: cm ? `still there (ownerReferences ${JSON.stringify(cm.metadata.ownerReferences)})` : "gone" };
      });

      // A Deployment's ReplicaSet and pods go with it (background cascading deletion).
      await apply(deployment(ns, "gc-web", 2));
      await waitPodsRunningReady(ns, "app=gc-web", 2);
      await kubectl(["delete", "deployment", "gc-web", "-n", ns, "--cascade=background"]);
      await waitUntil("the ReplicaSet and pods of deleted Deployment gc-web to be garbage-collected", async () => {
        const rs = (await kubectlJson<List<{ metadata: Meta }>>(["get", "replicasets", "-n", ns, "-l", "app=gc-web"])).items;
        const pods = (await kubectlJson<List<Pod>>(["get", "pods", "-n", ns, "-l", "app=gc-web"])).items;
        return {
          done: rs.length === 0 && pods.length === 0,
          seen: { replicaSets: rs.map((r) => r.metadata.name), pods: pods.map(podSummary) },
        };
      });
    });
  });

  test("deleting a namespace removes its contents and the namespace", async () => {
    const ns = `e2e-nsdel-${Date.now().toString(36)}`;
    await apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    try {
      await apply(
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", namespace: ns }, data: { k: "v" } },
        { apiVersion: "v1", kind: "Secret", metadata: { name: "sec", namespace: ns }, stringData: { k: "v" } },
        deployment(ns, "nsdel-web", 2),
      );
      await waitPodsRunningReady(ns, "app=nsdel-web", 2);
      await kubectl(["delete", "namespace", ns, "--wait=false"]);
      await waitUntil<unknown>(
        `namespace ${ns} and everything in it to be deleted`,
        async () => {
          const nsObj = await getOrNull<{ status: { phase: string; conditions?: { type: string; status: string; message?: string }[] } }>([
            "namespace", ns,
          ]);
          if (nsObj === null) return { done: true, seen: "namespace gone" };
          const left = (await kubectl(["get", "configmaps,secrets,deployments,replicasets,pods", "-n", ns, "-o", "name"])).stdout
            .split("\n")
            .filter(Boolean);
          return {
            done: false,
            seen: { phase: nsObj.status.phase, conditions: nsObj.status.conditions?.filter((c) => c.status === "True"), left },
          };
        },
        120_000,
      );
    } finally {
      await kubectl(["delete", "namespace", ns, "--wait=false", "--ignore-not-found"]).catch(() => undefined);
    }
  });

  test("restart-apiserver restarts the API server on the same port with the same data", async () => {
    await withNamespace("restart", async (ns) => {
      await apply({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "survivor", namespace: ns }, data: { k: "v" } });
      const before = JSON.parse((await kubectl(["config", "view", "--minify", "-o", "json"])).stdout) as {
        clusters: { cluster: { server: string } }[];
      };
      const line = await runScript(cli("restart-apiserver"));
      assert.match(line, /^kube-apiserver restarted \(pid \d+ -> \d+\), \/readyz ok after [\d.]+s$/);
      const after = JSON.parse((await kubectl(["config", "view", "--minify", "-o", "json"])).stdout) as typeof before;
      assert.equal(after.clusters[0]?.cluster.server, before.clusters[0]?.cluster.server);
      const cm = await kubectlJson<{ data: Record<string, string> }>(["get", "configmap", "survivor", "-n", ns]);
      assert.deepEqual(cm.data, { k: "v" });
      // The controller-manager, scheduler and kwok reconnected: new work still gets done.
      await apply(deployment(ns, "after-restart", 2));
      await waitPodsRunningReady(ns, "app=after-restart", 2);
    });
  });

  test("up restarts a component that died and keeps the cluster's objects", async () => {
    await withNamespace("revive", async (ns) => {
      await apply({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "survivor", namespace: ns }, data: { k: "v" } });
      const pidFile = path.join(path.dirname(kubeconfig), "pids", "kube-scheduler.pid");
      const pid = Number(readFileSync(pidFile, "utf8").trim());
      process.kill(pid, "SIGKILL");
      await runScript(cli("up"));
      const revived = Number(readFileSync(pidFile, "utf8").trim());
      assert.notEqual(revived, pid, "a new scheduler runs");
      const cm = await kubectlJson<{ data: Record<string, string> }>(["get", "configmap", "survivor", "-n", ns]);
      assert.deepEqual(cm.data, { k: "v" }, "the cluster was restarted, not made again");
      await apply(deployment(ns, "after-revive", 1));
      await waitPodsRunningReady(ns, "app=after-revive", 1);
    });
  });

  test("a StatefulSet's volumeClaimTemplate binds a pre-created PersistentVolume", async () => {
    const suffix = Date.now().toString(36);
    const storageClass = `e2e-manual-${suffix}`;
    const pvName = `e2e-pv-${suffix}`;
    await withNamespace("sts", async (ns) => {
      try {
        await apply(
          {
            apiVersion: "storage.k8s.io/v1",
            kind: "StorageClass",
            metadata: { name: storageClass },
            provisioner: "kubernetes.io/no-provisioner",
            volumeBindingMode: "WaitForFirstConsumer",
          },
          {
            apiVersion: "v1",
            kind: "PersistentVolume",
            metadata: { name: pvName, labels: { "iot-operator.test/volume": suffix } },
            spec: {
              capacity: { storage: "1Gi" },
              accessModes: ["ReadWriteOnce"],
              persistentVolumeReclaimPolicy: "Retain",
              storageClassName: storageClass,
              hostPath: { path: `/tmp/iot-operator-e2e/${pvName}`, type: "DirectoryOrCreate" },
              // Pre-bound to the claim the StatefulSet will create for its pod db-0.
              claimRef: { namespace: ns, name: "data-db-0" },
            },
          },
          {
            apiVersion: "apps/v1",
            kind: "StatefulSet",
            metadata: { name: "db", namespace: ns },
            spec: {
              serviceName: "db",
              replicas: 1,
              selector: { matchLabels: { app: "db" } },
              template: {
                metadata: { labels: { app: "db" } },
                spec: {
                  containers: [
                    { name: "db", image: "example.invalid/db:1", volumeMounts: [{ name: "data", mountPath: "/data" }] },
                  ],
                },
              },
              volumeClaimTemplates: [
                {
                  metadata: { name: "data" },
                  spec: {
                    accessModes: ["ReadWriteOnce"],
                    storageClassName: storageClass,
                    resources: { requests: { storage: "1Gi" } },
                  },
                },
              ],
            },
          },
        );
        await waitUntil(`PVC data-db-0 to be Bound to PV ${pvName}`, async () => {
          const pvc = await getOrNull<{ spec: { volumeName?: string }; status: { phase?: string } }>(["pvc", "data-db-0", "-n", ns]);
          return { done: pvc?.status.phase === "Bound" && pvc.spec.volumeName === pvName, seen: pvc ?? "no PVC yet" };
        });
        const pv = await kubectlJson<{ status: { phase: string } }>(["get", "pv", pvName]);
        assert.equal(pv.status.phase, "Bound");
        await waitPodsRunningReady(ns, "app=db", 1);
        await waitUntil("StatefulSet db to report 1 ready replica", async () => {
          const s = await kubectlJson<{ status: { readyReplicas?: number; availableReplicas?: number } }>(["get", "statefulset", "db", "-n", ns]);
          return { done: s.status.readyReplicas === 1, seen: s.status };
        });
      } finally {
        await kubectl(["delete", "statefulset", "db", "-n", ns, "--ignore-not-found", "--wait=false"]).catch(() => undefined);
        await kubectl(["delete", "pvc", "data-db-0", "-n", ns, "--ignore-not-found", "--wait=false"]).catch(() => undefined);
        await kubectl(["delete", "pv", pvName, "--ignore-not-found", "--wait=false"]).catch(() => undefined);
        await kubectl(["delete", "storageclass", storageClass, "--ignore-not-found"]).catch(() => undefined);
      }
    });
  });

  test("a helm test hook pod completes (Succeeded, exit code 0); an ordinary pod keeps running", async () => {
    await withNamespace("helmtest", async (ns) => {
      const pod = (name: string, annotations: Record<string, string>) => ({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: ns, labels: { app: name }, annotations },
        spec: { restartPolicy: "Never", containers: [{ name: "check", image: "example.invalid/check:1" }] },
      });
      // Helm reads the annotation as a list: "test" among other hooks counts too.
      await apply(pod("plain", {}), pod("hook-test", { "helm.sh/hook": "test" }), pod("hook-list", { "helm.sh/hook": "post-install, test" }));
      await waitPodsRunningReady(ns, "app=plain", 1);
      for (const name of ["hook-test", "hook-list"]) {
        const done = await waitUntil(`test hook pod ${name} to be Succeeded`, async () => {
          const p = await kubectlJson<Pod & { status: { containerStatuses?: { state: { terminated?: { exitCode: number } } }[] } }>([
            "get", "pod", name, "-n", ns,
          ]);
          return { done: p.status.phase === "Succeeded", seen: p.status };
        });
        assert.deepEqual(done.containerStatuses?.map((c) => c.state.terminated?.exitCode), [0], `${name}: every container exited 0`);
      }
      const plain = await kubectlJson<Pod>(["get", "pod", "plain", "-n", ns]);
      assert.equal(plain.status.phase, "Running", "a pod without the hook annotation stays Running after the hook pods completed");
    });
  });
});

after(() => {
  // The cluster is shared with the other test suites: it stays up (cluster down removes it).
});
