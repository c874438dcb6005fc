/** Test support: the in-memory fake client for unit tests and the e2e environment on the local cluster. */
export * from './env.ts';
export * from './fake-client.ts';
