/** What a simulated device is given and reads back: the service's addresses, its credentials, a stored message. */

export interface ServiceAddresses {
  /** core's API, e.g. http://core.<namespace>.svc:8080 */
  coreUrl: string;
  /** The gateway's HTTP adapter, e.g. http://127.0.0.1:8080 */
  gatewayHttpUrl: string;
  /** The gateway's MQTT adapter, e.g. mqtt://127.0.0.1:1883 */
  gatewayMqttUrl: string;
  apiToken: string;
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
