/**
 * config.yml as the operator renders it, the ports the operator opens, credentials, the version
 * and the gateway's protocols: the components read what the operator gives them.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderConfigYaml } from '../../../operators/iot/src/resources/configmap.ts';
import { resolveInstance } from '../../../operators/iot/src/resources/instance.ts';
import { PORTS } from '../../../operators/iot/src/resources/ports.ts';
import { credential, parseConfig, parseEndpoint } from '../src/shared/config.ts';
import { CORE_API_PORT, GATEWAY_HTTP_PORT, GATEWAY_MQTT_PORT, HEALTH_PORT } from '../src/shared/ports.ts';
import { serviceVersion } from '../src/shared/version.ts';
import { gatewayProtocols } from '../src/gateway/protocols.ts';
import packageJson from '../package.json' with { type: 'json' };

test('parseConfig reads the config.yml the operator renders, spec.config entries included', () => {
  const resolved = resolveInstance(
    { metadata: { name: 'plant-7', uid: 'u-1' }, spec: { version: '2.4.1', config: { 'log.level': 'debug', yes: 'no' } } },
    { operatorName: 'landscape', defaultRegistry: 'registry.local/iot' },
  );
  assert.ok(resolved.ok);
  const config = parseConfig(renderConfigYaml(resolved.instance));
  assert.deepEqual(config, {
    instance: 'plant-7',
    landscape: 'landscape',
    namespace: 'landscape-plant-7',
    version: '2.4.1',
    endpoints: {
      broker: { host: 'broker-client.landscape-plant-7.svc', port: 4222 },
      database: { host: 'database-client.landscape-plant-7.svc', port: 5432 },
      core: { host: 'core.landscape-plant-7.svc', port: 8080 },
    },
    stream: { replicas: 1, maxBytes: 768 * 1024 * 1024 },
    retention: { seconds: 30 * 24 * 3600 },
    events: { seconds: 24 * 3600, maxBytes: 256 * 1024 * 1024 },
  });
});

const withStream = (stream: string) => `instance: a\nlandscape: l\nnamespace: n\nversion: "1"\nendpoints:\n  broker: "b:4222"\n  database: "d:5432"\n  core: "c:8080"\nretention:\n  seconds: 60\n${stream}`;

test('parseConfig reads the stream and retention the operator renders', () => {
  const config = (spec: Record<string, unknown>) => {
    const resolved = resolveInstance({ metadata: { name: 'plant-8', uid: 'u-2' }, spec: { version: '2.4.1', ...spec } }, { operatorName: 'landscape', defaultRegistry: 'registry.local/iot' });
    assert.ok(resolved.ok);
    return parseConfig(renderConfigYaml(resolved.instance)).stream;
  };
  assert.deepEqual(config({ broker: { replicas: 3, storage: '4Gi' } }), { replicas: 3, maxBytes: 3 * 1024 ** 3 });
  assert.deepEqual(config({ broker: { maxBacklog: '512Mi' } }), { replicas: 1, maxBytes: 512 * 1024 ** 2 });
  assert.deepEqual(parseConfig(withStream('stream:\n  replicas: "3"\n  maxBytes: "1024"\n')).stream, { replicas: 3, maxBytes: 1024 });
  assert.throws(() => parseConfig(withStream('')), /stream must be a mapping/);
  assert.throws(() => parseConfig(withStream('stream:\n  replicas: 2\n  maxBytes: 1\n')), /stream\.replicas must be 1 or 3/);
  assert.throws(() => parseConfig(withStream('stream:\n  replicas: 1\n  maxBytes: 0\n')), /stream\.maxBytes must be a positive whole number/);
  const resolved = resolveInstance({ metadata: { name: 'plant-9', uid: 'u-3' }, spec: { version: '2.4.1', retention: '12h' } }, { operatorName: 'landscape', defaultRegistry: 'registry.local/iot' });
  assert.ok(resolved.ok);
  assert.deepEqual(parseConfig(renderConfigYaml(resolved.instance)).retention, { seconds: 12 * 3600 });
  assert.throws(() => parseConfig(withStream('stream:\n  replicas: 1\n  maxBytes: 1\n').replace('seconds: 60', 'seconds: -1')), /retention\.seconds must be a positive whole number/);
});

test('parseConfig reads the events stream\'s limits, a day and a third of the telemetry stream\'s bytes by default', () => {
  const events = (text: string) => parseConfig(withStream(`stream:\n  replicas: 1\n  maxBytes: 300\n${text}`)).events;
  assert.deepEqual(events(''), { seconds: 86_400, maxBytes: 100 });
  assert.deepEqual(events('events:\n  seconds: "172800"\n  maxBytes: 5000\n'), { seconds: 172_800, maxBytes: 5000 });
  assert.throws(() => events('events:\n  seconds: 0\n'), /events\.seconds must be a positive whole number/);
  assert.throws(() => events('events:\n  maxBytes: lots\n'), /events\.maxBytes must be a positive whole number of bytes/);
  assert.throws(() => events('events: [1]\n'), /events must be a mapping/);
  const rendered = (eventRetention?: string) => {
    const resolved = resolveInstance({ metadata: { name: 'plant-10', uid: 'u-4' }, spec: { version: '2.4.1', ...(eventRetention ? { eventRetention } : {}) } }, { operatorName: 'landscape', defaultRegistry: 'registry.local/iot' });
    assert.ok(resolved.ok);
    return renderConfigYaml(resolved.instance);
  };
  assert.equal(parseConfig(rendered('48h')).events.seconds, 48 * 3600, 'spec.eventRetention as the operator renders it');
  assert.doesNotMatch(rendered(), /events/, 'the default (a day) is the data plane\'s own: config.yml unchanged');
  assert.equal(parseConfig(rendered()).events.seconds, 86_400);
});

test('parseConfig names the missing or malformed key', () => {
  assert.throws(() => parseConfig('- a list'), /not a mapping/);
  assert.throws(() => parseConfig('instance: a\nlandscape: l\nnamespace: n\nversion: "1"\n'), /endpoints must be a mapping/);
  const base = 'instance: a\nlandscape: l\nnamespace: n\nversion: "1"\nendpoints:\n  broker: "b:4222"\n  database: "d:5432"\n';
  assert.throws(() => parseConfig(base), /endpoints\.core must be a non-empty string/);
  assert.throws(() => parseConfig(`${base}  core: "c:99999"\n`), /endpoints\.core must be host:port/);
  assert.throws(() => parseConfig(base.replace('version: "1"', 'version: ""') + '  core: "c:8080"\n'), /version must be a non-empty string/);
});

test('parseEndpoint splits host and port, IPv6 in brackets', () => {
  assert.deepEqual(parseEndpoint('core.ns.svc:8080', 'k'), { host: 'core.ns.svc', port: 8080 });
  assert.deepEqual(parseEndpoint('[::1]:5432', 'k'), { host: '::1', port: 5432 });
  for (const bad of ['core', 'core:', ':80', 'core:0', 'a b:1']) assert.throws(() => parseEndpoint(bad, 'k'), /k must be host:port/);
});

test('the components listen where the operator points Services and probes', () => {
  assert.equal(CORE_API_PORT, PORTS.http);
  assert.equal(GATEWAY_HTTP_PORT, PORTS.http);
  assert.equal(GATEWAY_MQTT_PORT, PORTS.mqtt);
  assert.equal(HEALTH_PORT, PORTS.health);
});

test('credential returns the variable or names the missing one', () => {
  assert.equal(credential('IOT_API_TOKEN', { IOT_API_TOKEN: 't' }), 't');
  assert.throws(() => credential('IOT_BROKER_GATEWAY_PASSWORD', { IOT_BROKER_GATEWAY_PASSWORD: '' }), /IOT_BROKER_GATEWAY_PASSWORD \(from Secret iot-credentials\) is not set/);
});

test('serviceVersion: IOT_SERVICE_VERSION, else package.json', () => {
  assert.equal(serviceVersion({ IOT_SERVICE_VERSION: '2.4.1' }), '2.4.1');
  assert.equal(serviceVersion({}), packageJson.version);
});

test('gatewayProtocols: mqtt and http by default; unknown or unserved protocols refused by name', () => {
  assert.deepEqual([...gatewayProtocols({})], ['mqtt', 'http']);
  assert.deepEqual([...gatewayProtocols({ IOT_GATEWAY_PROTOCOLS: 'http' })], ['http']);
  assert.deepEqual([...gatewayProtocols({ IOT_GATEWAY_PROTOCOLS: ' http , mqtt ' })], ['http', 'mqtt']);
  assert.throws(() => gatewayProtocols({ IOT_GATEWAY_PROTOCOLS: ',' }), /names no protocol/);
  assert.throws(() => gatewayProtocols({ IOT_GATEWAY_PROTOCOLS: 'mqtt,amqp' }), /unknown protocol "amqp"/);
  assert.throws(() => gatewayProtocols({ IOT_GATEWAY_PROTOCOLS: 'mqtt,coap' }), /does not serve coap/);
  assert.deepEqual([...gatewayProtocols({ IOT_GATEWAY_PROTOCOLS: 'mqtt,mqtts,http,https' })], ['mqtt', 'mqtts', 'http', 'https']);
});
