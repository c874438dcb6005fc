/**
 * The Grafana dashboards of this repository, where they are defined and where copies are kept:
 * the operator runtime's (serving every operator on the runtime) and the IoT instances'. Tests
 * read them from here, so every test holds the same files.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DashboardPanel } from '@iot-operator/runtime';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** Each dashboard's source, and the copies that must equal it (the charts', the SDK's). */
export const DASHBOARDS = {
  runtime: {
    source: path.join(repoRoot, 'packages/runtime/dashboards/operator-runtime.json'),
    copies: [
      path.join(repoRoot, 'operators/iot/chart/iot-operator/dashboards/operator-runtime.json'),
      path.join(repoRoot, 'operators/armada/chart/armada-operator/dashboards/operator-runtime.json'),
      path.join(repoRoot, 'packages/sdk/dashboards/operator-runtime.json'),
    ],
  },
  iot: {
    source: path.join(repoRoot, 'operators/iot/dashboards/iot-instances.json'),
    copies: [path.join(repoRoot, 'operators/iot/chart/iot-operator/dashboards/iot-instances.json')],
  },
} as const;

export interface Dashboard {
  uid: string;
  title: string;
  templating: { list: Array<{ name: string; type: string; query?: string | { query: string } }> };
  panels: Array<DashboardPanel & { type: string; title: string }>;
}

export function readDashboard(file: string): Dashboard {
  return JSON.parse(readFileSync(file, 'utf8')) as Dashboard;
}
