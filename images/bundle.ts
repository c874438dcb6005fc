/**
 * Bundles the repository's Node.js programs into self-contained JavaScript: `npm run build [-- iot
 * iot-service ...]` writes each named bundle (default: all) into its package's dist/ — an operator
 * `<name>` as operators/<name>/dist/<name>-operator.mjs, the reference IoT service
 * (`iot-service`) as workloads/iot-service/dist/{core,gateway,processing}.mjs — with code shared
 * by several entries, or loaded only on demand, in dist/chunks/.
 *
 * Guarantees: a bundle directory needs nothing but Node.js (no node_modules, no TypeScript
 * loader), so it is what the container images run; esbuild keeps only the code the entries
 * reach, and code behind a dynamic import (the exec-plugin and auth-provider support of
 * @kubernetes/client-node) sits in a chunk that is read only by a process that uses it. The
 * output is not minified, so stack traces keep function names. Every entry file is executable and
 * its hashbang runs Node.js with the bundle's V8 flags (the operators': OPERATOR_NODE_FLAGS; the
 * IoT service's components: Node's defaults). A build error names the bundle and exits non-zero.
 */
import { build } from 'esbuild';
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const OPERATORS = ['iot', 'memcached', 'ptemplate', 'armada'] as const;

/**
 * V8 flags every bundled operator runs with (the bundle's hashbang, the images' ENTRYPOINT, the
 * benchmarks' default commands), sized for an operator: a small live set (its caches) and a high
 * rate of short-lived garbage (the JSON of every event and request).
 * - `--max-semi-space-size=2`: each half of the young generation holds at most 2 MiB instead of
 *   16, so up to 28 MiB less garbage waits between scavenges; scavenges come more often and each
 *   is short.
 * - `--heap-growing-percent=20`: the old generation is collected again once it has grown 20 %
 *   past what survived the last full collection, instead of V8's dynamic factor (up to 4 × on a
 *   machine with spare memory), so the heap stays near the live set during a burst.
 * - `--no-opt`: no optimising compiler (TurboFan). An operator's CPU goes to the network, JSON
 *   and the collector, not to hot JavaScript loops, while TurboFan's compile zones and optimised
 *   code were ≈ 12 MiB of the Memcached operator's peak.
 * - `--single-threaded`: V8 collects and compiles on the main thread only, so no helper thread
 *   keeps a malloc arena of its own.
 * Measured on the IoT burst (N = 100) and the Memcached operator (N = 500), bench/analysis.md:
 * the first two ≈ 25 MiB less peak RSS for 10–20 % more CPU; the last two another 11–12 MiB for
 * 5–8 % more CPU.
 */
export const OPERATOR_NODE_FLAGS = ['--max-semi-space-size=2', '--heap-growing-percent=20', '--no-opt', '--single-threaded'] as const;

/** Bundled CommonJS dependencies call require(); an ES module has to make one. */
const requireShim = "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";

/** A program bundled from one package: its entries, the flags they run with, what stays outside. */
interface Bundle {
  /** The package directory, relative to the repository; the bundle goes to its dist/. */
  dir: string;
  /** Output file name (without `.mjs`) → entry module, relative to `dir`. */
  entries: Record<string, string>;
  /** V8 flags of the entry files' hashbang (and of the images' ENTRYPOINT). */
  nodeFlags: readonly string[];
  /** Modules left out: optional dependencies that are not installed and never loaded. */
  external?: string[];
}

const operatorBundle = (name: string): Bundle => ({
  dir: `operators/${name}`,
  entries: { [`${name}-operator`]: 'src/main.ts' },
  nodeFlags: OPERATOR_NODE_FLAGS,
});

/** Every bundle by the name `npm run build` and the Dockerfiles' build stage give it. */
export const BUNDLES: Record<string, Bundle> = {
  ...Object.fromEntries(OPERATORS.map((name) => [name, operatorBundle(name)])),
  // pg loads its native binding (pg-native, not a dependency) only when asked for `pg.native`.
  'iot-service': {
    dir: 'workloads/iot-service',
    entries: { core: 'src/core/main.ts', gateway: 'src/gateway/main.ts', processing: 'src/processing/main.ts' },
    nodeFlags: [],
    external: ['pg-native'],
  },
};

/** Writes bundle `name` into `outdir` (default: its package's dist/) and returns its entry files. */
export async function bundle(name: string, outdir?: string): Promise<string[]> {
  const spec = Object.hasOwn(BUNDLES, name) ? BUNDLES[name] : undefined;
  if (!spec) throw new Error(`no bundle "${name}"; known: ${Object.keys(BUNDLES).join(', ')}`);
  const dir = outdir ?? path.join(root, spec.dir, 'dist');
  rmSync(path.join(dir, 'chunks'), { recursive: true, force: true });
  await build({
    entryPoints: Object.fromEntries(Object.entries(spec.entries).map(([out, entry]) => [out, path.join(root, spec.dir, entry)])),
    outdir: dir,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: spec.external ?? [],
    banner: { js: requireShim },
    logLevel: 'warning',
  });
  const hashbang = spec.nodeFlags.length > 0 ? `#!/usr/bin/env -S node ${spec.nodeFlags.join(' ')}` : '#!/usr/bin/env node';
  return Object.keys(spec.entries).map((out) => {
    const entryFile = path.join(dir, `${out}.mjs`);
    const code = readFileSync(entryFile, 'utf8');
    const withoutHashbang = code.startsWith('#!') ? code.slice(code.indexOf('\n') + 1) : code;
    writeFileSync(entryFile, `${hashbang}\n${withoutHashbang}`);
    chmodSync(entryFile, 0o755);
    return entryFile;
  });
}

/** Writes the bundle of operator `name` into `outdir` (default: its dist/) and returns its entry file. */
export async function bundleOperator(name: string, outdir?: string): Promise<string> {
  if (!(OPERATORS as readonly string[]).includes(name)) throw new Error(`no operator "${name}"; known: ${OPERATORS.join(', ')}`);
  const [entryFile] = await bundle(name, outdir);
  return entryFile!;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const names = process.argv.slice(2);
  for (const name of names.length > 0 ? names : Object.keys(BUNDLES)) {
    try {
      const files = await bundle(name);
      console.log(`${name}: ${files.map((file) => path.relative(root, file)).join(' ')}`);
    } catch (err) {
      console.error(`${name}: bundle failed: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    }
  }
}
