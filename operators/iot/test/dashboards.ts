/**
 * The Grafana dashboards of this repository as tests read them: the operator runtime's (serving
 * every operator on the runtime) and the IoT instances', each from its one source
 * (scripts/dashboards.ts, whose generator writes the copies), so every test holds the same files.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { DashboardPanel } from '@iot-operator/runtime';
import { DASHBOARDS } from '../../../scripts/dashboards.ts';
import { repoRoot } from '../../../scripts/generator.ts';

/** Each dashboard's source (absolute), as scripts/dashboards.ts lists it; its copies are generated from it. */
export const DASHBOARD_SOURCES = {
  runtime: path.join(repoRoot, DASHBOARDS.runtime.source),
  iot: path.join(repoRoot, DASHBOARDS.iot.source),
};

export interface Dashboard {
  uid: string;
  title: string;
  templating: { list: Array<{ name: string; type: string; query?: string | { query: string } }> };
  panels: Array<DashboardPanel & { type: string; title: string }>;
}

export function readDashboard(file: string): Dashboard {
  return JSON.parse(readFileSync(file, 'utf8')) as Dashboard;
}
