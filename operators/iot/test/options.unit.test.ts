// The IoT operator's command line: /metrics bound to loopback unless told otherwise, its own client
// budget (200 / 400) unless --kube-api-qps / --kube-api-burst say otherwise, secure metrics from a
// certificate directory, --namespace with its alias --watch-namespace, the config mount path and
// the tenant policy flags (placement: allowed toleration and node label keys), the stuck window (--stuck-pod-timeout), the sharding flags (refused,
// with the flag named, when they cannot work), the admission webhook's server (none unless
// --webhook-cert-dir is given), and the conversion Service the CRD is kept pointed at (none unless
// --conversion-service or IOT_CONVERSION_SERVICE names one; it needs the webhook's certificate), and
// the Secret the operator keeps its own webhook certificate in (--webhook-cert-secret).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { iotRateLimitDefaults, parseOperatorOptions } from '../src/options.ts';
import { DEFAULT_NODE_LABEL_KEYS } from '../src/resources/placement-policy.ts';

const parse = (...args: string[]) => parseOperatorOptions(['--operator-name', 'devawsk8s', ...args]);

/** The operator started with `args`: its exit code and what it wrote to stderr. */
function start(...args: string[]): { status: number | null; stderr: string } {
  const bin = path.join(path.dirname(fileURLToPath(import.meta.url)), '../bin/iot-operator.js');
  const { status, stderr } = spawnSync(process.execPath, [bin, '--operator-name', 'devawsk8s', ...args], { encoding: 'utf8', timeout: 30_000 });
  return { status, stderr };
}

describe('IoT operator options', () => {
  it('--shard-ring runs the operator as one shard, named --shard-name, else POD_NAME', () => {
    assert.equal(parse().shard, undefined);
    assert.deepEqual(parse('--shard-ring', 'iot-devawsk8s', '--shard-name', 'iot-operator-0').shard, { ring: 'iot-devawsk8s', name: 'iot-operator-0' });
    const before = process.env.POD_NAME;
    process.env.POD_NAME = 'iot-operator-7d9c-x2k4p';
    try {
      assert.deepEqual(parse('--shard-ring', 'iot-devawsk8s').shard, { ring: 'iot-devawsk8s', name: 'iot-operator-7d9c-x2k4p' });
    } finally {
      if (before === undefined) delete process.env.POD_NAME;
      else process.env.POD_NAME = before;
    }
  });

  it('refuses sharding flags that cannot work, naming the flag, before connecting anywhere', () => {
    const both = start('--shard-ring', 'iot-devawsk8s', '--leader-elect');
    assert.equal(both.status, 1);
    assert.match(both.stderr, /--shard-ring and --leader-elect exclude each other/);
    const nameOnly = start('--shard-name', 'iot-operator-0');
    assert.equal(nameOnly.status, 1);
    assert.match(nameOnly.stderr, /--shard-name needs --shard-ring/);
    const badName = start('--shard-ring', 'iot-devawsk8s', '--shard-name', 'Operator_0');
    assert.equal(badName.status, 1);
    assert.match(badName.stderr, /shard name "Operator_0" must be a lower-case DNS name/);
  });

  it('defaults: loopback metrics, the IoT client budget, plain HTTP', () => {
    const options = parse();
    assert.equal(options.metricsBindAddress, '127.0.0.1:8080');
    assert.deepEqual(options.rateLimit, iotRateLimitDefaults);
    assert.deepEqual(iotRateLimitDefaults, { qps: 200, burst: 400 });
    assert.equal(options.secureMetrics, undefined);
  });

  it('flags set the client budget and secure metrics', () => {
    const options = parse('--kube-api-qps', '20', '--kube-api-burst', '30', '--metrics-secure', '--metrics-cert-dir', '/var/run/metrics-cert');
    assert.deepEqual(options.rateLimit, { qps: 20, burst: 30 });
    assert.deepEqual(options.secureMetrics, { certFile: '/var/run/metrics-cert/tls.crt', keyFile: '/var/run/metrics-cert/tls.key' });
  });

  it('--namespace limits the watches, as on every operator; --watch-namespace is its alias', () => {
    assert.equal(parse('--namespace', 'team-a').watchNamespace, 'team-a');
    assert.equal(parse('--watch-namespace', 'team-b').watchNamespace, 'team-b');
    assert.equal(parse('--namespace', 'same', '--watch-namespace', 'same').watchNamespace, 'same');
  });

  it('the stuck window is 5 minutes unless --stuck-pod-timeout says otherwise; a malformed or out-of-range one is refused naming the flag', () => {
    assert.equal(parse().stuckPodTimeoutMs, 5 * 60_000);
    assert.equal(parse('--stuck-pod-timeout', '20s').stuckPodTimeoutMs, 20_000);
    assert.equal(parse('--stuck-pod-timeout', '10m').stuckPodTimeoutMs, 600_000);
    for (const [value, message] of [['20', /--stuck-pod-timeout "20" must be a duration such as 20s or 5m/], ['0s', /must be a duration/], ['500ms', /--stuck-pod-timeout "500ms" must be between 1s and 24h/], ['25h', /between 1s and 24h/]] as const) {
      const refused = start('--stuck-pod-timeout', value);
      assert.equal(refused.status, 1, value);
      assert.match(refused.stderr, message);
    }
    const help = spawnSync(process.execPath, [path.join(path.dirname(fileURLToPath(import.meta.url)), '../bin/iot-operator.js'), '--help'], { encoding: 'utf8', timeout: 30_000 });
    const line = help.stdout.replace(/\s+/g, ' ');
    assert.match(line, /--stuck-pod-timeout <duration> how long a pod may fail to pull its image, crash-loop or wait for its volume before its IoTService is Failed \(tests shorten it\) \(default: "5m"\)/);
  });

  it('the stall window is 60 s unless --ingestion-stalled-after says otherwise; one not in whole seconds from 10s to 1h is refused naming the flag', () => {
    assert.equal(parse().ingestionStalledAfterSeconds, 60);
    assert.equal(parse('--ingestion-stalled-after', '15s').ingestionStalledAfterSeconds, 15);
    assert.equal(parse('--ingestion-stalled-after', '5m').ingestionStalledAfterSeconds, 300);
    for (const [value, message] of [['15', /--ingestion-stalled-after "15" must be a duration such as 30s or 2m/], ['5s', /--ingestion-stalled-after "5s" must be whole seconds between 10s and 1h/], ['10500ms', /whole seconds/], ['2h', /between 10s and 1h/]] as const) {
      const refused = start('--ingestion-stalled-after', value);
      assert.equal(refused.status, 1, value);
      assert.match(refused.stderr, message);
    }
  });

  it('config.yml is mounted where the seed says unless --config-mount-path says otherwise', () => {
    assert.equal(parse().configMountPath, '/etc/sap/config.yml');
    assert.equal(parse('--config-mount-path', '/srv/iot/config.yml').configMountPath, '/srv/iot/config.yml');
  });

  it('the tenant policy defaults to the default registry, ClusterIP and the built-in quota; flags override it', () => {
    const defaults = parse('--default-registry', 'mirror.local/iot').tenancy!;
    assert.deepEqual(defaults.allowedRegistries, ['mirror.local/iot']);
    assert.deepEqual(defaults.allowedServiceTypes, ['ClusterIP']);
    assert.deepEqual(defaults.defaultQuota, { cpu: '4', memory: '8Gi', storage: '100Gi' });
    const custom = parse('--allowed-registries', 'a.example/x, b.example/', '--allowed-service-types', 'ClusterIP,LoadBalancer', '--max-quota', 'memory=65536Mi', '--default-container-requests', 'cpu=0.1').tenancy!;
    assert.deepEqual(custom.allowedRegistries, ['a.example/x', 'b.example']);
    assert.deepEqual(custom.allowedServiceTypes, ['ClusterIP', 'LoadBalancer']);
    assert.deepEqual(custom.maxQuota, { cpu: '16', memory: '64Gi', storage: '1Ti' });
    assert.deepEqual(custom.containerDefaults.requests, { cpu: '100m' });
  });

  it('placement: no toleration and the well-known node labels by default; the flags replace the lists, empty allows none, * any', () => {
    const defaults = parse().tenancy!;
    assert.deepEqual(defaults.allowedTolerationKeys, []);
    assert.deepEqual(defaults.allowedNodeLabelKeys, [...DEFAULT_NODE_LABEL_KEYS]);
    const custom = parse('--allowed-toleration-keys', 'example.com/dedicated, nvidia.com/gpu', '--allowed-node-label-keys', 'kubernetes.io/hostname,example.com/pool').tenancy!;
    assert.deepEqual(custom.allowedTolerationKeys, ['example.com/dedicated', 'nvidia.com/gpu']);
    assert.deepEqual(custom.allowedNodeLabelKeys, ['kubernetes.io/hostname', 'example.com/pool']);
    assert.deepEqual(parse('--allowed-node-label-keys', '').tenancy!.allowedNodeLabelKeys, []);
    assert.deepEqual(parse('--allowed-toleration-keys', '*', '--allowed-node-label-keys', '*').tenancy, { ...defaults, allowedTolerationKeys: ['*'], allowedNodeLabelKeys: ['*'] });
    const badTaint = start('--allowed-toleration-keys', 'dedicated,two words');
    assert.equal(badTaint.status, 1);
    assert.match(badTaint.stderr, /--allowed-toleration-keys: "two words" is neither a taint key \(a label key such as example\.com\/dedicated\) nor \*/);
    const badLabel = start('--allowed-node-label-keys', 'example.com/');
    assert.equal(badLabel.status, 1);
    assert.match(badLabel.stderr, /--allowed-node-label-keys: "example\.com\/" is neither a node label key/);
  });

  it('no webhook server unless --webhook-cert-dir names the certificate; --webhook-port moves it from 9443', () => {
    assert.equal(parse().webhook, undefined);
    assert.deepEqual(parse('--webhook-cert-dir', '/etc/iot-operator/webhook-tls').webhook, {
      address: '0.0.0.0:9443',
      certFile: '/etc/iot-operator/webhook-tls/tls.crt',
      keyFile: '/etc/iot-operator/webhook-tls/tls.key',
    });
    assert.equal(parse('--webhook-cert-dir', '/certs', '--webhook-port', '10250').webhook?.address, '0.0.0.0:10250');
    const portOnly = start('--webhook-port', '9443');
    assert.equal(portOnly.status, 1);
    assert.match(portOnly.stderr, /--webhook-port needs --webhook-cert-dir/);
    const badPort = start('--webhook-cert-dir', '/certs', '--webhook-port', '70000');
    assert.equal(badPort.status, 1);
    assert.match(badPort.stderr, /--webhook-port.*must be a port number/);
  });

  it('--conversion-service (or IOT_CONVERSION_SERVICE) names the Service the CRD is kept pointed at, trusting the webhook certificate’s ca.crt', () => {
    assert.equal(parse('--webhook-cert-dir', '/certs').conversionService, undefined);
    const expected = { service: { namespace: 'devawsk8s', name: 'iot-operator-webhook' }, caFile: '/etc/iot-operator/webhook-tls/ca.crt' };
    assert.deepEqual(parse('--webhook-cert-dir', '/etc/iot-operator/webhook-tls', '--conversion-service', 'devawsk8s/iot-operator-webhook').conversionService, expected);
    const before = process.env.IOT_CONVERSION_SERVICE;
    process.env.IOT_CONVERSION_SERVICE = 'devawsk8s/iot-operator-webhook';
    try {
      assert.deepEqual(parse('--webhook-cert-dir', '/etc/iot-operator/webhook-tls').conversionService, expected);
    } finally {
      if (before === undefined) delete process.env.IOT_CONVERSION_SERVICE;
      else process.env.IOT_CONVERSION_SERVICE = before;
    }
    const noCert = start('--conversion-service', 'devawsk8s/iot-operator-webhook');
    assert.equal(noCert.status, 1);
    assert.match(noCert.stderr, /--conversion-service needs --webhook-cert-dir/);
    const malformed = start('--webhook-cert-dir', '/certs', '--conversion-service', 'iot-operator-webhook');
    assert.equal(malformed.status, 1);
    assert.match(malformed.stderr, /--conversion-service "iot-operator-webhook" must be <namespace>\/<name> of a Service/);
  });

  it('--webhook-cert-secret keeps the webhook certificate in that Secret of the landscape, for the conversion Service’s names, written into --webhook-cert-dir', () => {
    const flags = ['--webhook-cert-dir', '/tmp/webhook-cert', '--conversion-service', 'devawsk8s/iot-operator-webhook'];
    assert.equal(parse(...flags).webhookCertSecret, undefined);
    assert.deepEqual(parse(...flags, '--webhook-cert-secret', 'iot-operator-webhook-cert').webhookCertSecret, {
      namespace: 'devawsk8s',
      name: 'iot-operator-webhook-cert',
      dir: '/tmp/webhook-cert',
      names: ['DNS:iot-operator-webhook.devawsk8s.svc', 'DNS:iot-operator-webhook.devawsk8s.svc.cluster.local'],
    });
    const noService = start('--webhook-cert-dir', '/tmp/webhook-cert', '--webhook-cert-secret', 'iot-operator-webhook-cert');
    assert.equal(noService.status, 1);
    assert.match(noService.stderr, /--webhook-cert-secret needs --webhook-cert-dir .* and --conversion-service/);
    const badName = start(...flags, '--webhook-cert-secret', 'Webhook_Cert');
    assert.equal(badName.status, 1);
    assert.match(badName.stderr, /--webhook-cert-secret "Webhook_Cert" is not a valid Secret name/);
  });

  it('--local-conversion serves the conversion on 127.0.0.1 with a certificate kept per landscape; the in-cluster webhook flags are refused beside it', () => {
    const local = parse('--local-conversion');
    assert.equal(local.webhook?.address, '127.0.0.1:0');
    assert.match(local.localConversion?.certDir ?? '', /iot-operator\/local\/devawsk8s\/webhook-certs$/);
    assert.equal(local.webhook?.certFile, path.join(local.localConversion!.certDir, 'tls.crt'));
    assert.equal(parse('--local-conversion', '--webhook-port', '9444').webhook?.address, '127.0.0.1:9444');
    assert.equal(parse().localConversion, undefined);
    const both = start('--local-conversion', '--webhook-cert-dir', '/certs', '--conversion-service', 'devawsk8s/iot-operator-webhook');
    assert.equal(both.status, 1);
    assert.match(both.stderr, /--local-conversion serves the conversion from this process .*; --webhook-cert-dir, --conversion-service are for an operator in the cluster/);
  });
});
