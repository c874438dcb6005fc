/**
 * Builds the IoT operator's manager from its options: cache scoping, leader election or one
 * shard of a ControllerRing, HTTP server, the controllers of controllers.ts (the IoTService
 * controller, its ingestion monitor and the clean-up of orphaned instance namespaces), the
 * instance metrics (instance-metrics.ts, with the brokers' readings) and, when webhook options
 * are given, the IoTService admission webhook (instance-namespace-webhook.ts) and the IoTService
 * conversion webhook (conversion-webhook.ts), with `webhookCertSecret` a webhook certificate of its
 * own, kept in a Secret (webhook-certificate.ts), and with `conversionService` the CRD's conversion
 * kept pointed at the operator's Service (crd-conversion.ts). The API server's addresses for pods
 * are read once here (api-server.ts). Used by the `iot-operator` process and by tests that run the
 * operator in-process.
 */
import { Manager } from '@iot-operator/runtime';
import { discoverApiServer } from './api-server.ts';
import { registerControllers } from './controllers.ts';
import { exportInstanceMetrics } from './instance-metrics.ts';
import { SHARDED_TYPES, iotCacheOptions, type IoTControllerConfig } from './iotservice-types.ts';
import { iotRateLimitDefaults, type OperatorOptions } from './options.ts';
import { registerConversionWebhook } from './webhooks/conversion-webhook.ts';
import { registerConversionService } from './webhooks/crd-conversion.ts';
import { registerInstanceNamespaceWebhook } from './webhooks/instance-namespace-webhook.ts';
import { keepWebhookCertificate } from './webhooks/webhook-certificate.ts';

export async function createIoTOperator(options: OperatorOptions): Promise<Manager> {
  const config: IoTControllerConfig = {
    operatorName: options.operatorName,
    watchNamespace: options.watchNamespace,
    defaultRegistry: options.defaultRegistry,
    maxConcurrentReconciles: options.maxConcurrentReconciles,
    tenancy: options.tenancy,
    configMountPath: options.configMountPath,
    shard: options.shard,
    stuckPodTimeoutMs: options.stuckPodTimeoutMs,
    ingestionStalledAfterSeconds: options.ingestionStalledAfterSeconds,
  };
  const mgr = await Manager.create({
    name: 'iot-operator',
    kubeconfigPath: options.kubeconfig,
    rateLimit: options.rateLimit ?? iotRateLimitDefaults,
    logLevel: options.logLevel,
    httpAddress: options.metricsBindAddress,
    secureMetrics: options.secureMetrics,
    webhook: options.webhook,
    cache: iotCacheOptions(config),
    leaderElection: options.leaderElect ? { namespace: options.operatorName, name: `iot-operator-${options.operatorName}` } : undefined,
    shard: options.shard ? { ...options.shard, namespace: options.operatorName, types: SHARDED_TYPES } : undefined,
  });
  // Three database replicas reach the API server (Patroni's store): their NetworkPolicy names where it is.
  config.apiServer = await discoverApiServer(mgr.client);
  const ingestion = registerControllers(mgr, config, options.syncPeriodMs);
  exportInstanceMetrics(mgr, options.operatorName, ingestion);
  if (options.webhook) {
    registerInstanceNamespaceWebhook(mgr, options.operatorName);
    registerConversionWebhook(mgr);
  }
  if (options.webhookCertSecret) await keepWebhookCertificate(mgr, options.webhookCertSecret);
  if (options.conversionService) registerConversionService(mgr, options.conversionService);
  return mgr;
}
