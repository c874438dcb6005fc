/**
 * Test support for an operator's own tests: the in-memory fake client for unit tests, the e2e
 * environment on the cluster the environment names, a kubeconfig that runs an operator as its
 * ServiceAccount, an operator run as a child process, the fault-injecting API proxy, a stand-in
 * for the ServiceMonitor API, and a check that a CRD stores the Degraded condition.
 */
export * from './env.ts';
export * from './fake-client.ts';
export * from './fault-proxy.ts';
export * from './fault-rules.ts';
export * from './process.ts';
export * from './service-account.ts';
export * from './service-monitor.ts';
export * from './crd-conditions.ts';
