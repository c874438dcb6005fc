/**
 * The version a component reports (in /healthz and its start log line).
 *
 * Guarantees: IOT_SERVICE_VERSION when set and non-empty (the image sets it to its tag), else the
 * version of this package's package.json.
 */

import packageJson from '../../package.json' with { type: 'json' };

export function serviceVersion(env: NodeJS.ProcessEnv = process.env): string {
  return env.IOT_SERVICE_VERSION || packageJson.version;
}
