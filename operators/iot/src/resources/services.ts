/**
 * The instance's Services.
 *
 * Guarantees: `gateway` exposes one port per enabled protocol (mqtt 1883/TCP, mqtts 8883/TCP,
 * http 8080/TCP, https 8443/TCP, coap 5683/UDP) with the type from `spec.gateway.serviceType`; a
 * NodePort or LoadBalancer one with externalTrafficPolicy Local, so devices' connections reach the
 * gateway from their own addresses, which `gateway-devices` (deviceSources) and the gateway's
 * per-source login limits judge — with Cluster, kube-proxy masquerades connections from outside
 * the cluster to a node's address: deviceSources would refuse them, or, listing the nodes'
 * addresses, filter nothing; a node without a gateway pod then does not forward (a LoadBalancer's
 * health checks leave it out); `core` exposes
 * 8080/TCP; `broker` (client 4222, cluster 6222, monitor 8222) and `database` (5432) are headless
 * and govern their StatefulSets, the broker's publishing not-ready addresses so that its replicas
 * find each other while starting: `broker-<i>.broker.<namespace>.svc:6222` is the route to
 * replica i. `broker-client` (the client port 4222 only) and `database-client` (5432) are what the
 * components dial (config.yml's endpoints): ClusterIP Services of the same pods. A headless name resolves to the pods'
 * own addresses, which cluster DNS caches (30 s in a kubeadm cluster's CoreDNS, and here), so a
 * restarted broker or database pod — a new address — would be dialled at its old one until the
 * cache expires; a ClusterIP stays the same and routes to the new pod once it is ready. With three
 * database replicas database-client selects the primary alone (patroni.ts ROLE_LABEL), so the
 * components follow a failover to the new primary without knowing of it. Every
 * port states its protocol and a numeric targetPort (the form the API server returns); nothing
 * server-allocated (clusterIP, nodePort) is ever set.
 */

import type { V1Service, V1ServicePort } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { PRIMARY_ROLE, ROLE_LABEL, runsPatroni } from './patroni.ts';
import { componentLabels, componentSelector, type WorkloadName } from './labels.ts';
import { BROKER_CLIENT_PORT, BROKER_PORTS, CORE_API_PORT, DATABASE_PORT, gatewayPorts, type NamedPort } from './ports.ts';

function servicePorts(ports: readonly NamedPort[]): V1ServicePort[] {
  return ports.map((p) => ({ name: p.name, port: p.port, targetPort: p.port, protocol: p.protocol }));
}

/** The ClusterIP Services the broker's and the database's clients dial (see above). */
export const BROKER_CLIENT_SERVICE = 'broker-client';
export const DATABASE_CLIENT_SERVICE = 'database-client';

/** A Service of `component`'s pods (backup.ts makes the repository host's with it too). */
export function service(
  instance: Instance,
  component: WorkloadName,
  ports: readonly NamedPort[],
  shape: { type: 'ClusterIP' | 'NodePort' | 'LoadBalancer' } | { headless: true; publishNotReadyAddresses: boolean },
  name: string = component,
  selector: Record<string, string> = componentSelector(instance, component),
): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: instance.namespace, labels: componentLabels(instance, component) },
    spec: {
      ...('headless' in shape
        ? {
            type: 'ClusterIP',
            clusterIP: 'None',
            ...(shape.publishNotReadyAddresses ? { publishNotReadyAddresses: true } : {}),
          }
        : { type: shape.type }),
      selector,
      ports: servicePorts(ports),
    },
  };
}

export function desiredGatewayService(instance: Instance): V1Service {
  const { serviceType } = instance.spec.gateway;
  const gateway = service(instance, 'gateway', gatewayPorts(instance.spec.gateway.protocols), { type: serviceType });
  if (serviceType !== 'ClusterIP') gateway.spec!.externalTrafficPolicy = 'Local';
  return gateway;
}

export function desiredCoreService(instance: Instance): V1Service {
  return service(instance, 'core', [CORE_API_PORT], { type: 'ClusterIP' });
}

export function desiredBrokerService(instance: Instance): V1Service {
  return service(instance, 'broker', BROKER_PORTS, { headless: true, publishNotReadyAddresses: true });
}

export function desiredDatabaseService(instance: Instance): V1Service {
  return service(instance, 'database', [DATABASE_PORT], { headless: true, publishNotReadyAddresses: false });
}

export function desiredBrokerClientService(instance: Instance): V1Service {
  return service(instance, 'broker', [BROKER_CLIENT_PORT], { type: 'ClusterIP' }, BROKER_CLIENT_SERVICE);
}

export function desiredDatabaseClientService(instance: Instance): V1Service {
  const selector = componentSelector(instance, 'database');
  return service(instance, 'database', [DATABASE_PORT], { type: 'ClusterIP' }, DATABASE_CLIENT_SERVICE, runsPatroni(instance) ? { ...selector, [ROLE_LABEL]: PRIMARY_ROLE } : selector);
}
