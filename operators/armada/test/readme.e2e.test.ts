/**
 * operators/armada/README.md, replayed on the real local cluster: its command lines — the seed's
 * (`kubectl create -f examples/armada`, `kubectl describe amf/simple-armada`, `kubectl get
 * amf/acg/act`, `kubectl delete deployment.apps/blog-2-testchart`, `kubectl describe act blog-2`,
 * `kubectl delete -f examples/armada`) and ours beside them (`helm list`, `helm test`, the
 * step-by-step and sequenced examples, the Argo enablement with `kubectl patch`) — each first found verbatim in the
 * README, then run by a shell in operators/armada with the test's namespace as the current
 * context's namespace; the operator runs from the checkout as the README says.
 */
import assert from 'node:assert/strict';
import { exec as execCallback } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { spawnOperator, waitFor, type OperatorProcess, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { helmBinary, installArmadaCrds } from './e2e-support.ts';

const exec = promisify(execCallback);
const operatorDir = path.join(repoRoot, 'operators/armada');

let env: TestEnv;
let ns: string;
let readme: string;
let scratch: string;
let shellEnv: NodeJS.ProcessEnv;
let operator: OperatorProcess | undefined;

/** Runs one of the README's command lines in operators/armada; it must appear in the README as it is. */
async function readmeCommand(command: string): Promise<string> {
  assert.ok(readme.split('\n').includes(command), `README.md has the line: ${command}`);
  const { stdout } = await exec(command, { cwd: operatorDir, env: shellEnv });
  return stdout;
}

/** The rows of a kubectl table, as arrays of cells (columns split on two or more spaces), header first. */
function table(output: string): string[][] {
  return output.trim().split('\n').map((line) => line.trim().split(/\s{2,}/));
}

async function helmReleases(): Promise<Array<{ name: string; status: string; chart: string }>> {
  return JSON.parse((await exec('helm list --output json', { cwd: operatorDir, env: shellEnv })).stdout);
}

describe('the Armada README, command by command', () => {
  before(async () => {
    env = await localTestEnv();
    readme = await readFile(path.join(operatorDir, 'README.md'), 'utf8');
    await installArmadaCrds(env);
    ns = await env.namespace('armada-readme');
    scratch = await mkdtemp(path.join(os.tmpdir(), 'armada-readme-'));
    const config = parse(await readFile(env.kubeconfigPath, 'utf8'));
    for (const context of config.contexts) context.context.namespace = ns;
    const kubeconfig = path.join(scratch, 'kubeconfig.yaml');
    await writeFile(kubeconfig, stringify(config), { mode: 0o600 });
    const helm = await helmBinary();
    const kubectlDir = (await exec(`bash ${path.join(repoRoot, 'cluster/engines/build.sh')} control-plane`)).stdout.trim().split('\n').at(-1)!;
    shellEnv = { ...process.env, KUBECONFIG: kubeconfig, HELM_BINARY: helm, PATH: `${kubectlDir}:${path.dirname(helm)}:${process.env.PATH}` };
    operator = spawnOperator(['bin/armada-operator.js', '--namespace', ns, '--metrics-bind-address', '127.0.0.1:0'], { KUBECONFIG: kubeconfig, HELM_BINARY: helm, LOG_LEVEL: 'warn' }, { cwd: operatorDir });
  });

  after(async () => {
    await exec('kubectl delete --ignore-not-found --wait=false -f examples/armada -f examples/sequenced', { cwd: operatorDir, env: shellEnv }).catch(() => undefined);
    await waitFor('every release uninstalled', async () => ({ done: (await helmReleases()).length === 0, value: true }), { timeoutMs: 120_000 }).catch(() => undefined);
    const code = await operator?.stop();
    await env?.cleanup();
    if (scratch) await rm(scratch, { recursive: true, force: true });
    assert.equal(code, 0, `operator exit code (stderr: ${operator?.output().slice(-1500)})`);
  });

  test('examples/armada: created, the manifest satisfied, amf / acg / act deployed, helm list and helm test', async () => {
    await readmeCommand('kubectl create -f examples/armada');
    await readmeCommand("kubectl wait amf/simple-armada --for=jsonpath='{.status.satisfied}'=true --timeout=300s");
    assert.match(await readmeCommand('kubectl describe amf/simple-armada'), /Name:\s+simple-armada[\s\S]*actual_state:\s+deployed/);
    const expected = { amf: ['simple-armada'], acg: ['blog-group'], act: ['blog-1', 'blog-2'] };
    for (const [kind, names] of Object.entries(expected)) {
      const [header, ...rows] = table(await readmeCommand(`kubectl get ${kind}`));
      assert.deepEqual(header, ['NAME', 'STATE', 'TARGET STATE', 'SATISFIED', 'AGE']);
      assert.deepEqual(rows.map((r) => r.slice(0, 4)), names.map((n) => [n, 'deployed', 'deployed', 'true']));
    }
    assert.match(await readmeCommand('helm list'), /blog-1\s+\S+\s+\d+\s+.*deployed\s+testchart-0\.1\.0/);
    assert.deepEqual((await helmReleases()).map((r) => [r.name, r.status, r.chart]).sort(), [['blog-1', 'deployed', 'testchart-0.1.0'], ['blog-2', 'deployed', 'testchart-0.1.0']]);
    assert.match(await readmeCommand('helm test blog-1'), /Phase:\s+Succeeded/);
  });

  test('kubectl delete deployment.apps/blog-2-testchart: it comes back, and describe act blog-2 says why', async () => {
    await readmeCommand('kubectl delete deployment.apps/blog-2-testchart');
    await readmeCommand('kubectl wait --for=create deployment/blog-2-testchart --timeout=60s');
    assert.match(await readmeCommand('kubectl get all'), /deployment\.apps\/blog-2-testchart/);
    const described = await waitFor('the repair in kubectl describe act blog-2', async () => {
      const out = await readmeCommand('kubectl describe act blog-2');
      return { done: /DriftDetected/.test(out), value: out, seen: out.slice(-800) };
    });
    assert.match(described, /deployment\/blog-2-testchart was deleted/);
  });

  test('kubectl delete -f examples/armada uninstalls both releases', async () => {
    await readmeCommand('kubectl delete -f examples/armada');
    await waitFor('helm list empty', async () => {
      const releases = await helmReleases();
      return { done: releases.length === 0, value: true, seen: releases };
    }, { timeoutMs: 120_000 });
    assert.doesNotMatch(await readmeCommand('helm list'), /blog-/);
  });

  test('examples/stepbystep: the same objects, one file each', async () => {
    await readmeCommand('kubectl create -f examples/stepbystep/blog-1.yaml');
    await readmeCommand('kubectl create -f examples/stepbystep/blog-2.yaml');
    await readmeCommand("kubectl wait act/blog-1 act/blog-2 --for=jsonpath='{.status.actual_state}'=deployed --timeout=300s");
    await readmeCommand('kubectl create -f examples/stepbystep/blog-group.yaml');
    await readmeCommand('kubectl create -f examples/stepbystep/simple-armada.yaml');
    await readmeCommand("kubectl wait amf/simple-armada --for=jsonpath='{.status.satisfied}'=true --timeout=300s");
    const rows = table(await readmeCommand('kubectl get amf,acg,act')).filter((r) => r[0] !== 'NAME' && r[0] !== '');
    assert.deepEqual(rows.map((r) => r.slice(0, 4)), [
      ['armadamanifest.armada.airshipit.org/simple-armada', 'deployed', 'deployed', 'true'],
      ['armadachartgroup.armada.airshipit.org/blog-group', 'deployed', 'deployed', 'true'],
      ['armadachart.armada.airshipit.org/blog-1', 'deployed', 'deployed', 'true'],
      ['armadachart.armada.airshipit.org/blog-2', 'deployed', 'deployed', 'true'],
    ]);
    await readmeCommand('kubectl delete -f examples/stepbystep');
    await waitFor('helm list empty', async () => ({ done: (await helmReleases()).length === 0, value: true }), { timeoutMs: 120_000 });
  });

  test('examples/sequenced: the group enables blog-1, then blog-2', async () => {
    await readmeCommand('kubectl create -f examples/sequenced');
    await readmeCommand("kubectl wait amf/simple-armada --for=jsonpath='{.status.satisfied}'=true --timeout=300s");
    const rows = table(await readmeCommand('kubectl get act')).slice(1);
    assert.deepEqual(rows.map((r) => r.slice(0, 4)), [['blog-1', 'deployed', 'deployed', 'true'], ['blog-2', 'deployed', 'deployed', 'true']]);
    assert.deepEqual((await helmReleases()).map((r) => r.name).sort(), ['blog-1', 'blog-2']);
    await readmeCommand('kubectl delete -f examples/sequenced');
    await waitFor('helm list empty', async () => ({ done: (await helmReleases()).length === 0, value: true }), { timeoutMs: 120_000 });
  });

  test('examples/argo: disabled charts enabled in order with kubectl patch', async () => {
    await readmeCommand('kubectl apply -f examples/argo/blog-1.yaml -f examples/argo/blog-2.yaml');
    const before = table(await readmeCommand('kubectl get act')).slice(1);
    assert.ok(before.every((r) => r[2] === 'uninitialized'), `not enabled yet: ${JSON.stringify(before)}`);
    assert.deepEqual(await helmReleases(), []);
    const steps = await readmeCommand('bash examples/argo/enable-in-order.sh');
    assert.match(steps, /enable-blog-1[\s\S]*blog-1-ready[\s\S]*enable-blog-2[\s\S]*blog-2-ready/);
    const rows = table(await readmeCommand('kubectl get act')).slice(1);
    assert.deepEqual(rows.map((r) => r.slice(0, 4)), [['blog-1', 'deployed', 'deployed', 'true'], ['blog-2', 'deployed', 'deployed', 'true']]);
    await readmeCommand('kubectl delete -f examples/argo/blog-1.yaml -f examples/argo/blog-2.yaml');
    await waitFor('helm list empty', async () => ({ done: (await helmReleases()).length === 0, value: true }), { timeoutMs: 120_000 });
  });
});
