/**
 * `npm run generate:bundle -- <operator> --version X [--replaces Y] [--channel C] [--image I]`:
 * writes the OLM bundle operators/<operator>/bundle/X/ from the operator's deploy/ and
 * regenerates its file-based catalog (see scripts/olm/bundle.ts for the layout).
 *
 * Guarantees: bad input (unknown operator, a version that is not semver, a `replaces` that is
 * not an older committed bundle, manifests that cannot make a CSV) exits 1 with one line saying
 * what is wrong, and writes nothing.
 */
import { Command } from 'commander';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_CHANNEL, generateBundle } from './olm/bundle.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const program = new Command('generate-bundle')
  .description('Generate an OLM bundle (ClusterServiceVersion, CRDs, metadata, bundle.Dockerfile) and the file-based catalog from an operator\'s deploy/')
  .argument('<operator>', 'operator directory name under operators/, e.g. memcached')
  .requiredOption('--version <semver>', 'version of this bundle, e.g. 0.0.2')
  .option('--replaces <semver>', 'the committed bundle version this one upgrades')
  .option('--channel <name>', 'channel of the bundle', DEFAULT_CHANNEL)
  .option('--image <ref>', 'operator image (default registry.example.com/<deployment>:v<version>)')
  .action((operator: string, opts: { version: string; replaces?: string; channel: string; image?: string }) => {
    const operatorDir = path.join(root, 'operators', operator);
    if (!existsSync(path.join(operatorDir, 'deploy'))) throw new Error(`no operator "${operator}" (expected ${path.relative(root, operatorDir)}/deploy)`);
    const written = generateBundle(operatorDir, opts);
    for (const file of written) console.log(`wrote ${path.relative(root, path.join(operatorDir, file))}`);
  });

try {
  program.parse();
} catch (err) {
  console.error(`generate-bundle: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
