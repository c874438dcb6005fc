/**
 * Test support: the in-memory fake client for unit tests, the e2e environment on the local
 * cluster, a kubeconfig that runs an operator as its ServiceAccount, and an operator run as a
 * child process.
 */
export * from './env.ts';
export * from './fake-client.ts';
export * from './process.ts';
export * from './service-account.ts';
