/**
 * @iot-operator/runtime — the operator runtime: client, watcher, cache, work queue,
 * controllers, manager, events, finalizers, conditions and CRDs generated from TypeBox
 * schemas. Each module's header states what it guarantees; the runtime guarantees table in
 * the project's design maps to them.
 */
export * from './client/resource.ts';
export * from './client/errors.ts';
export * from './client/client.ts';
export * from './client/token-bucket.ts';
export * from './client/timestamp.ts';
export * from './errors/terminal-error.ts';
export * from './watch/source.ts';
export * from './watch/watcher.ts';
export * from './cache/store.ts';
export * from './cache/selector.ts';
export * from './cache/informer.ts';
export * from './cache/cache.ts';
export * from './cache/transforms.ts';
export * from './queue/workqueue.ts';
export * from './controller/reconcile.ts';
export * from './controller/predicates.ts';
export * from './controller/controller.ts';
export * from './controller/builder.ts';
export * from './controller/finalizers.ts';
export * from './events/recorder.ts';
export { BadReviewError, type HandlerContext, type Refusal, type Webhook } from './webhook/review.ts';
export * from './webhook/json-patch.ts';
export * from './webhook/admission.ts';
export * from './webhook/conversion.ts';
export * from './webhook/cert-watcher.ts';
export * from './webhook/certificates.ts';
export * from './webhook/certificate-secret.ts';
export * from './webhook/metrics.ts';
export * from './webhook/server.ts';
export * from './manager/leader-election.ts';
export * from './manager/manager.ts';
export * from './manager/operator-process.ts';
export * from './manager/metrics-service.ts';
export * from './metrics/runtime-metrics.ts';
export { Counter, Gauge, Histogram, Registry } from './metrics/prom-client.ts';
export * from './metrics/dashboard-queries.ts';
export * from './status/conditions.ts';
export * from './status/shape.ts';
export * from './sharding/shard.ts';
export * from './apply/subset.ts';
export * from './apply/overlay.ts';
export * from './apply/desired-hash.ts';
export * from './crd/structural-schema.ts';
export * from './crd/crd.ts';
