/**
 * Figures of the fault suite for docs/reliability.md: each fault test reports what was injected,
 * what the operator or runtime did, how long recovery took and how many objects were lost.
 *
 * Guarantees: `reportFault(row)` appends the row, stamped with the time, as one JSON line to the
 * file named by $FAULT_REPORT_FILE (set by `npm run faults`, scripts/faults.ts) and does nothing
 * when it is unset, so the tests run the same under `npm run test:e2e`; `readFaultRows(file)`
 * gives back every row so appended, in order.
 */
import { readFileSync } from 'node:fs';
import { appendFile } from 'node:fs/promises';

/** The environment variable naming the file the rows are appended to. */
export const FAULT_REPORT_FILE = 'FAULT_REPORT_FILE';

export interface FaultRow {
  /** The fault, as the table names it. */
  fault: string;
  /** How the fault proxy (or the test) injected it. */
  injection: string;
  /** What the operator or runtime did, as observed. */
  behaviour: string;
  /** From the fault's start to recovery, in milliseconds. */
  recoveryMs: number;
  objectsLost: number;
  /** The test that proves it. */
  test: string;
}

/** A row as reported: with the time it was reported at (ISO 8601). */
export type ReportedFault = FaultRow & { at: string };

export async function reportFault(row: FaultRow): Promise<void> {
  const file = process.env[FAULT_REPORT_FILE];
  if (!file) return;
  const reported: ReportedFault = { ...row, at: new Date().toISOString() };
  await appendFile(file, `${JSON.stringify(reported)}\n`);
}

export function readFaultRows(file: string): ReportedFault[] {
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as ReportedFault);
}
