/**
 * @iot-operator/local-cluster — the local cluster (cluster/) as this repository's tests, benchmarks
 * and quick start use it from TypeScript: the runtime's test environment on it, started or reused
 * (`localTestEnv`), its real node and private registry, images built onto the node or pushed to
 * the registry, a real Prometheus and a real S3 server (SeaweedFS) running there. It is the
 * repository's own harness, never published: what a user of the runtime needs for the tests of an
 * operator of their own is
 * `@iot-operator/runtime/testing`, on the cluster their environment names.
 */
export * from './up.ts';
export * from './real-node.ts';
export * from './prometheus.ts';
export * from './s3.ts';
export * from './registry.ts';
