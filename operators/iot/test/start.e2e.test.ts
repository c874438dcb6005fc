import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Kinds } from '@iot-operator/runtime';
import { repoRoot, testEnv, type TestEnv } from '@iot-operator/runtime/testing';
import { IoTServiceType } from '../src/controller.ts';

const run = promisify(execFile);
const landscape = `qs-${randomBytes(3).toString('hex')}`;
let env: TestEnv;

before(async () => {
  env = await testEnv();
});

after(async () => {
  // The quick start's operator has stopped: release the example by hand, then remove what it made.
  await env.client.patch(IoTServiceType, 'example-iotservice', landscape, { metadata: { finalizers: null } }).catch(() => undefined);
  for (const ns of [landscape, `${landscape}-example-iotservice`]) await env.client.delete(Kinds.Namespace, ns).catch(() => undefined);
});

describe('npm start (the README’s first command)', () => {
  it('on the embedded cluster: installs the CRD and landscape, runs the operator and brings the example to Available', async () => {
    const { KUBECONFIG: _unused, ...withoutKubeconfig } = process.env;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/src/start.ts'), '--local', '--exit-when-available'], {
      cwd: repoRoot,
      env: { ...withoutKubeconfig, OPERATOR_NAME: landscape },
      timeout: 300_000,
    });
    assert.match(stdout, /installed the IoTService CRD/);
    assert.match(stdout, new RegExp(`created Namespace ${landscape}`));
    assert.match(stdout, /example-iotservice: Available 7\/7/);
    const iot = await env.client.get<{ metadata: { generation?: number }; status?: { phase?: string; observedGeneration?: number } } & { metadata: Record<string, unknown> }>(IoTServiceType, 'example-iotservice', landscape);
    assert.equal(iot.status?.phase, 'Available');
  });

  it('run again on the running cluster: what exists is left as it is and the example is Available again', async () => {
    const { KUBECONFIG: _unused, ...withoutKubeconfig } = process.env;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'operators/iot/src/start.ts'), '--local', '--exit-when-available'], {
      cwd: repoRoot,
      env: { ...withoutKubeconfig, OPERATOR_NAME: landscape },
      timeout: 300_000,
    });
    assert.match(stdout, new RegExp(`Namespace ${landscape} already exists; left as it is`));
    assert.match(stdout, /IoTService example-iotservice already exists; left as it is/);
    assert.match(stdout, /example-iotservice: Available 7\/7/);
  });
});
