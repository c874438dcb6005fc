// End-to-end tests of the opt-in Operator Lifecycle Manager of the local cluster, on a cluster of
// their own (CLUSTER_NAME=olm-e2e, created and deleted here): `up --olm` installs OLM's CRDs
// and runs `olm` as a process of the cluster with its log beside the others; a killed olm is
// started again by the next plain `up`; `status` reports it; `down` stops it. OLM comes
// from OLM_DIR when set, else from cluster/engines/build.sh olm.
//
//   node --import tsx --test cluster/test/olm.e2e.test.ts
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const clusterDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const clusterName = "olm-e2e";
const workdir = path.join(process.env.KWOK_WORKDIR ?? path.join(os.homedir(), ".kwok"), "clusters", clusterName);
const olmPidFile = path.join(workdir, "pids", "olm.pid");

/** Runs a cluster script for our cluster; resolves with stdout, stderr and the exit code. */
async function cluster(command: string, args: string[] = [], env: Record<string, string> = {}): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", path.join(clusterDir, "cli", "cluster.ts"), command, ...args], {
      env: { ...process.env, CLUSTER_NAME: clusterName, CLUSTER_OLM: "", ...env },
      maxBuffer: 16 * 1024 * 1024,
      timeout: 20 * 60_000,
    });
    return { stdout, stderr, code: 0 };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; code?: number };
    return { stdout: e.stdout ?? "", stderr: e.stderr ?? "", code: typeof e.code === "number" ? e.code : -1 };
  }
}

function olmPid(): number {
  return Number(readFileSync(olmPidFile, "utf8").trim());
}

/** True while the process exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

let kubeconfig = "";
let kubectlPath = "";

async function kubectl(...args: string[]): Promise<string> {
  const { stdout } = await run(kubectlPath, ["--kubeconfig", kubeconfig, "--request-timeout=20s", ...args]);
  return stdout;
}

describe("OLM on the local cluster", () => {
  before(async () => {
    const built = await run("bash", [path.join(clusterDir, "engines", "build.sh"), "control-plane"], { maxBuffer: 16 * 1024 * 1024 });
    kubectlPath = path.join(built.stdout.trim().split("\n").at(-1)!, "kubectl");
  });

  after(async () => {
    await cluster("down");
  });

  test("up --olm installs OLM's CRDs and runs olm with its log beside the other components'", async () => {
    const up = await cluster("up", ["--olm"]);
    assert.equal(up.code, 0, up.stderr.slice(-2000));
    kubeconfig = up.stdout.trim().split("\n").at(-1)!.replace(/^KUBECONFIG=/, "");
    assert.ok(existsSync(kubeconfig), `kubeconfig ${kubeconfig}`);

    const pid = olmPid();
    assert.ok(alive(pid), `olm (pid ${pid}) runs`);
    assert.match(readFileSync(path.join(workdir, "logs", "olm.log"), "utf8"), /starting workers/);
    const crds = await kubectl("get", "crd", "-o", "name");
    for (const crd of ["clusterserviceversions", "operatorgroups", "subscriptions", "installplans", "catalogsources", "operatorconditions", "operators", "olmconfigs"]) {
      assert.match(crds, new RegExp(`^customresourcedefinition.apiextensions.k8s.io/${crd}.operators.coreos.com$`, "m"));
    }
    assert.equal((await kubectl("get", "namespace", "olm", "-o", "name")).trim(), "namespace/olm");

    const status = await cluster("status");
    assert.equal(status.code, 0, status.stdout);
    assert.match(status.stdout, new RegExp(`^  olm +pid ${pid} `, "m"));
  });

  test("a second up leaves a running olm alone; a killed one is started again by a plain up", async () => {
    const first = olmPid();
    assert.equal((await cluster("up")).code, 0);
    assert.equal(olmPid(), first, "the same olm process");

    process.kill(first, "SIGKILL");
    await waitUntil(() => !alive(first), "the killed olm to be gone");
    const status = await cluster("status");
    assert.equal(status.code, 1, "unhealthy while olm should run and does not");
    assert.match(status.stdout, /^  olm +NOT RUNNING$/m);

    const up = await cluster("up"); // no --olm: the cluster remembers that it has OLM
    assert.equal(up.code, 0, up.stderr.slice(-2000));
    const second = olmPid();
    assert.notEqual(second, first);
    assert.ok(alive(second), "a new olm runs");
    assert.ok(existsSync(path.join(workdir, "logs", "olm.previous.log")), "the previous log is kept");
  });

  test("down stops olm with the rest of the cluster", async () => {
    const pid = olmPid();
    assert.equal((await cluster("down")).code, 0);
    await waitUntil(() => !alive(pid), `olm (pid ${pid}) to be stopped`);
    assert.equal(existsSync(workdir), false, "the cluster's directory is gone");
  });
});

async function waitUntil(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
