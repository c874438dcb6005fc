import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backupScheduleSeconds, retentionSeconds } from '../src/api/iotservice.ts';
import { validateIoTServiceSpec } from '../src/api/validation.ts';

function errorsOf(spec: unknown): string[] {
  const result = validateIoTServiceSpec(spec);
  assert.equal(result.ok, false, `expected ${JSON.stringify(spec)} to be rejected`);
  return result.ok ? [] : result.errors;
}

describe('IoTService spec validation', () => {
  it('applies the documented defaults to a minimal spec', () => {
    const result = validateIoTServiceSpec({ version: '2.4.1' });
    assert.ok(result.ok);
    assert.deepEqual(result.spec, {
      version: '2.4.1',
      paused: false,
      retention: '30d',
      eventRetention: '1d',
      gateway: { replicas: 2, protocols: ['mqtts', 'https'], serviceType: 'ClusterIP' },
      core: { replicas: 2 },
      processing: { replicas: 1 },
      broker: { replicas: 1 },
      database: { replicas: 1 },
    });
  });

  it('keeps what the user set and does not modify its input', () => {
    const input = { version: '3.0.0-rc.1', gateway: { replicas: 0, protocols: ['coap'] }, broker: { storage: '10Gi' } };
    const copy = structuredClone(input);
    const result = validateIoTServiceSpec(input);
    assert.ok(result.ok);
    assert.equal(result.spec.gateway.replicas, 0);
    assert.deepEqual(result.spec.gateway.protocols, ['coap']);
    assert.equal(result.spec.broker.storage, '10Gi');
    assert.deepEqual(input, copy);
  });

  it('rejects a missing or empty version', () => {
    assert.deepEqual(errorsOf({}), ['spec.version: required field is missing']);
    assert.match(errorsOf({ version: '' }).join(), /^spec\.version: must be an image tag/);
    assert.match(errorsOf({ version: '-1.0' }).join(), /^spec\.version: must be an image tag/);
  });

  it('rejects replicas out of range with the allowed range in the message', () => {
    assert.deepEqual(errorsOf({ version: '1', gateway: { replicas: 51 } }), ['spec.gateway.replicas: must be an integer from 0 to 50']);
    assert.deepEqual(errorsOf({ version: '1', processing: { replicas: 9 } }), ['spec.processing.replicas: must be an integer from 0 to 8']);
    assert.deepEqual(errorsOf({ version: '1', core: { replicas: 1.5 } }), ['spec.core.replicas: must be an integer from 0 to 20']);
  });

  it('runs the broker on 1 or 3 replicas only, saying why, like the CRD rule', () => {
    const message = 'spec.broker.replicas: broker.replicas must be 1 or 3: 3 replicates every message on three brokers (any one may fail)';
    for (const replicas of [0, 2, 4, 5, 7, 1.5]) assert.deepEqual(errorsOf({ version: '1', broker: { replicas } }), [message], `replicas ${replicas}`);
    for (const replicas of [1, 3]) {
      const result = validateIoTServiceSpec({ version: '1', broker: { replicas } });
      assert.ok(result.ok && result.spec.broker.replicas === replicas, `replicas ${replicas}`);
    }
  });

  it('runs the database on 1 or 3 replicas only, saying why', () => {
    assert.deepEqual(errorsOf({ version: '1', database: { replicas: 2 } }), ['spec.database.replicas: database.replicas must be 1 or 3: 3 runs a primary and two synchronous standbys (any one may fail)']);
    for (const replicas of [0, 5]) assert.equal(errorsOf({ version: '1', database: { replicas } }).length, 1, `replicas ${replicas}`);
    for (const replicas of [1, 3]) assert.ok(validateIoTServiceSpec({ version: '1', database: { replicas } }).ok, `replicas ${replicas}`);
  });

  it('takes the broker\'s maxBacklog as a size of at least one byte', () => {
    for (const maxBacklog of ['512Mi', '2Gi', '1.5Gi', '2G', '750M', '1048576', '1']) {
      const result = validateIoTServiceSpec({ version: '1', broker: { maxBacklog } });
      assert.ok(result.ok && result.spec.broker.maxBacklog === maxBacklog, maxBacklog);
    }
    for (const maxBacklog of ['0', '0.5Gi', '', '512 Mi', '100m', '1e9', '-1Gi', '1Ei']) {
      assert.deepEqual(errorsOf({ version: '1', broker: { maxBacklog } }), ['spec.broker.maxBacklog: must be a size in bytes such as 512Mi, 1.5Gi or 2G (starting with a digit from 1 to 9)'], maxBacklog);
    }
    assert.deepEqual(errorsOf({ version: '1', broker: { maxBacklog: 1024 } }), ['spec.broker.maxBacklog: must be a size in bytes such as 512Mi, 1.5Gi or 2G (starting with a digit from 1 to 9)']);
    assert.deepEqual(errorsOf({ version: '1', database: { maxBacklog: '1Gi' } }), ['spec.database.maxBacklog: unknown field'], 'the broker\'s only');
  });

  it('takes retention as a whole number of s, m, h or d, 30d by default, refusing anything else like the CRD rule', () => {
    for (const retention of ['30d', '12h', '90m', '1s', '999999d', '7d']) {
      const result = validateIoTServiceSpec({ version: '1', retention });
      assert.ok(result.ok && result.spec.retention === retention, retention);
    }
    const message = 'spec.retention: retention must be a whole number of s, m, h or d, e.g. 30d';
    for (const retention of ['', '0d', '030d', '30', 'd', '30D', '30 d', ' 30d', '30d ', '1w', '1.5h', '-1d', '1000000d', '30days', 'P30D', '1h30m']) {
      assert.deepEqual(errorsOf({ version: '1', retention }), [message], JSON.stringify(retention));
    }
    assert.deepEqual(errorsOf({ version: '1', retention: 30 }), [message], 'a number');
    assert.deepEqual(errorsOf({ version: '1', retention: 'x'.repeat(65) }), [message], 'too long');
  });

  it('takes eventRetention the same way, 1d by default', () => {
    const defaulted = validateIoTServiceSpec({ version: '1' });
    assert.ok(defaulted.ok && defaulted.spec.eventRetention === '1d');
    const longer = validateIoTServiceSpec({ version: '1', eventRetention: '72h' });
    assert.ok(longer.ok && longer.spec.eventRetention === '72h');
    for (const eventRetention of ['1w', '0d', '']) {
      assert.deepEqual(errorsOf({ version: '1', eventRetention }), ['spec.eventRetention: eventRetention must be a whole number of s, m, h or d, e.g. 1d'], JSON.stringify(eventRetention));
    }
  });

  it('takes spec.backup with a volume claim target, defaulting a daily full backup and 7 kept, refusing a malformed schedule or retention', () => {
    const target = { volumeClaim: { size: '20Gi' } };
    const result = validateIoTServiceSpec({ version: '1', backup: { target } });
    assert.ok(result.ok);
    assert.deepEqual(result.spec.backup, { schedule: '1d', retention: 7, target });
    const without = validateIoTServiceSpec({ version: '1' });
    assert.ok(without.ok && without.spec.backup === undefined, 'no backup unless asked');
    const scheduleMessage = 'spec.backup.schedule: must be a whole number of m, h or d between full backups, e.g. 1d';
    for (const schedule of ['', '0h', '30s', '1w', '1h30m', '6 h']) {
      assert.deepEqual(errorsOf({ version: '1', backup: { schedule, target } }), [scheduleMessage], JSON.stringify(schedule));
    }
    assert.deepEqual(errorsOf({ version: '1', backup: { retention: 0, target } }), ['spec.backup.retention: must be an integer from 1 to 100']);
    assert.deepEqual(errorsOf({ version: '1', backup: {} }).length, 1, 'a target is required');
    assert.deepEqual(errorsOf({ version: '1', backup: { target: { volumeClaim: { size: '0Gi' } } } }), [
      'spec.backup.target.volumeClaim.size: must be a size in bytes such as 20Gi (starting with a digit from 1 to 9)',
    ]);
  });

  it('takes spec.backup with an S3 target, path-style in us-east-1 by default, and exactly one of volumeClaim and s3', () => {
    const s3 = { endpoint: 's3.example.com:9000', bucket: 'iot-backups', credentialsSecret: 'backup-s3' };
    const result = validateIoTServiceSpec({ version: '1', backup: { target: { s3 } } });
    assert.ok(result.ok);
    assert.deepEqual(result.spec.backup?.target, { s3: { ...s3, region: 'us-east-1', uriStyle: 'path' } });
    const one = 'spec.backup.target: must set exactly one of volumeClaim and s3';
    assert.deepEqual(errorsOf({ version: '1', backup: { target: {} } }), [one]);
    assert.deepEqual(errorsOf({ version: '1', backup: { target: { s3, volumeClaim: { size: '1Gi' } } } }), [one]);
    assert.deepEqual(errorsOf({ version: '1', backup: { target: { s3: { ...s3, endpoint: 'https://s3.example.com' } } } }), ['spec.backup.target.s3.endpoint: must be host[:port], without scheme or path']);
    assert.deepEqual(errorsOf({ version: '1', backup: { target: { s3: { ...s3, bucket: 'No_Such' } } } }), ['spec.backup.target.s3.bucket: must be an S3 bucket name']);
    assert.equal(errorsOf({ version: '1', backup: { target: { s3: { endpoint: 's3.example.com', bucket: 'b3k' } } } }).length, 1, 'a credentials Secret is required');
  });

  it('reads a backup schedule as seconds', () => {
    assert.equal(backupScheduleSeconds('1d'), 86400);
    assert.equal(backupScheduleSeconds('6h'), 21600);
    assert.equal(backupScheduleSeconds('5m'), 300);
    assert.throws(() => backupScheduleSeconds('5s'), /schedule must be/);
  });

  it('reads a retention as seconds', () => {
    assert.equal(retentionSeconds('30d'), 2592000);
    assert.equal(retentionSeconds('12h'), 43200);
    assert.equal(retentionSeconds('90m'), 5400);
    assert.equal(retentionSeconds('1s'), 1);
    assert.equal(retentionSeconds('999999d'), 86399913600);
    assert.throws(() => retentionSeconds('1w'), /retention must be a whole number of s, m, h or d, e\.g\. 30d/);
  });

  it('rejects an unknown protocol, naming the list item', () => {
    assert.deepEqual(errorsOf({ version: '1', gateway: { protocols: ['mqtt', 'amqp'] } }), [
      'spec.gateway.protocols[1]: must be one of mqtt, mqtts, http, https, coap',
    ]);
  });

  it('rejects an empty or repeated protocol list', () => {
    assert.match(errorsOf({ version: '1', gateway: { protocols: [] } }).join(), /^spec\.gateway\.protocols: must list at least one/);
    assert.match(errorsOf({ version: '1', gateway: { protocols: ['http', 'http'] } }).join(), /each at most once/);
  });

  it('rejects a malformed storage quantity and malformed resource quantities', () => {
    assert.deepEqual(errorsOf({ version: '1', broker: { storage: '10 GB' } }), [
      'spec.broker.storage: must be empty, "ephemeral" or a Kubernetes quantity such as 10Gi',
    ]);
    assert.deepEqual(errorsOf({ version: '1', database: { storage: '-1Gi' } }), [
      'spec.database.storage: must be empty, "ephemeral" or a Kubernetes quantity such as 10Gi',
    ]);
    assert.deepEqual(errorsOf({ version: '1', core: { resources: { limits: { cpu: '1x' }, requests: { memory: -1 } } } }), [
      'spec.core.resources.limits.cpu: must be a non-negative Kubernetes quantity such as 500m, 2, 512Mi or 10Gi',
      'spec.core.resources.requests.memory: must be a non-negative Kubernetes quantity such as 500m, 2, 512Mi or 10Gi',
    ]);
  });

  it('accepts integer and string quantities', () => {
    const result = validateIoTServiceSpec({
      version: '1',
      gateway: { resources: { limits: { cpu: 2, memory: '512Mi' }, requests: { cpu: '0.5', 'nvidia.com/gpu': 1 } } },
    });
    assert.ok(result.ok);
  });

  it('gateway.connections: a positive int32, absent by default', () => {
    const accepted = validateIoTServiceSpec({ version: '1', gateway: { connections: 1 } });
    assert.ok(accepted.ok && accepted.spec.gateway.connections === 1);
    const unset = validateIoTServiceSpec({ version: '1' });
    assert.ok(unset.ok && unset.spec.gateway.connections === undefined, 'no default: the gateway keeps its own (no cap)');
    assert.ok(validateIoTServiceSpec({ version: '1', gateway: { connections: 2147483647 } }).ok);
    for (const connections of [0, -5, 1.5, 2147483648, '100']) {
      assert.deepEqual(errorsOf({ version: '1', gateway: { connections } }), ['spec.gateway.connections: must be an integer from 1 to 2147483647'], String(connections));
    }
  });

  it('rejects an unknown service type', () => {
    assert.deepEqual(errorsOf({ version: '1', gateway: { serviceType: 'Ingress' } }), [
      'spec.gateway.serviceType: must be one of ClusterIP, NodePort, LoadBalancer',
    ]);
  });

  it('rejects unknown fields at any level', () => {
    assert.deepEqual(errorsOf({ version: '1', replicas: 3 }), ['spec.replicas: unknown field']);
    assert.deepEqual(errorsOf({ version: '1', gateway: { port: 1883 } }), ['spec.gateway.port: unknown field']);
  });

  it('quotes map keys with dots or slashes in error paths', () => {
    assert.deepEqual(errorsOf({ version: '1', core: { placement: { nodeSelector: { 'kubernetes.io/os': 1 } } } }), [
      'spec.core.placement.nodeSelector["kubernetes.io/os"]: expected string',
    ]);
  });

  it('accepts a core/v1 affinity on every component and keeps it as given', () => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, { key: 'node.example.com/cores', operator: 'Gt', values: ['4'] }] },
            { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-000001'] }] },
          ],
        },
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 100, preference: { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['zone-a'] }] } },
          { weight: 1, preference: { matchExpressions: [{ key: 'node.example.com/spot', operator: 'DoesNotExist' }] } },
        ],
      },
      podAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'broker' } }, topologyKey: 'topology.kubernetes.io/zone', namespaceSelector: {} },
        ],
      },
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 50,
            podAffinityTerm: {
              labelSelector: { matchExpressions: [{ key: 'app.kubernetes.io/component', operator: 'In', values: ['gateway'] }] },
              topologyKey: 'kubernetes.io/hostname',
              namespaces: ['devawsk8s-tenant-a'],
              matchLabelKeys: ['pod-template-hash'],
              mismatchLabelKeys: ['tenant'],
            },
          },
        ],
      },
    };
    const placement = { affinity };
    const spec = { version: '1', gateway: { placement }, core: { placement }, processing: { placement }, broker: { placement }, database: { placement } };
    const result = validateIoTServiceSpec(spec);
    assert.ok(result.ok, JSON.stringify(result));
    for (const component of ['gateway', 'core', 'processing', 'broker', 'database'] as const) {
      assert.deepEqual(result.spec[component].placement?.affinity, affinity, component);
    }
  });

  it('rejects a malformed affinity with the field and what it must be', () => {
    const nodeTerms = (operator: string) => ({
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator, values: ['n'] }] }] } },
    });
    const required = 'spec.gateway.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution';
    assert.deepEqual(errorsOf({ version: '1', gateway: { placement: { affinity: nodeTerms('Near') } } }), [
      `${required}.nodeSelectorTerms[0].matchExpressions[0].operator: must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt`,
    ]);
    assert.deepEqual(errorsOf({ version: '1', gateway: { placement: { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [] } } } } } }), [
      `${required}.nodeSelectorTerms: must be a list of 1 to 16 node selector terms`,
    ]);
    assert.deepEqual(errorsOf({ version: '1', gateway: { placement: { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: {} } } } } }), [
      `${required}.nodeSelectorTerms: required field is missing`,
    ]);

    const antiAffinity = (term: Record<string, unknown>) => ({
      podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 50, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname' }, ...term }] },
    });
    const preferred = 'spec.broker.placement.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]';
    for (const weight of [0, 101, 2.5]) {
      assert.deepEqual(errorsOf({ version: '1', broker: { placement: { affinity: antiAffinity({ weight }) } } }), [`${preferred}.weight: must be an integer from 1 to 100`], `weight ${weight}`);
    }
    assert.deepEqual(errorsOf({ version: '1', broker: { placement: { affinity: antiAffinity({ podAffinityTerm: { labelSelector: { matchLabels: { a: 'b' } } } }) } } }), [
      `${preferred}.podAffinityTerm.topologyKey: required field is missing`,
    ]);
    assert.deepEqual(errorsOf({ version: '1', broker: { placement: { affinity: antiAffinity({ podAffinityTerm: { topologyKey: '' } }) } } }), [
      `${preferred}.podAffinityTerm.topologyKey: must be a label key of 1 to 317 characters`,
    ]);
    assert.deepEqual(
      errorsOf({ version: '1', broker: { placement: { affinity: antiAffinity({ podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] } } }) } } }),
      [`${preferred}.podAffinityTerm.labelSelector.matchExpressions[0].operator: must be one of In, NotIn, Exists, DoesNotExist`],
    );
    assert.deepEqual(errorsOf({ version: '1', broker: { placement: { affinity: antiAffinity({ podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', topologyKeys: ['x'] } }) } } }), [
      `${preferred}.podAffinityTerm.topologyKeys: unknown field`,
    ]);
    assert.deepEqual(errorsOf({ version: '1', core: { placement: { affinity: { nodeAffinity: {}, podAntiAffinity: {}, nodeAntiAffinity: {} } } } }), ['spec.core.placement.affinity.nodeAntiAffinity: unknown field']);
    assert.deepEqual(
      errorsOf({ version: '1', core: { placement: { affinity: { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: Array.from({ length: 17 }, () => ({ topologyKey: 'kubernetes.io/hostname' })) } } } } }),
      ['spec.core.placement.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution: must be a list of at most 16 terms'],
    );
  });

  it('rejects storageClassName with storage: ephemeral, like the CRD rule', () => {
    assert.deepEqual(errorsOf({ version: '1', database: { storage: 'ephemeral', storageClassName: 'fast' } }), [
      'spec.database.storageClassName: storageClassName cannot be set with storage: ephemeral (an emptyDir has no StorageClass)',
    ]);
    assert.ok(validateIoTServiceSpec({ version: '1', database: { storage: '5Gi', storageClassName: 'fast' } }).ok);
    assert.ok(validateIoTServiceSpec({ version: '1', database: { storageClassName: 'fast' } }).ok, 'the default size in that class');
    assert.ok(validateIoTServiceSpec({ version: '1', broker: { storage: 'ephemeral' } }).ok);
    assert.equal(validateIoTServiceSpec({ version: '1', broker: { storage: 'Ephemeral' } }).ok, false);
  });

  it('rejects config keys the operator writes itself', () => {
    assert.match(errorsOf({ version: '1', config: { version: '9' } }).join(), /^spec\.config: config must not set instance, landscape/);
    for (const key of ['stream', 'Stream', 'STREAM', 'stre_am', 'retention', 'Retention', 'RETENTION', 're-ten.tion', 'events', 'EVENTS', 'ev-ents']) {
      assert.match(errorsOf({ version: '1', config: { [key]: '1' } }).join(), /^spec\.config: config must not set .*endpoints, stream, retention, events in any case/, key);
    }
    assert.ok(validateIoTServiceSpec({ version: '1', config: { logLevel: 'debug' } }).ok);
  });

  it('rejects a registry that is not a registry path', () => {
    assert.match(errorsOf({ version: '1', registry: 'https://registry.example.com' }).join(), /^spec\.registry: must be a registry host/);
    assert.ok(validateIoTServiceSpec({ version: '1', registry: 'registry.example.com:5000/iot' }).ok);
  });

  it('rejects a spec that is not an object', () => {
    assert.deepEqual(errorsOf(null), ['spec: must be an object with at least spec.version']);
    assert.deepEqual(errorsOf('2.4.1'), ['spec: must be an object with at least spec.version']);
  });
});
