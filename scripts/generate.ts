/**
 * `npm run generate [-- --check] [generator…]`: every generated file of the repository, from one
 * list of generators run in a fixed order (a later one may read what an earlier one writes: an
 * OLM bundle holds its operator's CRD and RBAC):
 *
 *   <operator>:generate   each operator's own `generate` package script (its CRDs), run through
 *                         npm as `npm run -w <operator> generate` (scripts/package-script.ts)
 *   <operator>:rbac       the SDK's RBAC of an operator with an operator-ts.json
 *   <operator>:webhooks   its webhook Service and configurations (only where it declares webhooks)
 *   <operator>:bundles    its committed OLM bundles and their catalog, re-rendered from deploy/
 *                         (only where it has a bundle/ directory)
 *   dockerfiles           every Dockerfile (scripts/dockerfiles.ts)
 *   alert-rules           the alert rules files and the charts' PrometheusRule templates (scripts/alert-rules.ts)
 *   chart-readmes         the charts' README.md (scripts/chart-values.ts)
 *   dashboards            the dashboards' copies (scripts/dashboards.ts)
 *   performance-report    docs/performance.md and docs/burst-distribution.svg (bench/report.ts)
 *
 * Every generated file starts with the notice of scripts/generator.ts naming its generator and its
 * source, except where the format has no comments or the file is the SDK's: the dashboards' copies
 * (JSON) and the operator-ts files (their first lines name `operator-ts generate …` and the
 * source, as in every project the SDK makes); the check names their source.
 *
 * Guarantees: without `--check` it writes exactly the files whose content differs (creating their
 * directories) and says which; with `--check` it writes nothing and exits 1 naming every file
 * that is missing or differs (its generator, its first differing line) and the command that fixes
 * it. Two generators never write one file. Nothing here needs the network or a cluster.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_REPORT, REPORT_GENERATOR, reportFiles } from '../bench/report.ts';
import { expectedOperatorFiles } from '../packages/sdk/src/generate/bundle.ts';
import { firstDifference, generatedRbac, generatedWebhooks } from '../packages/sdk/src/generate/generate.ts';
import { readProject } from '../packages/sdk/src/project.ts';
import { ALERT_RULES } from './alert-rules.ts';
import { CHART_READMES } from './chart-values.ts';
import { DASHBOARD_COPIES } from './dashboards.ts';
import { DOCKERFILES } from './dockerfiles.ts';
import { fromRoot, repoRoot, type Files, type Generator } from './generator.ts';
import { hasGenerateScript, packageScriptGenerator } from './package-script.ts';

const operators = readdirSync(path.join(repoRoot, 'operators')).sort().map((name) => `operators/${name}`);
const sdkProjects = operators.filter((dir) => existsSync(path.join(repoRoot, dir, 'operator-ts.json')));

/** An SDK generator's files (paths from the project) as paths from the repository root. */
const inProject = (dir: string, files: Files | Map<string, string>): Files =>
  Object.fromEntries([...(files instanceof Map ? files : Object.entries(files))].map(([file, text]) => [path.join(dir, file), text]));

const sdkGenerator = (dir: string, what: string, files: (projectDir: string) => Files | Map<string, string> | Promise<Files>): Generator => ({
  name: `${path.basename(dir)}:${what}`,
  unmarked: () => `made by the SDK, whose header names \`operator-ts generate\` and the source`,
  files: async () => inProject(dir, await files(path.join(repoRoot, dir))),
});

/** bench/report.ts's files from the committed results (`npm run bench -- report` writes the same). */
const PERFORMANCE_REPORT: Generator = {
  name: REPORT_GENERATOR,
  files: () => Object.fromEntries(Object.entries(reportFiles(DEFAULT_REPORT)).map(([file, text]) => [fromRoot(file), text])),
};

export const GENERATORS: readonly Generator[] = [
  ...operators.filter(hasGenerateScript).map(packageScriptGenerator),
  ...sdkProjects.flatMap((dir) => [
    sdkGenerator(dir, 'rbac', generatedRbac),
    ...((readProject(path.join(repoRoot, dir)).webhooks ?? []).length > 0 ? [sdkGenerator(dir, 'webhooks', generatedWebhooks)] : []),
    ...(existsSync(path.join(repoRoot, dir, 'bundle')) ? [sdkGenerator(dir, 'bundles', expectedOperatorFiles)] : []),
  ]),
  DOCKERFILES,
  ALERT_RULES,
  CHART_READMES,
  DASHBOARD_COPIES,
  PERFORMANCE_REPORT,
];

/** The generators named in `names` (all when none is), in the list's order; an unknown name is an error. */
export function selectGenerators(names: readonly string[]): Generator[] {
  const unknown = names.filter((name) => !GENERATORS.some((g) => g.name === name));
  if (unknown.length > 0) throw new Error(`no generator ${unknown.join(', ')}; there are ${GENERATORS.map((g) => g.name).join(', ')}`);
  return GENERATORS.filter((g) => names.length === 0 || names.includes(g.name));
}

export interface Output {
  generator: Generator;
  files: Files;
}

/**
 * Runs `generators` in order, handing what each would write to `use` before the next runs; fails
 * when two of them would write one file.
 */
async function eachGenerated(generators: readonly Generator[], use: (output: Output) => void): Promise<void> {
  const owner = new Map<string, string>();
  for (const generator of generators) {
    const files = await generator.files();
    for (const file of Object.keys(files)) {
      const other = owner.get(file);
      if (other !== undefined) throw new Error(`${file} is written by both ${other} and ${generator.name}`);
      owner.set(file, generator.name);
    }
    use({ generator, files });
  }
}

/** What each generator would write, in order, computed from the files as they are. */
export async function generatedFiles(generators: readonly Generator[]): Promise<Output[]> {
  const outputs: Output[] = [];
  await eachGenerated(generators, (output) => outputs.push(output));
  return outputs;
}

/** One line per generated file under `root` that is missing or differs, naming its generator; none when all are current. */
export function staleFiles(outputs: readonly Output[], root = repoRoot): string[] {
  return outputs.flatMap(({ generator, files }) =>
    Object.entries(files).flatMap(([file, text]) => {
      const full = path.join(root, file);
      const current = existsSync(full) ? readFileSync(full, 'utf8') : undefined;
      if (current === text) return [];
      const by = generator.unmarked ? `${generator.name}; ${generator.unmarked(file)}` : generator.name;
      return [`${file} (${by}): ${current === undefined ? 'missing' : `differs, ${firstDifference(text, current)}`}`];
    }),
  );
}

/** The check's report: empty when every file is current, else what is stale and how to fix it. */
export function checkReport(stale: readonly string[], names: readonly string[] = []): string {
  if (stale.length === 0) return '';
  const command = ['npm run generate', ...(names.length > 0 ? ['--', ...names] : [])].join(' ');
  return [`${stale.length} generated file${stale.length > 1 ? 's are' : ' is'} not what npm run generate writes:`, ...stale.map((line) => `  ${line}`), `Run \`${command}\` and commit the result.`].join('\n');
}

/** Runs `generators` in order, each writing under `root` what differs before the next runs; returns what it wrote. */
export async function writeGenerated(generators: readonly Generator[], root = repoRoot): Promise<string[]> {
  const written: string[] = [];
  await eachGenerated(generators, ({ generator, files }) => {
    for (const [file, text] of Object.entries(files)) {
      const full = path.join(root, file);
      if (existsSync(full) && readFileSync(full, 'utf8') === text) continue;
      mkdirSync(path.dirname(full), { recursive: true });
      writeFileSync(full, text);
      written.push(`${file} (${generator.name})`);
    }
  });
  return written;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const check = args.includes('--check');
  const names = args.filter((arg) => arg !== '--check');
  const generators = selectGenerators(names);
  if (check) {
    const report = checkReport(staleFiles(await generatedFiles(generators)), names);
    if (report) {
      console.error(report);
      process.exit(1);
    }
    console.log(`every file of ${generators.map((g) => g.name).join(', ')} is current`);
  } else {
    const written = await writeGenerated(generators);
    console.log(written.length > 0 ? written.map((file) => `wrote ${file}`).join('\n') : 'every generated file was current');
  }
}
