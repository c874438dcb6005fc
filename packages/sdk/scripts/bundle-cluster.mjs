// Ships the local control plane with the package: `copy` (prepack) puts the repository's
// cluster/ scripts, pinned versions and Go modules into packages/sdk/cluster/; `remove`
// (postpack) deletes that copy, so the workspace keeps one source of truth (cluster/ at the
// repository root, which the CLI uses when no copy is present). Tests and development-only
// scripts are left out. Running either twice changes nothing.
import { cpSync, rmSync } from 'node:fs';

const source = new URL('../../../cluster/', import.meta.url);
const target = new URL('../cluster/', import.meta.url);
const shipped = ['README.md', 'build.sh', 'up.sh', 'down.sh', 'status.sh', 'versions.env', 'kwokctl.yaml', 'kwok-stages', 'build-olm.sh', 'lib', 'etcd', 'k8s', 'kwok'];

const action = process.argv[2];
rmSync(target, { recursive: true, force: true });
if (action === 'copy') {
  for (const entry of shipped) cpSync(new URL(entry, source), new URL(entry, target), { recursive: true });
} else if (action !== 'remove') {
  console.error('usage: node scripts/bundle-cluster.mjs copy|remove');
  process.exit(2);
}
