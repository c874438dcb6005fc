/**
 * What the gateway counts, as Prometheus text (served on the health port's `/metrics`).
 *
 * Guarantees: `iot_gateway_refusals_total{reason}` counts every device connection, login or
 * message the gateway refused, by reason (REFUSAL_REASONS, each listed from 0); the gauge
 * `iot_gateway_connections` is the device connections open now (every protocol).
 */

export const REFUSAL_REASONS = [
  'bad_credentials', // wrong or missing device id or password
  'certificate', // a client certificate that does not verify, or names another device
  'client_id', // an MQTT client id that is not the device id
  'rate_limited', // too many failed logins for the device id or from the source address
  'flapping', // the device connected too often: banned for a while
  'registry_busy', // core shed the check, or could not be asked
  'message_rate', // HTTP: the device sends faster than its message rate
  'connection_cap', // IOT_GATEWAY_MAX_CONNECTIONS reached
  'packet_too_large', // an MQTT packet announcing more than the cap
] as const;

export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export class GatewayMetrics {
  connections = 0;
  private readonly refusals = new Map<RefusalReason, number>(REFUSAL_REASONS.map((reason) => [reason, 0]));

  refused(reason: RefusalReason): void {
    this.refusals.set(reason, (this.refusals.get(reason) ?? 0) + 1);
  }

  refusedCount(reason: RefusalReason): number {
    return this.refusals.get(reason) ?? 0;
  }

  render(): string {
    return [
      '# HELP iot_gateway_refusals_total Device connections, logins and messages the gateway refused, by reason.',
      '# TYPE iot_gateway_refusals_total counter',
      ...[...this.refusals].map(([reason, count]) => `iot_gateway_refusals_total{reason="${reason}"} ${count}`),
      '# HELP iot_gateway_connections Device connections open now.',
      '# TYPE iot_gateway_connections gauge',
      `iot_gateway_connections ${this.connections}`,
      '',
    ].join('\n');
  }
}
