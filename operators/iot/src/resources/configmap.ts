/**
 * The instance's configuration: ConfigMap `iot-config` with key `config.yml`.
 *
 * Guarantees: config.yml holds the instance id, landscape, namespace, version, the in-namespace
 * endpoints of broker (NATS client port), database and core, `stream`: the replicas and the
 * size limit (`maxBytes`) of the broker's telemetry stream, and `retention`: how long telemetry is
 * kept (`seconds`, from `spec.retention`), and `events` (`seconds`, from `spec.eventRetention`,
 * only when it is not the data plane's default of a day), followed by `spec.config` (keys sorted; the schema
 * forbids overriding the operator's keys in any spelling). Every key and every string value is
 * written as a double-quoted YAML scalar, so no `spec.config` entry can become YAML syntax (`<<` a
 * merge key, `yes` a boolean, `~` null) for any reader; the numbers of `stream`, `retention`
 * and `events` are plain YAML integers. Rendering is deterministic: the same instance gives
 * byte-identical text. `configChecksum` depends only on the ConfigMap data, so it changes exactly
 * when the configuration changes; it is put on the pod templates of the components that read
 * config.yml (gateway, core, processing) to roll them on a change (subPath mounts do not see
 * ConfigMap updates).
 */

import { createHash } from 'node:crypto';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { retentionSeconds } from '../api/iotservice.ts';
import type { Instance } from './instance.ts';
import { instanceLabels } from './labels.ts';
import { PORTS } from './ports.ts';
import { quantityNanos } from './quantity.ts';
import { BROKER_CLIENT_SERVICE, DATABASE_CLIENT_SERVICE } from './services.ts';
import { dataVolume, type DataVolume, type KeptEmptyDirs } from './data-volume.ts';

export const CONFIG_MAP_NAME = 'iot-config';
export const CONFIG_FILE_KEY = 'config.yml';
export const CONFIG_CHECKSUM_ANNOTATION = 'cp.iotservices.io/config-checksum';

export interface InstanceEndpoints {
  /** The broker's NATS client endpoint. */
  broker: string;
  database: string;
  core: string;
}

/** `<service>.<namespace>.svc:<port>` for the instance's internal services: ClusterIPs, stable across pod restarts (services.ts). */
export function instanceEndpoints(instance: Instance): InstanceEndpoints {
  const host = (service: string) => `${service}.${instance.namespace}.svc`;
  return {
    broker: `${host(BROKER_CLIENT_SERVICE)}:${PORTS.brokerClient}`,
    database: `${host(DATABASE_CLIENT_SERVICE)}:${PORTS.database}`,
    core: `${host('core')}:${PORTS.http}`,
  };
}

/** The broker's stream limit without `maxBacklog` when the broker keeps its data in an emptyDir: 256 MiB. */
export const DEFAULT_STREAM_MAX_BYTES = 256 * 1024 * 1024;
/** The share of the broker's volume the stream may fill when `maxBacklog` is not set: 3/4. */
const STORAGE_SHARE = { numerator: 3n, denominator: 4n } as const;
const NANO_PER_BYTE = 1_000_000_000n;

/** The broker's telemetry stream as the data plane creates it. */
export interface StreamSettings {
  /** Copies of every message: `spec.broker.replicas` (1 or 3). */
  replicas: number;
  /** Most bytes the stream holds: `maxBacklog`, else 75 % of the broker's volume, else (an emptyDir) 256 MiB; whole bytes, rounded down, at least 1. */
  maxBytes: number | bigint;
}

/** A whole number of bytes as a number, or as a bigint beyond 2^53 (rendered exactly either way). */
function byteCount(bytes: bigint): number | bigint {
  return bytes <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(bytes) : bytes;
}

export function streamSettings(instance: Instance, brokerVolume: DataVolume): StreamSettings {
  const { replicas, maxBacklog } = instance.spec.broker;
  const backlog = maxBacklog ? quantityNanos(maxBacklog) : undefined;
  const stored = brokerVolume.kind === 'claim' ? quantityNanos(brokerVolume.size) : undefined;
  let maxBytes: number | bigint = DEFAULT_STREAM_MAX_BYTES;
  if (backlog !== undefined) maxBytes = byteCount(backlog / NANO_PER_BYTE);
  else if (stored !== undefined) {
    const share = (stored * STORAGE_SHARE.numerator) / STORAGE_SHARE.denominator / NANO_PER_BYTE;
    maxBytes = byteCount(share > 0n ? share : 1n);
  }
  return { replicas, maxBytes };
}

/** How long the data plane keeps telemetry. */
export interface RetentionSettings {
  /** `spec.retention` (default 30d) in seconds. */
  seconds: number;
}

export function retentionSettings(instance: Instance): RetentionSettings {
  return { seconds: retentionSeconds(instance.spec.retention) };
}

/** The data plane's own default for how long the event stream is kept (workloads/iot-service/src/shared/config.ts). */
const DATA_PLANE_EVENT_SECONDS = 86_400;

/**
 * How long the broker keeps the event stream applications follow: `spec.eventRetention` in
 * seconds; undefined when that is the data plane's own default (a day), so config.yml — and the
 * pods, which roll when it changes — stay as they were for every instance that keeps the default.
 */
export function eventSettings(instance: Instance): RetentionSettings | undefined {
  const seconds = retentionSeconds(instance.spec.eventRetention);
  return seconds === DATA_PLANE_EVENT_SECONDS ? undefined : { seconds };
}

/** The text of config.yml. */
export function renderConfigYaml(instance: Instance, kept: KeptEmptyDirs = new Set()): string {
  const user = instance.spec.config ?? {};
  const document: Record<string, unknown> = {
    instance: instance.id,
    landscape: instance.landscape,
    namespace: instance.namespace,
    version: instance.spec.version,
    endpoints: instanceEndpoints(instance),
    stream: streamSettings(instance, dataVolume(instance, 'broker', kept)),
    retention: retentionSettings(instance),
  };
  const events = eventSettings(instance);
  if (events) document.events = events;
  for (const key of Object.keys(user).sort()) document[key] = user[key];
  return (
    `# Managed by iot-operator for IoTService ${instance.id}; set spec.config instead of editing.\n` +
    stringify(document, { lineWidth: 0, defaultKeyType: 'QUOTE_DOUBLE', defaultStringType: 'QUOTE_DOUBLE' })
  );
}

export function desiredConfigMap(instance: Instance, kept: KeptEmptyDirs = new Set()): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: CONFIG_MAP_NAME, namespace: instance.namespace, labels: instanceLabels(instance) },
    data: { [CONFIG_FILE_KEY]: renderConfigYaml(instance, kept) },
  };
}

/** sha256 (hex) of the ConfigMap data, independent of key order. */
export function configChecksum(data: Readonly<Record<string, string>>): string {
  const hash = createHash('sha256');
  for (const key of Object.keys(data).sort()) {
    hash.update(`${key.length}:${key}`);
    const value = data[key] ?? '';
    hash.update(`${Buffer.byteLength(value)}:${value}`);
  }
  return hash.digest('hex');
}
