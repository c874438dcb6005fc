// The project's helm (cluster/engines/build.sh helm) is stamped as Helm's release build is: it reports
// its version and the Kubernetes version of its client, and renders every chart of the repository
// offline with `helm template` — no cluster, no --kube-version — charts that require a recent
// Kubernetes (kubeVersion >= 1.27) included.
//
//   node --import tsx --test cluster/test/helm.e2e.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { before, describe, test } from 'node:test';
import { repoRoot } from '../src/index.ts';

const run = promisify(execFile);
let helm = '';

/** Every directory under operators/ that holds a Chart.yaml. */
function charts(dir = path.join(repoRoot, 'operators'), found: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry === 'dist') continue;
    const full = path.join(dir, entry);
    if (entry === 'Chart.yaml') found.push(dir);
    else if (statSync(full).isDirectory()) charts(full, found);
  }
  return found;
}

before(async () => {
  helm = (await run('bash', [path.join(repoRoot, 'cluster/engines/build.sh'), 'helm'], { timeout: 900_000 })).stdout.trim().split('\n').at(-1)!;
});

describe('the project’s helm', () => {
  test('reports its version, and offline takes Kubernetes to be 1.33 (its client’s), not the unstamped default 1.20', async () => {
    assert.match((await run(helm, ['version'])).stdout, /Version:"v3\.18\.6"/);
    const chart = mkdtempSync(path.join(os.tmpdir(), 'kube-version-chart-'));
    try {
      mkdirSync(path.join(chart, 'templates'));
      writeFileSync(path.join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: kube-version\nversion: 0.1.0\n');
      writeFileSync(path.join(chart, 'templates/cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: v\ndata:\n  kube: "{{ .Capabilities.KubeVersion.Version }}"\n');
      assert.match((await run(helm, ['template', 'v', chart])).stdout, /kube: "v1\.33\.0"/);
    } finally {
      rmSync(chart, { recursive: true, force: true });
    }
  });

  const found = charts();
  test('finds the operators’ charts', () => {
    assert.ok(found.some((c) => c.endsWith('chart/iot-operator')), `charts found: ${found.join(', ')}`);
  });
  for (const chart of found) {
    test(`renders ${path.relative(repoRoot, chart)} offline with helm template`, async () => {
      const { stdout } = await run(helm, ['template', 'check', chart, '--namespace', 'charts-offline'], { maxBuffer: 16 * 1024 * 1024 });
      assert.match(stdout, /^kind: /m, 'at least one object rendered');
    });
  }
});
