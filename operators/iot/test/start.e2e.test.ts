// run-tests: alone among the IoT files: `npm start`'s operator points the CRD's conversion at itself.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Kinds } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { localWebhookCertDir } from '../src/webhooks/local-conversion.ts';
import { IoTServiceType, IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { IOTSERVICE_CRD_NAME } from '../src/api/crd.ts';
import { kubectlDir } from './storage-migration.ts';

const run = promisify(execFile);
const landscape = `qs-${randomBytes(3).toString('hex')}`;
let env: TestEnv;

before(async () => {
  env = await localTestEnv();
});

after(async () => {
  // The certificate npm start kept for this landscape.
  rmSync(path.dirname(localWebhookCertDir(landscape)), { recursive: true, force: true });
  // The quick start's operator has stopped: release the example by hand, then remove what it made.
  await env.client.patch(IoTServiceType, 'example-iotservice', landscape, { metadata: { finalizers: null } }).catch(() => undefined);
  for (const ns of [landscape, `${landscape}-example-iotservice`]) await env.client.delete(Kinds.Namespace, ns).catch(() => undefined);
});

describe('npm start (the README’s first command)', () => {
  it('refuses an unknown flag with the list of known ones, before it starts anything', async () => {
    const failure = await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/quickstart/start.ts'), '--locla'], { cwd: repoRoot, env: { ...process.env, OPERATOR_NAME: landscape } }).then(
      () => assert.fail('npm start accepted --locla'),
      (e: { code?: number; stdout: string; stderr: string }) => e,
    );
    assert.equal(failure.code, 2);
    assert.match(failure.stderr, /unknown argument '--locla' \(known: --local, --real-node, --exit-when-available\)/);
    assert.equal(failure.stdout, '', 'nothing was started');
    assert.equal(await env.client.get(Kinds.Namespace, landscape).catch(() => undefined), undefined, 'no landscape was created');
  });

  it('on the embedded cluster: installs the CRD and landscape, runs the operator and brings the example to Available', async () => {
    const { KUBECONFIG: _unused, ...withoutKubeconfig } = process.env;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/quickstart/start.ts'), '--local', '--exit-when-available'], {
      cwd: repoRoot,
      env: { ...withoutKubeconfig, OPERATOR_NAME: landscape },
      timeout: 300_000,
    });
    assert.match(stdout, /installed the IoTService CRD/);
    assert.match(stdout, new RegExp(`created Namespace ${landscape}`));
    assert.match(stdout, /example-iotservice: Available 7\/7/);
    // Read as kubectl reads it (v1beta1, stored), which needs no conversion webhook: npm start has stopped.
    const iot = await env.client.get<{ metadata: { generation?: number }; status?: { phase?: string; observedGeneration?: number } } & { metadata: Record<string, unknown> }>(IoTServiceType, 'example-iotservice', landscape);
    assert.equal(iot.status?.phase, 'Available');
  });

  it('run again on the running cluster: what exists is left as it is and the example is Available again', async () => {
    const { KUBECONFIG: _unused, ...withoutKubeconfig } = process.env;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/quickstart/start.ts'), '--local', '--exit-when-available'], {
      cwd: repoRoot,
      env: { ...withoutKubeconfig, OPERATOR_NAME: landscape },
      timeout: 300_000,
    });
    assert.match(stdout, new RegExp(`Namespace ${landscape} already exists; left as it is`));
    assert.match(stdout, /IoTService example-iotservice already exists; left as it is/);
    assert.match(stdout, /example-iotservice: Available 7\/7/);
  });

  it('left running once the example is Available: v1alpha1 reads are converted by it, also after the walkthrough’s kubectl apply -f of the CRD; Ctrl-C stops the operator and exits 0 within 5 s, pointing the CRD away from it', async () => {
    const { KUBECONFIG: _unused, ...withoutKubeconfig } = process.env;
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/quickstart/start.ts'), '--local'], {
      cwd: repoRoot,
      env: { ...withoutKubeconfig, OPERATOR_NAME: landscape },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })));
    try {
      await waitFor('the quick start to leave the operator running', async () => ({ done: output.includes('the operator keeps running; Ctrl-C stops it'), value: undefined, seen: output }), {
        timeoutMs: 300_000,
      });
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    const conversionUrl = /conversion is served here: (https:\/\/127\.0\.0\.1:\d+\/convert)/.exec(output)?.[1];
    assert.ok(conversionUrl, output);
    const conversionOf = async () => (await env.client.get<{ spec: { conversion?: { webhook?: { clientConfig?: { url?: string } } } } } & { metadata: Record<string, unknown> }>(Kinds.CustomResourceDefinition, IOTSERVICE_CRD_NAME)).spec.conversion;
    try {
      assert.equal((await conversionOf())?.webhook?.clientConfig?.url, conversionUrl, 'the CRD names the webhook npm start serves');
      // The walkthrough's step 1 as written (docs/iotservice.md), while npm start runs: the shipped
      // file, applied client-side, names a Service; npm start takes the conversion back.
      const applied = await run(path.join(await kubectlDir(), 'kubectl'), ['apply', '-f', 'deploy/crds/iotservices.cp.iotservices.io.yaml'], {
        cwd: path.join(repoRoot, 'operators/iot'),
        env: { ...process.env, KUBECONFIG: env.kubeconfigPath },
      });
      assert.match(applied.stdout, /customresourcedefinition\.apiextensions\.k8s\.io\/iotservices\.cp\.iotservices\.io (configured|unchanged)/);
      await waitFor('npm start to point the applied CRD at itself again', async () => {
        const url = (await conversionOf())?.webhook?.clientConfig?.url;
        return { done: url === conversionUrl, value: undefined, seen: url };
      }, { timeoutMs: 15_000 });
      const seed = await waitFor('a v1alpha1 read converted by npm start', async () => {
        const read = await env.client.get<{ apiVersion?: string; status?: { phase?: string } } & { metadata: Record<string, unknown> }>(IoTServiceV1alpha1Type, 'example-iotservice', landscape).catch((err: unknown) => err as Error);
        return { done: !(read instanceof Error), value: read, seen: read instanceof Error ? read.message : undefined };
      }, { timeoutMs: 15_000 });
      assert.ok(!(seed instanceof Error));
      assert.equal(seed.apiVersion, 'cp.iotservices.io/v1alpha1');
      assert.equal(seed.status?.phase, 'Available');
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    const sentAt = Date.now();
    child.kill('SIGINT');
    const timeout = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const { code, at } = await exited;
    clearTimeout(timeout);
    assert.ok(at - sentAt < 5000, `exited ${at - sentAt} ms after SIGINT; output:\n${output}`);
    assert.equal(code, 0, output);
    assert.match(output, /SIGINT: stopping the operator/);
    assert.notEqual((await conversionOf())?.webhook?.clientConfig?.url, conversionUrl, 'the CRD no longer names the stopped process');
  });
});
