/**
 * Bundles operators into self-contained JavaScript: `npm run build [-- iot memcached ...]` writes
 * operators/<name>/dist/<name>-operator.mjs for each named operator (default: all), with the
 * code loaded only on demand in dist/chunks/.
 *
 * Guarantees: a bundle directory needs nothing but Node.js (no node_modules, no TypeScript
 * loader), so it is what the container image runs; esbuild keeps only the code the operator
 * reaches, and code behind a dynamic import (the exec-plugin and auth-provider support of
 * @kubernetes/client-node) sits in a chunk that is read only by a process that uses it. The
 * output is not minified, so stack traces keep function names. A build error names the operator
 * and exits non-zero.
 */
import { build } from 'esbuild';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const OPERATORS = ['iot', 'memcached', 'ptemplate', 'armada'] as const;

/**
 * V8 flags every bundled operator runs with (the bundle's hashbang, the images' ENTRYPOINT, the
 * benchmarks' default commands). `--max-semi-space-size=2` caps each half of V8's young
 * generation at 2 MiB instead of 16: an operator allocates short-lived JSON per event and per
 * request at a high rate, and a young generation grown to its default maximum held up to 48 MiB of
 * such garbage between scavenges — a third of the peak resident memory of a burst. Scavenges of a
 * small young generation are more frequent but each is short (measured: CPU within 5 %).
 */
export const OPERATOR_NODE_FLAGS = ['--max-semi-space-size=2'] as const;

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
  writeFileSync(entryFile, `#!/usr/bin/env -S node ${OPERATOR_NODE_FLAGS.join(' ')}\n${withoutHashbang}`, { mode: 0o755 });
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
