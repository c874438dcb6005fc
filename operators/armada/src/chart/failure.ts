/**
 * Which failures of an ArmadaChart are worth retrying, as Flux's helm-controller tells them apart:
 * a deterministic failure (the spec itself is wrong) stops the chart with a `Stalled` condition
 * until the spec changes; a transient one (network, API server, timeouts) is retried with a
 * growing delay.
 *
 * Guarantees (pure):
 * - `helmFailureStalls(message)` is true for what Helm says when the same inputs can never
 *   succeed: values the chart's schema rejects, a template that does not render or renders
 *   invalid YAML or objects, a chart that cannot be loaded, objects the API server refuses as
 *   invalid. Anything else (timeouts, refused connections, throttling, "forbidden", conflicts)
 *   is transient.
 * - `stalledReason(message)` names the kstatus reason of a stalled Helm failure.
 * - `retryDelayMs(failures)`: 10 s, 20 s, 40 s … at most 5 min.
 */

const DETERMINISTIC: Array<[RegExp, string]> = [
  [/values don't meet the specifications of the schema/i, 'InvalidValues'],
  [/parse error|template: |execution error|YAML parse error|error converting YAML|unable to build kubernetes objects|error validating data/i, 'RenderFailed'],
  [/Chart\.yaml file is missing|chart metadata \(Chart\.yaml\)|chart requires kubeVersion|found in Chart\.yaml, but missing in charts\/|no such file or directory|validation: chart\./i, 'ChartInvalid'],
  [/ is invalid: |Invalid value: /i, 'ObjectsRejected'],
];

export function helmFailureStalls(message: string): boolean {
  return DETERMINISTIC.some(([pattern]) => pattern.test(message));
}

export function stalledReason(message: string): string {
  return DETERMINISTIC.find(([pattern]) => pattern.test(message))?.[1] ?? 'HelmFailed';
}

export function retryDelayMs(failures: number): number {
  return Math.min(10_000 * 2 ** Math.max(0, failures - 1), 300_000);
}
