/**
 * The health server's answers and a component's end on SIGTERM: /healthz with the version,
 * /readyz from the checks, unready while stopping, exit 0 after an orderly stop.
 */

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { runChecks, startHealthServer } from '../src/shared/health.ts';
import { HOST } from './harness.ts';

test('/healthz names component and version; /readyz 200 only when every check passes in time', async () => {
  let databaseUp = false;
  const health = await startHealthServer(
    {
      component: 'core',
      version: '2.5.0',
      checks: {
        database: async () => {
          if (!databaseUp) throw new Error('connection refused');
        },
        slow: () => new Promise((resolve) => setTimeout(resolve, 5)),
      },
      checkTimeoutMs: 200,
    },
    { host: HOST, port: 0 },
  );
  try {
    const get = async (path: string) => {
      const response = await fetch(`http://${HOST}:${health.port}${path}`);
      return { status: response.status, body: (await response.json()) as unknown };
    };
    assert.deepEqual(await get('/healthz'), { status: 200, body: { status: 'ok', component: 'core', version: '2.5.0' } });
    assert.deepEqual(await get('/readyz'), { status: 503, body: { ready: false, checks: { database: 'connection refused', slow: 'ok' } } });
    databaseUp = true;
    assert.deepEqual(await get('/readyz'), { status: 200, body: { ready: true, checks: { database: 'ok', slow: 'ok' } } });
    health.stopping();
    assert.equal((await get('/readyz')).status, 503);
    assert.equal((await get('/healthz')).status, 200);
    assert.equal((await get('/other')).status, 404);
  } finally {
    await health.close();
  }
});

test('a check that does not answer in time fails with its name', async () => {
  const report = await runChecks({ hung: () => new Promise(() => undefined) }, 20);
  assert.deepEqual(report, { ready: false, checks: { hung: 'no answer within 20 ms' } });
});

test('SIGTERM: the component logs its version, stops in order and exits 0', async () => {
  const script = `
    import { startComponent } from './src/shared/lifecycle.ts';
    import { createLogger } from './src/shared/log.ts';
    import { serviceVersion } from './src/shared/version.ts';
    const log = createLogger('probe');
    await startComponent(log, serviceVersion(), async () => ({
      stop: async () => { await new Promise((r) => setTimeout(r, 50)); log.info('released'); },
    }));
    setInterval(() => undefined, 1000);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...process.env, IOT_SERVICE_VERSION: '2.4.1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    if (output.includes('"msg":"started"')) child.kill('SIGTERM');
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  const lines = output.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.equal(code, 0);
  assert.deepEqual(lines.map((l) => l.msg), ['starting', 'started', 'stopping', 'released', 'stopped']);
  assert.equal(lines[0]?.version, '2.4.1');
  assert.equal(lines[2]?.signal, 'SIGTERM');
});
