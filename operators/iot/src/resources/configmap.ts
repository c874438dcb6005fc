/**
 * The instance's configuration: ConfigMap `iot-config` with key `config.yml`.
 *
 * Guarantees: config.yml holds the instance id, landscape, namespace, version and the in-namespace
 * endpoints of broker, database and core, followed by `spec.config` (keys sorted; the schema
 * forbids overriding the operator's keys in any spelling). Every key and every string value is
 * written as a double-quoted YAML scalar, so no `spec.config` entry can become YAML syntax (`<<`
 * a merge key, `yes` a boolean, `~` null) for any reader. Rendering is deterministic: the same instance gives
 * byte-identical text. `configChecksum` depends only on the ConfigMap data, so it changes exactly
 * when the configuration changes; it is put on every pod template to roll pods on a change
 * (subPath mounts do not see ConfigMap updates).
 */

import { createHash } from 'node:crypto';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import type { Instance } from './instance.ts';
import { instanceLabels } from './labels.ts';
import { PORTS } from './ports.ts';
import { BROKER_CLIENT_SERVICE, DATABASE_CLIENT_SERVICE } from './services.ts';

export const CONFIG_MAP_NAME = 'iot-config';
export const CONFIG_FILE_KEY = 'config.yml';
export const CONFIG_CHECKSUM_ANNOTATION = 'cp.iotservices.io/config-checksum';

export interface InstanceEndpoints {
  /** MQTT endpoint of the broker (the reference broker speaks MQTT only). */
  brokerMqtt: string;
  database: string;
  core: string;
}

/** `<service>.<namespace>.svc:<port>` for the instance's internal services: ClusterIPs, stable across pod restarts (services.ts). */
export function instanceEndpoints(instance: Instance): InstanceEndpoints {
  const host = (service: string) => `${service}.${instance.namespace}.svc`;
  return {
    brokerMqtt: `${host(BROKER_CLIENT_SERVICE)}:${PORTS.mqtt}`,
    database: `${host(DATABASE_CLIENT_SERVICE)}:${PORTS.database}`,
    core: `${host('core')}:${PORTS.http}`,
  };
}

/** The text of config.yml. */
export function renderConfigYaml(instance: Instance): string {
  const user = instance.spec.config ?? {};
  const document: Record<string, unknown> = {
    instance: instance.id,
    landscape: instance.landscape,
    namespace: instance.namespace,
    version: instance.spec.version,
    endpoints: instanceEndpoints(instance),
  };
  for (const key of Object.keys(user).sort()) document[key] = user[key];
  return (
    `# Managed by iot-operator for IoTService ${instance.id}; set spec.config instead of editing.\n` +
    stringify(document, { lineWidth: 0, defaultKeyType: 'QUOTE_DOUBLE', defaultStringType: 'QUOTE_DOUBLE' })
  );
}

export function desiredConfigMap(instance: Instance): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: CONFIG_MAP_NAME, namespace: instance.namespace, labels: instanceLabels(instance) },
    data: { [CONFIG_FILE_KEY]: renderConfigYaml(instance) },
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
