/**
 * Figures of the fault suite for docs/reliability.md: each fault test reports what was injected,
 * what the operator or runtime did, how long recovery took and how many objects were lost.
 *
 * Guarantees: `reportFault(row)` appends the row as one JSON line to the file named by
 * $FAULT_REPORT_FILE (set by `npm run faults`) and does nothing when it is unset, so the tests
 * run the same under `npm run test:e2e`.
 */
import { appendFile } from 'node:fs/promises';

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

export async function reportFault(row: FaultRow): Promise<void> {
  const file = process.env.FAULT_REPORT_FILE;
  if (!file) return;
  await appendFile(file, `${JSON.stringify({ ...row, at: new Date().toISOString() })}\n`);
}
