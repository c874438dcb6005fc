// Every operator image, and every operator's package bin, runs with the V8 flags the bundle's hashbang
// carries; a bundle loads only the Node.js modules its operator uses. The reference IoT service's
// bundle starts each of its components with nothing but the bundle directory, reporting its version.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bundle, bundleOperator, OPERATOR_NODE_FLAGS, OPERATORS } from './bundle.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('operator images', () => {
  for (const name of OPERATORS) {
    it(`${name}: copies the whole bundle directory and starts it with the operator's V8 flags`, () => {
      const dockerfile = readFileSync(path.join(root, 'operators', name, 'Dockerfile'), 'utf8');
      assert.match(dockerfile, new RegExp(`^COPY --from=build /src/operators/${name}/dist/ \\./$`, 'm'), 'the chunks beside the entry file are copied too');
      const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(dockerfile);
      assert.ok(entrypoint, 'an exec-form ENTRYPOINT');
      assert.deepEqual(JSON.parse(entrypoint[1]!), ['node', ...OPERATOR_NODE_FLAGS, `${name}-operator.mjs`]);
    });
  }
});

describe('operator commands', () => {
  for (const name of OPERATORS) {
    it(`${name}: the package bin's hashbang passes the operator's V8 flags`, () => {
      const manifest = JSON.parse(readFileSync(path.join(root, 'operators', name, 'package.json'), 'utf8')) as { bin: Record<string, string> };
      const bin = manifest.bin[`${name}-operator`];
      assert.ok(bin, `package.json names a ${name}-operator bin`);
      const hashbang = readFileSync(path.join(root, 'operators', name, bin), 'utf8').split('\n')[0]!;
      assert.match(hashbang, /^#!\/usr\/bin\/env -S node /);
      for (const flag of OPERATOR_NODE_FLAGS) assert.ok(hashbang.split(' ').includes(flag), `${hashbang} lacks ${flag}`);
    });
  }
});

// Node.js modules that a dependency's entry would load although no operator uses them: prom-client's
// default metrics (perf_hooks, v8), its Pushgateway (zlib) and its cluster aggregator. Each one
// loaded costs resident memory in every operator process.
const UNUSED_NODE_MODULES = ['perf_hooks', 'v8', 'zlib', 'cluster'];
/** Of those, the ones an operator uses itself: Armada unpacks chart archives with zlib. */
const USED_BY: Partial<Record<(typeof OPERATORS)[number], string[]>> = { armada: ['zlib'] };

describe('operator bundles', () => {
  for (const name of OPERATORS) {
    const unused = UNUSED_NODE_MODULES.filter((m) => !USED_BY[name]?.includes(m));
    it(`${name}: loading the bundle loads none of ${unused.join(', ')}`, async () => {
      const outdir = mkdtempSync(path.join(tmpdir(), `${name}-bundle-`));
      try {
        const entry = await bundleOperator(name, outdir);
        // `--help` evaluates every module of the entry file, then exits; the list is Node.js's own.
        const listModules = "process.on('exit', () => process.stderr.write('modules: ' + JSON.stringify(process.moduleLoadList) + '\\n'))";
        const { stderr } = spawnSync(process.execPath, [...OPERATOR_NODE_FLAGS, '--import', `data:text/javascript,${encodeURIComponent(listModules)}`, entry, '--help'], { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
        const line = stderr.split('\n').find((l) => l.startsWith('modules: '));
        assert.ok(line, `the module list is written at exit: ${stderr}`);
        const loaded = (JSON.parse(line.slice('modules: '.length)) as string[]).filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length));
        assert.ok(loaded.includes('https'), `the list is the operator's (it loads https): ${loaded.join(' ')}`);
        assert.deepEqual(unused.filter((m) => loaded.includes(m)), []);
      } finally {
        rmSync(outdir, { recursive: true, force: true });
      }
    });
  }
});

describe("the reference IoT service's bundle", () => {
  it('core, gateway and processing each start from the bundle directory alone and report IOT_SERVICE_VERSION', async () => {
    const outdir = mkdtempSync(path.join(tmpdir(), 'iot-service-bundle-'));
    try {
      const entries = await bundle('iot-service', outdir);
      assert.deepEqual(entries.map((file) => path.basename(file)), ['core.mjs', 'gateway.mjs', 'processing.mjs']);
      for (const entry of entries) {
        const component = path.basename(entry, '.mjs');
        // No config.yml: the component logs its start line, then fails reading the file.
        const env = { PATH: process.env.PATH, IOT_SERVICE_VERSION: '9.8.7', IOT_CONFIG_FILE: path.join(outdir, 'absent.yml') };
        const { status, stdout } = spawnSync(process.execPath, [entry], { cwd: outdir, env, encoding: 'utf8', timeout: 10_000 });
        const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as { component: string; msg: string; version: string });
        assert.deepEqual(lines.map(({ component: c, msg, version }) => ({ c, msg, version })), [
          { c: component, msg: 'starting', version: '9.8.7' },
          { c: component, msg: 'start failed', version: '9.8.7' },
        ]);
        assert.equal(status, 1, component);
      }
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  });
});
