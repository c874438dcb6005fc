/**
 * Bundles operators into self-contained JavaScript: `npm run build [-- iot memcached ...]` writes
 * operators/<name>/dist/<name>-operator.mjs for each named operator (default: all), with the
 * code loaded only on demand in dist/chunks/.
 *
 * Guarantees: a bundle directory needs nothing but Node.js (no node_modules, no TypeScript
 * loader), so it is what the container image runs; esbuild keeps only the code the operator
 * reaches, and code behind a dynamic import (the exec-plugin and auth-provider support of
 * @kubernetes/client-node) sits in a chunk that is read only by a process that uses it. The
 * output is not minified, so stack traces keep function names. The entry file is executable and
 * its hashbang runs Node.js with OPERATOR_NODE_FLAGS. A build error names the operator and exits
 * non-zero.
 */
import { build } from 'esbuild';
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
 * Measured on the IoT burst (N = 100) and the Memcached operator (N = 500), docs/performance.md:
 * the first two ≈ 25 MiB less peak RSS for 10–20 % more CPU; the last two another 11–12 MiB for
 * 5–8 % more CPU.
 */
export const OPERATOR_NODE_FLAGS = ['--max-semi-space-size=2', '--heap-growing-percent=20', '--no-opt', '--single-threaded'] as const;

/** Bundled CommonJS dependencies call require(); an ES module has to make one. */
const requireShim = "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";

/** Writes the bundle of operator `name` into `outdir` (default: its dist/) and returns its entry file. */
export async function bundleOperator(name: string, outdir = path.join(root, 'operators', name, 'dist')): Promise<string> {
  const entry = path.join(root, 'operators', name, 'src', 'main.ts');
  if (!existsSync(entry)) throw new Error(`no operator "${name}" (expected ${path.relative(root, entry)}); known: ${OPERATORS.join(', ')}`);
  rmSync(path.join(outdir, 'chunks'), { recursive: true, force: true });
  await build({
    entryPoints: { [`${name}-operator`]: entry },
    outdir,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    banner: { js: requireShim },
    logLevel: 'warning',
  });
  const entryFile = path.join(outdir, `${name}-operator.mjs`);
  const code = readFileSync(entryFile, 'utf8');
  const withoutHashbang = code.startsWith('#!') ? code.slice(code.indexOf('\n') + 1) : code;
  writeFileSync(entryFile, `#!/usr/bin/env -S node ${OPERATOR_NODE_FLAGS.join(' ')}\n${withoutHashbang}`);
  chmodSync(entryFile, 0o755);
  return entryFile;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const names = process.argv.slice(2);
  for (const name of names.length > 0 ? names : OPERATORS) {
    try {
      const file = await bundleOperator(name);
      console.log(`${name}: ${path.relative(root, file)}`);
    } catch (err) {
      console.error(`${name}: bundle failed: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    }
  }
}
