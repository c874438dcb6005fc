/**
 * The Grafana dashboards: each has one source, and the generator `dashboards` of `npm run
 * generate` writes its copies — the charts can read only files inside the chart, and the SDK
 * ships its own.
 *
 * Guarantees: every copy is byte for byte its source. A dashboard is JSON, which has no comments,
 * so a copy cannot say it is generated: `npm run generate -- --check` names its source instead.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot, type Generator } from './generator.ts';

/** Each dashboard's source and its copies, by path from the repository root. */
export const DASHBOARDS = {
  runtime: {
    source: 'packages/runtime/dashboards/operator-runtime.json',
    copies: [
      'operators/iot/chart/iot-operator/dashboards/operator-runtime.json',
      'operators/armada/chart/armada-operator/dashboards/operator-runtime.json',
      'packages/sdk/dashboards/operator-runtime.json',
    ],
  },
  iot: {
    source: 'operators/iot/dashboards/iot-instances.json',
    copies: ['operators/iot/chart/iot-operator/dashboards/iot-instances.json'],
  },
} as const;

export const DASHBOARD_COPIES: Generator = {
  name: 'dashboards',
  unmarked: (copy) => `JSON has no comments: a copy of ${Object.values(DASHBOARDS).find((d) => (d.copies as readonly string[]).includes(copy))?.source}, edit that`,
  files: () =>
    Object.fromEntries(
      Object.values(DASHBOARDS).flatMap(({ source, copies }) => {
        const text = readFileSync(path.join(repoRoot, source), 'utf8');
        return copies.map((copy) => [copy, text]);
      }),
    ),
};
