/**
 * What a component reads from the operator: config.yml (at IOT_CONFIG_FILE) and the credentials
 * of iot-credentials passed as environment variables.
 *
 * Guarantees: `parseConfig` accepts exactly the document the operator renders (instance,
 * landscape, namespace, version, endpoints, stream, retention; further `spec.config` keys are
 * ignored) and throws a message naming the missing or malformed key otherwise; every endpoint is
 * split into host and port; `stream.replicas` is 1 or 3, and `stream.maxBytes` and
 * `retention.seconds` are positive whole numbers (a YAML number or a decimal string); the optional
 * `events` (`seconds`, `maxBytes`, each positive whole numbers) defaults to a day and a third of
 * `stream.maxBytes`. `credential` returns a non-empty environment variable or throws naming it. Nothing here
 * logs or returns a credential in any other form.
 */

import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** Where the operator mounts config.yml unless IOT_CONFIG_FILE says otherwise. */
export const DEFAULT_CONFIG_FILE = '/etc/sap/config.yml';

/** The role each component is at the database, each allowed only what it does (image/database.sh). */
export const DATABASE_ROLES = { core: 'iot_core', processing: 'iot_processing' } as const;
/** The user each component is at the broker, each with its own permissions (image/broker.sh). */
export const BROKER_USERS = { gateway: 'gateway', processing: 'processing', core: 'core' } as const;
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
  endpoints: { broker: Endpoint; database: Endpoint; core: Endpoint };
  /** The telemetry stream at the broker (broker.ts). */
  stream: StreamConfig;
  /** How long telemetry is kept (`spec.retention`). */
  retention: { seconds: number };
  /** The events stream applications follow (shared/events.ts). */
  events: EventsConfig;
}

export interface EventsConfig {
  /** How long the stream keeps an event: how far back an application can resume. */
  seconds: number;
  /** Most bytes it holds; beyond, the oldest events go first. */
  maxBytes: number;
}

/** How far back applications can resume when config.yml names no `events.seconds`: a day. */
export const DEFAULT_EVENTS_SECONDS = 86_400;

export interface StreamConfig {
  /** Copies of every message: 1 or 3 brokers. */
  replicas: 1 | 3;
  /** Most bytes the stream holds for processing; beyond it the gateway refuses instead of acknowledging. */
  maxBytes: number;
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
  return withEvents(root, {
    instance: stringAt(root, 'instance'),
    landscape: stringAt(root, 'landscape'),
    namespace: stringAt(root, 'namespace'),
    version: stringAt(root, 'version'),
    endpoints: { broker: at('broker'), database: at('database'), core: at('core') },
    stream: parseStream(root.stream),
    retention: parseRetention(root.retention),
  });
}

function withEvents(root: Record<string, unknown>, config: Omit<ServiceConfig, 'events'>): ServiceConfig {
  return { ...config, events: parseEvents(root.events, config.stream) };
}

/** Optional `events: {seconds, maxBytes}`; defaults: a day, and a third of the telemetry stream's bytes. */
function parseEvents(value: unknown, stream: StreamConfig): EventsConfig {
  if (value === undefined || value === null) return { seconds: DEFAULT_EVENTS_SECONDS, maxBytes: Math.floor(stream.maxBytes / 3) };
  if (typeof value !== 'object' || Array.isArray(value)) throw new Error('config.yml: events must be a mapping');
  const { seconds, maxBytes } = value as Record<string, unknown>;
  const count = seconds === undefined ? DEFAULT_EVENTS_SECONDS : wholeNumber(seconds);
  if (!(count > 0)) throw new Error(`config.yml: events.seconds must be a positive whole number, got ${JSON.stringify(seconds)}`);
  const bytes = maxBytes === undefined ? Math.floor(stream.maxBytes / 3) : wholeNumber(maxBytes);
  if (!(bytes > 0)) throw new Error(`config.yml: events.maxBytes must be a positive whole number of bytes, got ${JSON.stringify(maxBytes)}`);
  return { seconds: count, maxBytes: bytes };
}

function parseRetention(value: unknown): { seconds: number } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('config.yml: retention must be a mapping');
  const { seconds } = value as Record<string, unknown>;
  const count = wholeNumber(seconds);
  if (!(count > 0)) throw new Error(`config.yml: retention.seconds must be a positive whole number, got ${JSON.stringify(seconds)}`);
  return { seconds: count };
}

function wholeNumber(value: unknown): number {
  const number = typeof value === 'string' && /^\d{1,16}$/.test(value) ? Number(value) : value;
  return typeof number === 'number' && Number.isSafeInteger(number) ? number : Number.NaN;
}

function parseStream(value: unknown): StreamConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('config.yml: stream must be a mapping');
  const { replicas, maxBytes } = value as Record<string, unknown>;
  const copies = wholeNumber(replicas);
  if (copies !== 1 && copies !== 3) throw new Error(`config.yml: stream.replicas must be 1 or 3, got ${JSON.stringify(replicas)}`);
  const bytes = wholeNumber(maxBytes);
  if (!(bytes > 0)) throw new Error(`config.yml: stream.maxBytes must be a positive whole number of bytes, got ${JSON.stringify(maxBytes)}`);
  return { replicas: copies, maxBytes: bytes };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const file = env.IOT_CONFIG_FILE || DEFAULT_CONFIG_FILE;
  return parseConfig(readFileSync(file, 'utf8'));
}

/** Environment variables the operator sets from iot-credentials. */
export type CredentialVariable =
  | 'IOT_API_TOKEN'
  | 'IOT_DEVICE_CHECK_TOKEN'
  | 'IOT_BROKER_GATEWAY_PASSWORD'
  | 'IOT_BROKER_PROCESSING_PASSWORD'
  | 'IOT_BROKER_CORE_PASSWORD'
  | 'IOT_DATABASE_CORE_PASSWORD'
  | 'IOT_DATABASE_PROCESSING_PASSWORD';

export function credential(name: CredentialVariable, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (!value) throw new Error(`environment variable ${name} (from Secret iot-credentials) is not set`);
  return value;
}
