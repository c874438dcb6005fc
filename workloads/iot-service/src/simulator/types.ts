/** What a simulated device is given and reads back: the service's addresses, its credentials, a stored message. */

export interface ServiceAddresses {
  /** core's API, e.g. http://core.<namespace>.svc:8080 */
  coreUrl: string;
  /** The gateway's HTTP adapter, e.g. http://127.0.0.1:8080 */
  gatewayHttpUrl: string;
  /** The gateway's MQTT adapter, e.g. mqtt://127.0.0.1:1883, or mqtts://127.0.0.1:8883 */
  gatewayMqttUrl: string;
  apiToken: string;
  /** How the device checks the gateway's certificate on mqtts:// and https:// URLs (Node's default CAs when absent). */
  gatewayTls?: GatewayTls;
}

/**
 * What a device trusts and presents over TLS (mqtts:// and https:// gateway URLs; unused on
 * plaintext ones).
 */
export interface GatewayTls {
  /** The CA certificate(s) to trust, PEM — only these, not Node's default CAs (e.g. the instance's ConfigMap gateway-ca). */
  ca?: string;
  /** The name the gateway's certificate must cover when the URL's host is not it (a gateway dialled by IP); also sent as SNI. */
  servername?: string;
  /** A client certificate and its key, PEM, for a gateway that checks them (the device id is its CN). */
  cert?: string;
  key?: string;
}

export interface DeviceCredentials {
  id: string;
  password: string;
}

export interface TelemetryRecord {
  messageId: string;
  receivedAt: string;
  payload: unknown;
}
