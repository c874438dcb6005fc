// Ships the local control plane with the package: `copy` (prepack) puts the repository's
// cluster/ scripts, pinned versions and Go modules into packages/sdk/cluster/; `remove`
// (postpack) deletes that copy, so the workspace keeps one source of truth (cluster/ at the
// repository root, which the CLI uses when no copy is present). Everything but the tests and the
// repository's TypeScript harness (src/, package.json, tsconfig.json: @iot-operator/local-cluster)
// goes: cli/ (the commands, Node.js and tsx only), parts/ and engines/ (every part and the Go
// modules they build: any `up` of a cluster that has a real node starts its parts, the SDK's
// included). Running either twice changes nothing.
import { cpSync, readdirSync, rmSync } from 'node:fs';

const source = new URL('../../../cluster/', import.meta.url);
const target = new URL('../cluster/', import.meta.url);
const shipped = readdirSync(source).filter((entry) => !['test', 'src', 'package.json', 'tsconfig.json'].includes(entry));

const action = process.argv[2];
rmSync(target, { recursive: true, force: true });
if (action === 'copy') {
  for (const entry of shipped) cpSync(new URL(entry, source), new URL(entry, target), { recursive: true });
} else if (action !== 'remove') {
  console.error('usage: node scripts/bundle-cluster.mjs copy|remove');
  process.exit(2);
}
