/**
 * A bench phase and the tear-down that must follow it.
 *
 * Guarantees: the tear-down runs once after the phase, whether it succeeded or failed. When the
 * phase failed, its error is the one thrown, and a tear-down that fails as well is reported and
 * otherwise ignored: a run's log and result name what went wrong first, not the clean-up of what
 * it left (a failed phase often leaves a control plane too busy to tear down in time). When the
 * phase succeeded, a failing tear-down fails the run.
 */
export async function withTeardown<T>(
  phase: () => Promise<T>,
  teardown: () => Promise<void>,
  report: (line: string) => void,
): Promise<T> {
  let result: T;
  try {
    result = await phase();
  } catch (err) {
    await teardown().catch((teardownErr: unknown) => report(`tear-down after the failure below failed too: ${String(teardownErr)}`));
    throw err;
  }
  await teardown();
  return result;
}
