/**
 * The operators' Helm charts' README.md, generated from each chart's values.schema.json and
 * values.yaml: the generator `chart-readmes` of `npm run generate` writes them; `npm run generate
 * -- --check` fails when a committed README differs.
 *
 * Guarantees: the README lists every value the schema declares — one row per key the chart owns
 * (nested keys dotted, e.g. `metrics.prometheusRule.enabled`), free-form Kubernetes maps
 * (resources, nodeSelector, affinity, …) as one row — with its type as the schema has it (enums,
 * minimums), its default as values.yaml has it, and its description from the schema. A key of the
 * schema without a description, or without a default in values.yaml, is an error naming it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { notice, repoRoot as root, type Generator } from './generator.ts';

/** The charts whose README is generated, relative to the repository root. */
export const CHARTS = ['operators/iot/chart/iot-operator', 'operators/armada/chart/armada-operator'] as const;

export interface Schema {
  description?: string;
  type?: string | string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  examples?: unknown[];
  $ref?: string;
  definitions?: Record<string, Schema>;
}

export interface ValueRow {
  key: string;
  type: string;
  default: string;
  description: string;
}

/** `schema` with its `$ref` (to `#/definitions/…`) merged in; its own keywords win. */
function resolved(schema: Schema, top: Schema): Schema {
  if (!schema.$ref) return schema;
  const name = /^#\/definitions\/(.+)$/.exec(schema.$ref)?.[1];
  const target = name === undefined ? undefined : top.definitions?.[name];
  if (!target) throw new Error(`unresolved $ref ${schema.$ref}`);
  const { $ref: _ref, ...own } = schema;
  return { ...resolved(target, top), ...own };
}

/** An object whose keys the chart owns: its keys are listed one by one. */
const owned = (schema: Schema) => schema.additionalProperties === false && schema.properties !== undefined;

function typeText(node: Schema, top: Schema): string {
  const schema = resolved(node, top);
  if (schema.enum) return [...new Set(schema.enum.map(String))].map((v) => `\`${v}\``).join(' \\| ');
  const types = Array.isArray(schema.type) ? schema.type : [schema.type ?? 'any'];
  if (types.length === 1 && types[0] === 'array') return schema.items ? `list of ${typeText(schema.items, top)}` : 'list';
  if (types.length === 1 && types[0] === 'object' && typeof schema.additionalProperties === 'object') return `map of ${typeText(schema.additionalProperties, top)}`;
  let text = types.join(' or ');
  if (types.length === 1 && schema.minimum !== undefined && schema.maximum !== undefined) text += ` ${schema.minimum}–${schema.maximum}`;
  else if (types.length === 1 && schema.minimum !== undefined) text += ` ≥ ${schema.minimum}`;
  else if (types.length === 1 && schema.maximum !== undefined) text += ` ≤ ${schema.maximum}`;
  if (schema.examples) text += `, e.g. ${schema.examples.map((e) => `\`${String(e)}\``).join(', ')}`;
  return text;
}

function defaultText(value: unknown): string {
  if (value === '') return '`""`';
  const text = typeof value === 'object' && value !== null ? stringify(value, { collectionStyle: 'flow', lineWidth: 0 }).replace(/\s+/g, ' ').trim() : String(value);
  return `\`${text}\``;
}

/** The README rows of a chart: every key of `schema`, its default taken from `values`. */
export function valueRows(schema: Schema, values: Record<string, unknown>): ValueRow[] {
  const rows: ValueRow[] = [];
  const walk = (node: Schema, defaults: Record<string, unknown>, prefix: string) => {
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      const key = prefix + name;
      const own = resolved(child, schema);
      if (!(name in defaults)) throw new Error(`${key} is in values.schema.json but not in values.yaml`);
      if (owned(own)) walk(own, defaults[name] as Record<string, unknown>, `${key}.`);
      else {
        if (!own.description) throw new Error(`${key} has no description in values.schema.json`);
        rows.push({ key, type: typeText(own, schema), default: defaultText(defaults[name]), description: own.description });
      }
    }
  };
  walk(schema, values, '');
  return rows;
}

const cell = (text: string) => text.replaceAll('\n', ' ').replace(/(?<!\\)\|/g, '\\|');

/** The README of the chart in `chartDir` (absolute, or relative to the repository root). */
export function chartReadme(chartDir: string): string {
  const dir = path.resolve(root, chartDir);
  const chart = parse(readFileSync(path.join(dir, 'Chart.yaml'), 'utf8')) as { name: string; description: string; version: string };
  const schema = JSON.parse(readFileSync(path.join(dir, 'values.schema.json'), 'utf8')) as Schema;
  const values = parse(readFileSync(path.join(dir, 'values.yaml'), 'utf8')) as Record<string, unknown>;
  const relative = path.relative(root, dir);
  const example = chart.name === 'iot-operator'
    ? `helm install iot-operator ${relative} -n devawsk8s --set image.tag=0.1.0 --set replicas=2`
    : `helm install armada-operator ${relative} -n armada-system --create-namespace --set image.tag=0.1.0`;
  return [
    `<!-- ${notice(CHART_READMES.name, `${relative}/values.schema.json and values.yaml`)} -->`,
    `# ${chart.name} chart`,
    '',
    chart.description.trim(),
    '',
    '```sh',
    example,
    '```',
    '',
    'Helm checks the values against [values.schema.json](values.schema.json) on `install`, `upgrade`,',
    '`template` and `lint`: an unknown key (a typo), a value of the wrong type, outside its enum or',
    'range is refused before anything is rendered, e.g.',
    '',
    '```',
    `Error: values don't meet the specifications of the schema(s) in the following chart(s):`,
    `${chart.name}:`,
    `- at '/replicas': got string, want integer`,
    '```',
    '',
    'The path after `at` names the value to fix (`/a/b` is `a.b`; `at \'\'` is the top level). `--set`',
    'makes `true`/`false` booleans and whole numbers integers; `--set-string` keeps them strings,',
    'and a comma inside a `--set` value is written `\\,`.',
    '',
    '## Values',
    '',
    '| key | type | default | meaning |',
    '| --- | --- | --- | --- |',
    ...valueRows(schema, values).map((r) => `| \`${r.key}\` | ${cell(r.type)} | ${cell(r.default)} | ${cell(r.description)} |`),
    '',
  ].join('\n');
}

export const CHART_READMES: Generator = {
  name: 'chart-readmes',
  files: () => Object.fromEntries(CHARTS.map((chart) => [path.join(chart, 'README.md'), chartReadme(chart)])),
};
