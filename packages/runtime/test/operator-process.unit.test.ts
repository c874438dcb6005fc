/**
 * The operator command line: flags win over the environment, `0` turns the HTTP server off,
 * the Lease namespace falls back from the flag to the watched namespace to $POD_NAMESPACE, and
 * the watched namespace becomes the cache's default (empty = all namespaces), $OPERATOR_NAME
 * renames the operator, and an operator's own flags are parsed alongside.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { Kinds } from '../src/client/resource.ts';
import { operatorManagerOptions, parseOperatorCommandLine } from '../src/manager/operator-process.ts';

const operator = { name: 'demo-operator', description: 'A demo.' };
const saved = { ...process.env };

describe('operator command line', () => {
  afterEach(() => {
    for (const key of ['KUBECONFIG', 'WATCH_NAMESPACE', 'POD_NAMESPACE', 'LOG_LEVEL', 'OPERATOR_NAME']) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  });

  it('defaults: environment, 127.0.0.1:8080, no leader election, info', () => {
    process.env.KUBECONFIG = '/tmp/kc';
    process.env.WATCH_NAMESPACE = 'team';
    delete process.env.LOG_LEVEL;
    delete process.env.OPERATOR_NAME;
    const { flags, ...options } = parseOperatorCommandLine(operator, []);
    assert.deepEqual(options, {
      operatorName: undefined,
      kubeconfigPath: '/tmp/kc',
      watchNamespace: 'team',
      httpAddress: '127.0.0.1:8080',
      metricsBindAddress: '127.0.0.1:8080',
      leaderElection: undefined,
      secureMetrics: undefined,
      rateLimit: { qps: 20, burst: 30 },
      logLevel: 'info',
    });
    assert.equal(flags['namespace'], 'team');
  });

  it('an operator\'s own flags are parsed with the common ones and returned in flags', () => {
    const withHelm = { ...operator, extraOptions: (program: import('commander').Command) => void program.option('--helm-binary <path>', 'the helm binary', '/usr/bin/helm') };
    assert.equal(parseOperatorCommandLine(withHelm, []).flags['helmBinary'], '/usr/bin/helm');
    const options = parseOperatorCommandLine(withHelm, ['--helm-binary', '/opt/helm', '--namespace', 'x']);
    assert.equal(options.flags['helmBinary'], '/opt/helm');
    assert.equal(options.watchNamespace, 'x');
  });

  it('client rate and secure metrics come from their flags and reach the manager', () => {
    const options = parseOperatorCommandLine(operator, ['--kube-api-qps', '50.5', '--kube-api-burst', '80', '--metrics-secure', '--metrics-cert-dir', '/certs']);
    assert.deepEqual(options.rateLimit, { qps: 50.5, burst: 80 });
    assert.deepEqual(options.secureMetrics, { certFile: '/certs/tls.crt', keyFile: '/certs/tls.key' });
    const manager = operatorManagerOptions('demo-operator', options);
    assert.deepEqual([manager.rateLimit, manager.secureMetrics], [options.rateLimit, options.secureMetrics]);
  });

  it('an operator may set its own client rate defaults; the flags still win', () => {
    const fast = { ...operator, rateLimitDefaults: { qps: 200, burst: 400 } };
    assert.deepEqual(parseOperatorCommandLine(fast, []).rateLimit, { qps: 200, burst: 400 });
    assert.deepEqual(parseOperatorCommandLine(fast, ['--kube-api-qps', '0']).rateLimit, { qps: 0, burst: 400 });
  });

  it('flags win; 0 turns the HTTP server off; the Lease lives in the watched namespace unless told otherwise', () => {
    process.env.WATCH_NAMESPACE = 'team';
    process.env.POD_NAMESPACE = 'pod-ns';
    const options = parseOperatorCommandLine(operator, ['--kubeconfig', '/k', '--namespace', 'other', '--metrics-bind-address', '0', '--leader-elect', '--log-level', 'debug']);
    assert.equal(options.kubeconfigPath, '/k');
    assert.equal(options.watchNamespace, 'other');
    assert.equal(options.httpAddress, undefined);
    assert.deepEqual(options.leaderElection, { namespace: 'other' });
    assert.equal(options.logLevel, 'debug');
    assert.deepEqual(parseOperatorCommandLine(operator, ['--leader-elect', '--leader-election-namespace', 'lease-ns']).leaderElection, { namespace: 'lease-ns' });
    process.env.WATCH_NAMESPACE = '';
    assert.deepEqual(parseOperatorCommandLine(operator, ['--leader-elect']).leaderElection, { namespace: 'pod-ns' });
  });

  it('$OPERATOR_NAME renames the operator: the manager, and with it the Lease, is named after it', () => {
    process.env.OPERATOR_NAME = 'cache-operator';
    const options = parseOperatorCommandLine(operator, []);
    assert.equal(options.operatorName, 'cache-operator');
    assert.equal(operatorManagerOptions('demo-operator', options).name, 'cache-operator');
    assert.equal(operatorManagerOptions('demo-operator', { watchNamespace: '' }).name, 'demo-operator');
  });

  it('the watched namespace is the cache default; empty means every namespace', () => {
    const byType = [{ type: Kinds.Pod, labelSelector: 'app=demo' }];
    const options = operatorManagerOptions('demo-operator', { watchNamespace: 'team', httpAddress: '127.0.0.1:0', logLevel: 'warn' }, { byType });
    assert.equal(options.name, 'demo-operator');
    assert.equal(options.httpAddress, '127.0.0.1:0');
    assert.equal(options.logLevel, 'warn');
    assert.deepEqual(options.cache, { byType, defaultNamespace: 'team' });
    assert.equal(operatorManagerOptions('demo-operator', { watchNamespace: '' }).cache?.defaultNamespace, undefined);
  });
});
