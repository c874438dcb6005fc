/**
 * What a component reads from the operator: config.yml (at IOT_CONFIG_FILE) and the credentials
 * of iot-credentials passed as environment variables.
 *
 * Guarantees: `parseConfig` accepts exactly the document the operator renders (instance,
 * landscape, namespace, version, endpoints; further `spec.config` keys are ignored) and throws a
 * message naming the missing or malformed key otherwise; every endpoint is split into host and
 * port. `credential` returns a non-empty environment variable or throws naming it. Nothing here
 * logs or returns a credential in any other form.
 */

import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** Where the operator mounts config.yml unless IOT_CONFIG_FILE says otherwise. */
export const DEFAULT_CONFIG_FILE = '/etc/sap/config.yml';

/** The user the broker and the database know the components as (iot-credentials holds only passwords). */
export const SERVICE_USER = 'iot';
/** The database holding devices and telemetry. */
export const DATABASE_NAME = 'iot';

export interface Endpoint {
  host: string;
  port: number;
}

export interface ServiceConfig {
  instance: string;
  landscape: string;
  namespace: string;
  /** `spec.version`: the version the operator intends to run (the image's own is `serviceVersion`). */
  version: string;
  endpoints: { brokerMqtt: Endpoint; database: Endpoint; core: Endpoint };
}

/** `host:port` (a bracketed IPv6 host allowed) → Endpoint. */
export function parseEndpoint(text: string, key: string): Endpoint {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s]+):(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (!match?.[1] || !(port >= 1 && port <= 65535)) throw new Error(`config.yml: ${key} must be host:port, got ${JSON.stringify(text)}`);
  return { host: match[1].replace(/^\[(.*)\]$/, '$1'), port };
}

function stringAt(document: Record<string, unknown>, key: string, prefix = ''): string {
  const value = document[key];
  if (typeof value !== 'string' || value === '') throw new Error(`config.yml: ${prefix}${key} must be a non-empty string`);
  return value;
}

export function parseConfig(text: string): ServiceConfig {
  const document: unknown = parse(text);
  if (typeof document !== 'object' || document === null || Array.isArray(document)) throw new Error('config.yml: not a mapping');
  const root = document as Record<string, unknown>;
  const endpoints = root.endpoints;
  if (typeof endpoints !== 'object' || endpoints === null || Array.isArray(endpoints)) {
    throw new Error('config.yml: endpoints must be a mapping');
  }
  const at = (key: string) => parseEndpoint(stringAt(endpoints as Record<string, unknown>, key, 'endpoints.'), `endpoints.${key}`);
  return {
    instance: stringAt(root, 'instance'),
    landscape: stringAt(root, 'landscape'),
    namespace: stringAt(root, 'namespace'),
    version: stringAt(root, 'version'),
    endpoints: { brokerMqtt: at('brokerMqtt'), database: at('database'), core: at('core') },
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const file = env.IOT_CONFIG_FILE || DEFAULT_CONFIG_FILE;
  return parseConfig(readFileSync(file, 'utf8'));
}

/** Environment variables the operator sets from iot-credentials. */
export type CredentialVariable = 'IOT_API_TOKEN' | 'IOT_BROKER_PASSWORD' | 'IOT_DATABASE_PASSWORD';

export function credential(name: CredentialVariable, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (!value) throw new Error(`environment variable ${name} (from Secret iot-credentials) is not set`);
  return value;
}
