// The reasons the operators branch on, provoked from the real API server: each arrives as an
// ApiError with the server's code and reason, and exactly the matching predicate is true.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { localTestEnv } from '@iot-operator/local-cluster';
import {
  ApiError,
  clientSource,
  isAlreadyExists,
  isConflict,
  isForbidden,
  isGone,
  isInvalid,
  isNotFound,
  Kinds,
  KubeClient,
  type KubeObject,
} from '../src/index.ts';
import { serviceAccountKubeconfig, type TestEnv } from '../src/testing/index.ts';

const predicates = { isNotFound, isAlreadyExists, isConflict, isInvalid, isForbidden, isGone };

let env: TestEnv;
let ns: string;
before(async () => {
  env = await localTestEnv();
  ns = await env.namespace('rt-reasons');
});
after(async () => {
  await env?.cleanup();
});

/** Runs `call`, expects it to fail with `code`/`reason`, and checks which predicates hold. */
async function expectReason(call: () => Promise<unknown>, code: number, reasons: string[], predicate: keyof typeof predicates): Promise<ApiError> {
  const err = await call().then(
    () => assert.fail(`expected ${reasons.join(' or ')}, the call succeeded`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ApiError, `an ApiError, got ${String(err)}`);
  assert.equal(err.code, code, err.message);
  assert.ok(reasons.includes(err.reason), `reason ${err.reason} (${err.message}), expected ${reasons.join(' or ')}`);
  const holding = Object.entries(predicates).filter(([, holds]) => holds(err)).map(([name]) => name);
  assert.deepEqual(holding, [predicate], `predicates true for ${err.reason}`);
  return err;
}

const configMap = (name: string, data: Record<string, string> = {}): KubeObject => ({ metadata: { name, namespace: ns }, data });

describe('API error reasons from the real API server', () => {
  it('NotFound: reading an object that does not exist', async () => {
    await expectReason(() => env.client.get(Kinds.ConfigMap, 'absent', ns), 404, ['NotFound'], 'isNotFound');
  });

  it('AlreadyExists (not Conflict): creating an object twice, namespaces included', async () => {
    await env.client.create(Kinds.ConfigMap, configMap('twice'));
    const err = await expectReason(() => env.client.create(Kinds.ConfigMap, configMap('twice')), 409, ['AlreadyExists'], 'isAlreadyExists');
    assert.match(err.message, /already exists/);
    await expectReason(() => env.client.create(Kinds.Namespace, { metadata: { name: ns } }), 409, ['AlreadyExists'], 'isAlreadyExists');
  });

  it('Conflict: replacing with a stale resourceVersion', async () => {
    const first = await env.client.create(Kinds.ConfigMap, configMap('raced', { v: '1' }));
    await env.client.replace(Kinds.ConfigMap, { ...first, data: { v: '2' } });
    await expectReason(() => env.client.replace(Kinds.ConfigMap, { ...first, data: { v: '3' } }), 409, ['Conflict'], 'isConflict');
    const kept = await env.client.get<KubeObject & { data?: Record<string, string> }>(Kinds.ConfigMap, 'raced', ns);
    assert.deepEqual(kept.data, { v: '2' }, 'the losing write changed nothing');
  });

  it('Invalid: an object the server refuses as malformed', async () => {
    await expectReason(() => env.client.create(Kinds.ConfigMap, configMap('Not_A_Valid_Name')), 422, ['Invalid'], 'isInvalid');
  });

  it('Forbidden: a ServiceAccount without rights', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'reasons-'));
    const manifest = path.join(dir, 'sa.yaml');
    await writeFile(manifest, 'apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: no-rights\n');
    const sa = await serviceAccountKubeconfig(env, ns, [manifest]);
    const client = await KubeClient.fromKubeconfig({ kubeconfigPath: sa.file });
    try {
      await expectReason(() => client.get(Kinds.ConfigMap, 'twice', ns), 403, ['Forbidden'], 'isForbidden');
    } finally {
      client.close();
      await sa.cleanup();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('Gone: a watch from a resourceVersion older than the server keeps', async () => {
    const source = clientSource(env.client, Kinds.ConfigMap, { namespace: ns });
    const controller = new AbortController();
    await expectReason(
      async () => {
        for await (const event of await source.watch({ resourceVersion: '1', timeoutSeconds: 10, signal: controller.signal })) {
          assert.fail(`expected a 410 ERROR event, got ${event.type}`);
        }
      },
      410,
      ['Gone', 'Expired'],
      'isGone',
    );
    controller.abort();
  });
});
