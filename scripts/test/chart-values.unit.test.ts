// The operators' charts check their values (values.schema.json, offline with the project's helm):
// the defaults render; every `helm install|upgrade|template` of a chart written in the
// repository's docs renders with its values; a value of the wrong type, an unknown key (a typo),
// a value outside its enum or its range is refused with helm's message naming the key; each
// chart's README.md lists every value and is the one scripts/chart-values.ts generates.
//
//   node --import tsx --test scripts/test/chart-values.unit.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { CHARTS, chartReadme, readmePath, valueRows, type Schema } from '../chart-values.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
let helm = '';

before(async () => {
  helm = (await run('bash', [path.join(root, 'cluster/build-helm.sh')], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
});

/** `helm template` of `chart` with `args`; resolves to helm's output, rejects with its error. */
async function render(chart: string, args: string[]): Promise<string> {
  try {
    return (await run(helm, ['template', 'example', path.join(root, chart), '--namespace', 'example', ...args], { maxBuffer: 16 * 1024 * 1024 })).stdout;
  } catch (err) {
    throw new Error((err as { stderr?: string }).stderr || String(err));
  }
}

/**
 * Bash words of a command line: quotes removed, stops at a comment; `$…` expansions and the docs'
 * placeholders (`<version>`) become a sample value.
 */
function words(command: string): string[] {
  const line = command.replace(/<[A-Za-z][\w -]*>/g, 'x1');
  const out: string[] = [];
  let word: string | undefined;
  const add = (text: string) => (word = (word ?? '') + text);
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (/\s/.test(c)) {
      if (word !== undefined) out.push(word);
      word = undefined;
    } else if (c === '#' && word === undefined) break;
    else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      add(line.slice(i + 1, end));
      i = end;
    } else if (c === '\\') add(line[++i] ?? '');
    else if (c === '$') {
      const open = line[i + 1];
      const close = open === '(' ? ')' : open === '{' ? '}' : undefined;
      i = close ? line.indexOf(close, i) : i + (/^[A-Za-z_0-9]*/.exec(line.slice(i + 1))?.[0].length ?? 0);
      add('x1');
    } else if (c === '"') {
      for (i++; i < line.length && line[i] !== '"'; i++) {
        if (line[i] === '\\' && '$`"\\'.includes(line[i + 1]!)) add(line[++i]!);
        else if (line[i] === '$') {
          const close = line[i + 1] === '(' ? ')' : line[i + 1] === '{' ? '}' : undefined;
          i = close ? line.indexOf(close, i) : i + (/^[A-Za-z_0-9]*/.exec(line.slice(i + 1))?.[0].length ?? 0);
          add('x1');
        } else add(line[i]!);
      }
    } else add(c);
  }
  if (word !== undefined) out.push(word);
  return out;
}

interface DocExample {
  where: string;
  command: string;
  chart: string;
  /** The value flags of the command (--set, --set-string, --set-json, --values), as helm template takes them. */
  valueArgs: string[];
}

function markdownFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry.startsWith('.')) continue;
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) markdownFiles(full, out);
    else if (entry.endsWith('.md')) out.push(full);
  }
  return out;
}

/** Every `helm install|upgrade|template` of one of the charts in the repository's Markdown. */
function docExamples(): DocExample[] {
  const files = ['README.md', 'cluster/README.md', ...['docs', 'operators'].flatMap((d) => markdownFiles(path.join(root, d)).map((f) => path.relative(root, f)))];
  const examples: DocExample[] = [];
  for (const file of files) {
    const lines = readFileSync(path.join(root, file), 'utf8').split('\n');
    lines.forEach((line, index) => {
      const start = line.search(/helm (install|upgrade|template) /);
      if (start < 0) return;
      const inline = line.slice(0, start).split('`').length % 2 === 0;
      let command = line.slice(start);
      if (inline) command = command.slice(0, command.indexOf('`'));
      for (let next = index + 1; !inline && command.trimEnd().endsWith('\\') && next < lines.length; next++) command = `${command.trimEnd().slice(0, -1)} ${lines[next]!.trim()}`;
      const argv = words(command);
      const chart = CHARTS.find((c) => argv.some((w) => w.endsWith(c.slice(c.indexOf('/chart/') + 1))));
      if (!chart) return;
      const valueArgs: string[] = [];
      for (let i = 0; i < argv.length; i++) {
        const [flag, inlineValue] = argv[i]!.split(/=(.*)/s) as [string, string | undefined];
        if (!['--set', '--set-string', '--set-json', '--values', '-f'].includes(flag)) continue;
        const value = inlineValue ?? argv[++i]!;
        valueArgs.push(flag, flag === '--values' || flag === '-f' ? path.resolve(root, path.dirname(file), value) : value);
      }
      examples.push({ where: `${file}:${index + 1}`, command: command.trim(), chart, valueArgs });
    });
  }
  return examples;
}

/** Helm's refusal of a value at `pointer` (JSON pointer, e.g. /sharding), with `message`. */
const refusal = (chartName: string, pointer: string, message: string) =>
  new RegExp(`values don't meet the specifications of the schema\\(s\\) in the following chart\\(s\\):\\n${chartName}:\\n(- .*\\n)*- at '${pointer}': ${message}`);

describe('the charts’ values schemas', () => {
  const examples = docExamples();

  for (const chart of CHARTS) {
    const name = path.basename(chart);

    describe(name, () => {
      it('renders with the default values, and helm lint passes', async () => {
        assert.match(await render(chart, []), /^kind: Deployment$/m);
        await run(helm, ['lint', path.join(root, chart)]);
      });

      it('renders every example of the docs that installs it, with its values', async () => {
        const mine = examples.filter((e) => e.chart === chart);
        assert.ok(mine.some((e) => e.valueArgs.length > 0), `the docs install ${chart} with values somewhere`);
        for (const example of mine) {
          await render(chart, example.valueArgs).catch((err: Error) => assert.fail(`${example.where}: ${example.command}\n${err.message}`));
        }
      });

      it('refuses a value of the wrong type, naming it', async () => {
        await assert.rejects(render(chart, ['--set', 'replicas=abc']), refusal(name, '/replicas', 'got string, want integer'));
        await assert.rejects(render(chart, ['--set', 'leaderElect=yes']), refusal(name, '/leaderElect', 'got string, want boolean'));
        await assert.rejects(render(chart, ['--set', 'nodeSelector.pool=1']), refusal(name, '/nodeSelector/pool', 'got number, want string'));
        await assert.rejects(render(chart, ['--set-json', 'tolerations={"key":"a"}']), refusal(name, '/tolerations', 'got object, want array'));
      });

      it('refuses an unknown key (a typo), naming it and where it is', async () => {
        await assert.rejects(render(chart, ['--set', 'replica=2']), refusal(name, '', "additional properties 'replica' not allowed"));
        await assert.rejects(render(chart, ['--set', 'image.pullpolicy=Always']), refusal(name, '/image', "additional properties 'pullpolicy' not allowed"));
        await assert.rejects(render(chart, ['--set', 'metrics.prometheusRule.enable=true']), refusal(name, '/metrics/prometheusRule', "additional properties 'enable' not allowed"));
      });

      it('refuses a value outside its enum; auto, true and false are taken as --set gives them', async () => {
        await assert.rejects(render(chart, ['--set', 'image.pullPolicy=Sometimes']), refusal(name, '/image/pullPolicy', "value must be one of 'Always', 'IfNotPresent', 'Never'"));
        await assert.rejects(render(chart, ['--set', 'logLevel=verbose']), refusal(name, '/logLevel', 'value must be one of'));
        await assert.rejects(render(chart, ['--set', 'metrics.serviceMonitor=yes']), refusal(name, '/metrics/serviceMonitor', "value must be one of 'auto', true, false"));
        await assert.rejects(render(chart, ['--set', 'metrics.prometheusRule.enabled=1']), refusal(name, '/metrics/prometheusRule/enabled', 'value must be one of'));
        const monitors = async (...args: string[]) => (await render(chart, args)).includes('kind: ServiceMonitor');
        assert.equal(await monitors('--set', 'metrics.serviceMonitor=true'), true, 'a boolean true');
        assert.equal(await monitors('--set-string', 'metrics.serviceMonitor=true'), true, 'the string "true"');
        assert.equal(await monitors('--set', 'metrics.serviceMonitor=false', '--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'), false, 'a boolean false');
        assert.equal(await monitors('--set', 'metrics.serviceMonitor=auto', '--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'), true, 'auto where the API is served');
      });

      it('refuses a value out of its range or format, naming it', async () => {
        await assert.rejects(render(chart, ['--set', 'replicas=-1']), refusal(name, '/replicas', 'minimum: got -1, want 0'));
        await assert.rejects(render(chart, ['--set', 'resources.limits.memory=lots']), refusal(name, '/resources/limits/memory', "'lots' does not match pattern"));
        await assert.rejects(render(chart, ['--set', 'watchNamespace=Not_A_Namespace']), refusal(name, '/watchNamespace', "'Not_A_Namespace' does not match pattern"));
        assert.match(await render(chart, ['--set', 'replicas=0', '--set', 'image.tag=20261123']), /replicas: 0\n[\s\S]*:20261123"/);
      });
    });
  }

  it('iot-operator: reconciles, durations, quotas and Service types are checked', async () => {
    const chart = CHARTS[0];
    await assert.rejects(render(chart, ['--set', 'maxConcurrentReconciles=0']), refusal('iot-operator', '/maxConcurrentReconciles', 'minimum: got 0, want 1'));
    await assert.rejects(render(chart, ['--set', 'sharding.enabld=true']), refusal('iot-operator', '/sharding', "additional properties 'enabld' not allowed"));
    for (const bad of ['5', '500ms', '5 minutes', '0s']) await assert.rejects(render(chart, ['--set-string', `stuckPodTimeout=${bad}`]), refusal('iot-operator', '/stuckPodTimeout', `'${bad}' does not match pattern`), bad);
    await assert.rejects(render(chart, ['--set', 'metrics.prometheusRule.instanceFailedFor=5 min']), refusal('iot-operator', '/metrics/prometheusRule/instanceFailedFor', "'5 min' does not match pattern"));
    await assert.rejects(render(chart, ['--set', 'maxQuota=cpu=lots']), refusal('iot-operator', '/maxQuota', "'cpu=lots' does not match pattern"));
    await assert.rejects(render(chart, ['--set', 'maxQuota=gpu=1']), refusal('iot-operator', '/maxQuota', "'gpu=1' does not match pattern"));
    await assert.rejects(render(chart, ['--set', 'allowedServiceTypes=ExternalName']), refusal('iot-operator', '/allowedServiceTypes', "'ExternalName' does not match pattern"));
    const rendered = await render(chart, ['--set', 'maxQuota=cpu=16\\,memory=32Gi\\,storage=1Ti', '--set', 'allowedServiceTypes=ClusterIP\\,LoadBalancer',
      '--set', 'stuckPodTimeout=90s', '--set', 'metrics.prometheusRule.instanceFailedFor=1h30m']);
    assert.match(rendered, /--max-quota=cpu=16,memory=32Gi,storage=1Ti/);
    assert.match(rendered, /--stuck-pod-timeout=90s/);
  });

  it('armada-operator: extra RBAC rules need verbs, pull secrets a name', async () => {
    const chart = CHARTS[1];
    await assert.rejects(render(chart, ['--set-json', 'rbac.extraRules=[{"apiGroups":["networking.k8s.io"],"resources":["ingresses"]}]']),
      refusal('armada-operator', '/rbac/extraRules/0', "missing property 'verbs'"));
    await assert.rejects(render(chart, ['--set-json', 'imagePullSecrets=["image-pull-secret"]']), refusal('armada-operator', '/imagePullSecrets/0', 'got string, want object'));
    assert.match(await render(chart, ['--set-json', 'rbac.extraRules=[{"apiGroups":["networking.k8s.io"],"resources":["ingresses"],"verbs":["get"]}]']), /- ingresses/);
  });

  describe('the charts’ README', () => {
    for (const chart of CHARTS) {
      it(`${chart}/README.md is generated from its schema and values (node --import tsx scripts/chart-values.ts)`, () => {
        assert.equal(readFileSync(readmePath(chart), 'utf8'), chartReadme(chart));
      });

      it(`${chart}/README.md lists every key of values.yaml`, () => {
        const dir = path.join(root, chart);
        const schema = JSON.parse(readFileSync(path.join(dir, 'values.schema.json'), 'utf8')) as Schema;
        const values = parse(readFileSync(path.join(dir, 'values.yaml'), 'utf8')) as Record<string, unknown>;
        const listed = valueRows(schema, values).map((r) => r.key);
        // Every leaf of values.yaml is a row, or inside one (a free-form map such as resources).
        const leaves = (node: unknown, prefix: string): string[] =>
          node && typeof node === 'object' && !Array.isArray(node) && Object.keys(node).length > 0
            ? Object.entries(node).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k))
            : [prefix];
        for (const leaf of leaves(values, '')) assert.ok(listed.some((key) => leaf === key || leaf.startsWith(`${key}.`)), `${leaf} is listed`);
      });
    }
  });
});
