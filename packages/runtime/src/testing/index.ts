/**
 * Test support: the in-memory fake client for unit tests, the e2e environment on the local
 * cluster, and a kubeconfig that runs an operator as its ServiceAccount.
 */
export * from './env.ts';
export * from './fake-client.ts';
export * from './service-account.ts';
