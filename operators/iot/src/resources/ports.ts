/**
 * Network ports of the IoT service components, in one place.
 *
 * Guarantees: Services, container ports, probes, NetworkPolicies and config.yml endpoints all take
 * their numbers from here, so they cannot disagree. Gateway protocol ports are those of the API
 * contract: mqtt 1883/TCP, mqtts 8883/TCP, http 8080/TCP, https 8443/TCP, coap 5683/UDP (the gateway's, facing
 * devices). The broker (nats-server with JetStream) has its own three: client 4222/TCP (what the
 * components dial), cluster 6222/TCP (routes between broker replicas) and monitor 8222/TCP
 * (nats-server's HTTP monitoring, which its readiness probe asks). Three database replicas also
 * serve Patroni's REST API on 8008/TCP. With backups, the database pods and the repository host
 * serve pgBackRest (TLS) on 8432/TCP, and the repository host its state (/info) on 8433/TCP.
 */

import { GATEWAY_PROTOCOLS, type GatewayProtocol } from '../api/iotservice.ts';

export const PORTS = {
  mqtt: 1883,
  mqtts: 8883,
  http: 8080,
  https: 8443,
  coap: 5683,
  database: 5432,
  /** Patroni's REST API on each of three database replicas: the members ask each other there, and the probes. */
  patroni: 8008,
  /** The broker's NATS client port: gateway, core and processing connect here. */
  brokerClient: 4222,
  /** The broker's cluster port: routes between the broker replicas. */
  brokerCluster: 6222,
  /** The broker's HTTP monitoring port (/healthz, /varz, ...). */
  brokerMonitor: 8222,
  /** pgBackRest's TLS server on each database pod and on the backup repository host. */
  pgbackrest: 8432,
  /** The backup repository host's /info (pgbackrest info as JSON), which the operator reads. */
  backupStatus: 8433,
  /** Health endpoints (/healthz, /readyz) of gateway, core and processing. */
  health: 8081,
} as const;

export type PortProtocol = 'TCP' | 'UDP';

/** A named port; `name` is a valid IANA service name (at most 15 characters). */
export interface NamedPort {
  name: string;
  port: number;
  protocol: PortProtocol;
}

export const GATEWAY_PROTOCOL_PORTS: Readonly<Record<GatewayProtocol, NamedPort>> = {
  mqtt: { name: 'mqtt', port: PORTS.mqtt, protocol: 'TCP' },
  mqtts: { name: 'mqtts', port: PORTS.mqtts, protocol: 'TCP' },
  http: { name: 'http', port: PORTS.http, protocol: 'TCP' },
  https: { name: 'https', port: PORTS.https, protocol: 'TCP' },
  coap: { name: 'coap', port: PORTS.coap, protocol: 'UDP' },
};

/**
 * Gateway ports of the enabled protocols, always in the order mqtt, mqtts, http, https, coap: the
 * protocols are a set, so listing them in another order changes nothing.
 */
export function gatewayPorts(protocols: readonly GatewayProtocol[]): NamedPort[] {
  return GATEWAY_PROTOCOLS.filter((p) => protocols.includes(p)).map((p) => GATEWAY_PROTOCOL_PORTS[p]);
}

export const CORE_API_PORT: NamedPort = { name: 'http', port: PORTS.http, protocol: 'TCP' };
export const HEALTH_PORT: NamedPort = { name: 'health', port: PORTS.health, protocol: 'TCP' };
export const BROKER_CLIENT_PORT: NamedPort = { name: 'client', port: PORTS.brokerClient, protocol: 'TCP' };
export const BROKER_CLUSTER_PORT: NamedPort = { name: 'cluster', port: PORTS.brokerCluster, protocol: 'TCP' };
export const BROKER_MONITOR_PORT: NamedPort = { name: 'monitor', port: PORTS.brokerMonitor, protocol: 'TCP' };
/** Every port of the broker container: NATS clients, routes between replicas, HTTP monitoring. */
export const BROKER_PORTS: readonly NamedPort[] = [BROKER_CLIENT_PORT, BROKER_CLUSTER_PORT, BROKER_MONITOR_PORT];
export const DATABASE_PORT: NamedPort = { name: 'database', port: PORTS.database, protocol: 'TCP' };
export const PATRONI_PORT: NamedPort = { name: 'patroni', port: PORTS.patroni, protocol: 'TCP' };
export const PGBACKREST_PORT: NamedPort = { name: 'pgbackrest', port: PORTS.pgbackrest, protocol: 'TCP' };
export const BACKUP_STATUS_PORT: NamedPort = { name: 'status', port: PORTS.backupStatus, protocol: 'TCP' };
