/**
 * Network ports of the IoT service components, in one place.
 *
 * Guarantees: Services, container ports, probes, NetworkPolicies and config.yml endpoints all take
 * their numbers from here, so they cannot disagree. Gateway protocol ports are those of the API
 * contract: mqtt 1883/TCP, mqtts 8883/TCP, http 8080/TCP, coap 5683/UDP.
 */

import { GATEWAY_PROTOCOLS, type GatewayProtocol } from '../api/iotservice.ts';

export const PORTS = {
  mqtt: 1883,
  mqtts: 8883,
  http: 8080,
  coap: 5683,
  database: 5432,
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
  coap: { name: 'coap', port: PORTS.coap, protocol: 'UDP' },
};

/**
 * Gateway ports of the enabled protocols, always in the order mqtt, mqtts, http, coap: the
 * protocols are a set, so listing them in another order changes nothing.
 */
export function gatewayPorts(protocols: readonly GatewayProtocol[]): NamedPort[] {
  return GATEWAY_PROTOCOLS.filter((p) => protocols.includes(p)).map((p) => GATEWAY_PROTOCOL_PORTS[p]);
}

export const CORE_API_PORT: NamedPort = { name: 'http', port: PORTS.http, protocol: 'TCP' };
export const HEALTH_PORT: NamedPort = { name: 'health', port: PORTS.health, protocol: 'TCP' };
/** The reference broker (Mosquitto) speaks MQTT only: no AMQP port is opened or probed. */
export const BROKER_PORTS: readonly NamedPort[] = [{ name: 'mqtt', port: PORTS.mqtt, protocol: 'TCP' }];
export const DATABASE_PORT: NamedPort = { name: 'database', port: PORTS.database, protocol: 'TCP' };
