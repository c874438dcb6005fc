/**
 * The operator's metrics endpoint made discoverable, as operator-sdk operators do at start-up: a
 * Service `<operator>-metrics` in front of the operator's own pods and, when the Prometheus
 * Operator's API is installed, a ServiceMonitor that scrapes it.
 *
 * Guarantees: `exposeMetrics` does something only in a cluster — it needs the pod's namespace and
 * name (`POD_NAMESPACE` / `POD_NAME` from the downward API); elsewhere it logs why it skipped.
 * The Service selects the operator's pods by their own labels (without `pod-template-hash`), so
 * every replica of the Deployment is behind it, and is owned by that Deployment (else by the pod)
 * so it goes with the operator. Both objects are written with server-side apply: a restart
 * changes nothing. Without the ServiceMonitor API it logs, as operator-sdk does, that the object
 * could not be created and that installing prometheus-operator enables it; any other failure is
 * logged at warn and never stops the operator, whose metrics stay served either way.
 */
import type { Logger } from 'pino';
import type { KubeApi } from '../client/client.ts';
import { isNotFound } from '../client/errors.ts';
import { apiVersionOf, customResource, Kinds, type KubeObject, type OwnerReference, type ResourceType } from '../client/resource.ts';
import type { Manager } from './manager.ts';

export const ServiceMonitor = customResource('monitoring.coreos.com', 'v1', 'ServiceMonitor', 'servicemonitors');
export const METRICS_PORT_NAME = 'http-metrics';

export interface MetricsExposure {
  /** The operator's name: the objects are `<operatorName>-metrics`. */
  operatorName: string;
  /** The port the manager serves /metrics on. */
  port: number;
  /** The pod the operator runs in; undefined outside a cluster. */
  podNamespace?: string;
  podName?: string;
  fieldManager: string;
}

export type MetricsExposureResult = { service?: string; serviceMonitor?: string; skipped?: string };

interface Owned extends KubeObject {
  metadata: KubeObject['metadata'] & { ownerReferences?: OwnerReference[] };
}

function controllerOf(obj: Owned): OwnerReference | undefined {
  return obj.metadata.ownerReferences?.find((ref) => ref.controller);
}

/** The Deployment that runs `pod` (pod → ReplicaSet → Deployment), else the pod itself. */
async function ownerFor(client: KubeApi, pod: Owned, namespace: string): Promise<OwnerReference> {
  const asOwner = (type: ResourceType, obj: KubeObject): OwnerReference => ({ apiVersion: apiVersionOf(type), kind: type.kind, name: obj.metadata.name!, uid: obj.metadata.uid! });
  const replicaSetRef = controllerOf(pod);
  if (replicaSetRef?.kind === 'ReplicaSet') {
    const replicaSet = await client.get<Owned>(Kinds.ReplicaSet, replicaSetRef.name, namespace);
    const deploymentRef = controllerOf(replicaSet);
    if (deploymentRef?.kind === 'Deployment') return asOwner(Kinds.Deployment, await client.get(Kinds.Deployment, deploymentRef.name, namespace));
  }
  return asOwner(Kinds.Pod, pod);
}

export async function exposeMetrics(client: KubeApi, logger: Logger, options: MetricsExposure): Promise<MetricsExposureResult> {
  const { podNamespace: namespace, podName } = options;
  if (!namespace || !podName) {
    const skipped = 'not running in a pod (POD_NAMESPACE and POD_NAME unset): no metrics Service';
    logger.info(skipped);
    return { skipped };
  }
  const name = `${options.operatorName}-metrics`;
  let service: string | undefined;
  try {
    const pod = await client.get<Owned>(Kinds.Pod, podName, namespace);
    const { 'pod-template-hash': _hash, ...selector } = pod.metadata.labels ?? {};
    const owner = await ownerFor(client, pod, namespace);
    const labels = { 'app.kubernetes.io/name': options.operatorName, 'app.kubernetes.io/component': 'metrics' };
    await client.apply(
      Kinds.Service,
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace, labels, ownerReferences: [owner] },
        spec: { selector, ports: [{ name: METRICS_PORT_NAME, port: options.port, targetPort: options.port, protocol: 'TCP' }] },
      },
      { fieldManager: options.fieldManager, force: true },
    );
    service = name;
    logger.info({ 'Service.Name': name, 'Service.Namespace': namespace }, 'Metrics Service object created');
    try {
      await client.apply(
        ServiceMonitor,
        {
          apiVersion: apiVersionOf(ServiceMonitor),
          kind: ServiceMonitor.kind,
          metadata: { name, namespace, labels, ownerReferences: [owner] },
          spec: { selector: { matchLabels: labels }, endpoints: [{ port: METRICS_PORT_NAME, path: '/metrics' }] },
        },
        { fieldManager: options.fieldManager, force: true },
      );
      logger.info({ 'ServiceMonitor.Name': name, 'ServiceMonitor.Namespace': namespace }, 'ServiceMonitor object created');
      return { service, serviceMonitor: name };
    } catch (err) {
      if (!isNotFound(err)) throw err;
      const error = 'no ServiceMonitor registered with the API';
      logger.info({ error }, 'Could not create ServiceMonitor object');
      logger.info({ error }, 'Install prometheus-operator in your cluster to create ServiceMonitor objects');
      return { service };
    }
  } catch (err) {
    const skipped = `could not expose metrics: ${err instanceof Error ? err.message : String(err)}`;
    logger.warn({ err }, skipped);
    return { service, skipped };
  }
}

/** `exposeMetrics` for an operator process: its manager's name and client, the port of its HTTP address, the pod from the downward API. */
export async function exposeOperatorMetrics(mgr: Manager, httpAddress: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<MetricsExposureResult> {
  const port = Number(httpAddress?.slice(httpAddress.lastIndexOf(':') + 1));
  if (!httpAddress || !Number.isInteger(port) || port <= 0) {
    const skipped = 'no metrics port (--metrics-bind-address 0 or port 0): no metrics Service';
    mgr.logger.info(skipped);
    return { skipped };
  }
  return exposeMetrics(mgr.client, mgr.logger, { operatorName: mgr.options.name, port, podNamespace: env.POD_NAMESPACE, podName: env.POD_NAME, fieldManager: mgr.options.name });
}
