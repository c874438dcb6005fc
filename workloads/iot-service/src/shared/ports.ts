/**
 * The ports and address the components listen on: those the operator's pod spec, Services and
 * probes use (operators/iot/src/resources/ports.ts).
 *
 * Guarantees: core's API and the gateway's HTTP adapter on 8080, the gateway's MQTT adapter on
 * 1883, its MQTT over TLS on 8883 and HTTPS on 8443, /healthz, /readyz (and the gateway's
 * /metrics) on 8081, all on every IPv4 address of the pod.
 */

export const LISTEN_HOST = '0.0.0.0';
export const CORE_API_PORT = 8080;
export const GATEWAY_HTTP_PORT = 8080;
export const GATEWAY_MQTT_PORT = 1883;
export const GATEWAY_MQTTS_PORT = 8883;
export const GATEWAY_HTTPS_PORT = 8443;
export const HEALTH_PORT = 8081;
