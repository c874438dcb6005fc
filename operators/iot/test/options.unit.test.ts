// The IoT operator's command line: /metrics bound to loopback unless told otherwise, its own client
// budget (200 / 400) unless --kube-api-qps / --kube-api-burst say otherwise, secure metrics from a
// certificate directory.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { iotRateLimitDefaults, parseOperatorOptions } from '../src/options.ts';

describe('IoT operator options', () => {
  it('defaults: loopback metrics, the IoT client budget, plain HTTP', () => {
    const options = parseOperatorOptions(['--operator-name', 'devawsk8s']);
    assert.equal(options.metricsBindAddress, '127.0.0.1:8080');
    assert.deepEqual(options.rateLimit, iotRateLimitDefaults);
    assert.deepEqual(iotRateLimitDefaults, { qps: 200, burst: 400 });
    assert.equal(options.secureMetrics, undefined);
  });

  it('flags set the client budget and secure metrics', () => {
    const options = parseOperatorOptions(['--operator-name', 'devawsk8s', '--kube-api-qps', '20', '--kube-api-burst', '30', '--metrics-secure', '--metrics-cert-dir', '/var/run/metrics-cert']);
    assert.deepEqual(options.rateLimit, { qps: 20, burst: 30 });
    assert.deepEqual(options.secureMetrics, { certFile: '/var/run/metrics-cert/tls.crt', keyFile: '/var/run/metrics-cert/tls.key' });
  });
});
