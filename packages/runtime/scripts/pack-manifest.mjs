// Points the runtime's package.json at compiled JavaScript while `npm pack` / `npm publish`
// builds the tarball, and back at the TypeScript sources afterwards.
//
// In this repository every consumer runs the sources through tsx, so `exports` names src/*.ts.
// npm has no per-publish override of `exports` (its publishConfig holds registry settings
// only), so `prepack` runs `node scripts/pack-manifest.mjs dist` after the build and `postpack`
// runs `node scripts/pack-manifest.mjs src`. Guarantees: the `dist` form maps every entry point
// `./src/<p>.ts` to `{ types: ./dist/<p>.d.ts, default: ./dist/<p>.js }`; the `src` form is the
// one committed; both are derived from `sourceExports` below, so the two cannot disagree, and
// running either twice changes nothing. The file is replaced in one rename, so a process reading
// it meanwhile (a test starting beside `npm pack`) gets one form or the other, never half a file.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const sourceExports = {
  '.': './src/index.ts',
  './testing': './src/testing/index.ts',
};

export function compiledExports() {
  return Object.fromEntries(
    Object.entries(sourceExports).map(([entry, file]) => {
      const base = file.replace(/^\.\/src\//, './dist/').replace(/\.ts$/, '');
      return [entry, { types: `${base}.d.ts`, default: `${base}.js` }];
    }),
  );
}

const form = process.argv[2];
if (form !== 'dist' && form !== 'src') {
  console.error('usage: node scripts/pack-manifest.mjs dist|src');
  process.exit(2);
}
const file = fileURLToPath(new URL('../package.json', import.meta.url));
const manifest = JSON.parse(readFileSync(file, 'utf8'));
manifest.exports = form === 'dist' ? compiledExports() : sourceExports;
writeFileSync(`${file}.${process.pid}`, `${JSON.stringify(manifest, null, 2)}\n`);
renameSync(`${file}.${process.pid}`, file);
