/**
 * Which device protocols the gateway serves: IOT_GATEWAY_PROTOCOLS, a comma-separated subset of
 * `spec.gateway.protocols` (mqtt, mqtts, http, https, coap), default `mqtt,http` (the spec's
 * default).
 *
 * Guarantees: returns the set of mqtt, mqtts, http and https named; an empty list, an unknown
 * name, or a protocol the reference gateway does not implement (coap) throws naming it, so the
 * gateway refuses to start rather than leave a port the operator opened unserved.
 */

export type ServedProtocol = 'mqtt' | 'mqtts' | 'http' | 'https';

const SERVED: readonly string[] = ['mqtt', 'mqtts', 'http', 'https'];
const KNOWN: readonly string[] = ['mqtt', 'mqtts', 'http', 'https', 'coap'];

export function gatewayProtocols(env: NodeJS.ProcessEnv = process.env): Set<ServedProtocol> {
  const names = (env.IOT_GATEWAY_PROTOCOLS ?? 'mqtt,http')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.length === 0) throw new Error('IOT_GATEWAY_PROTOCOLS names no protocol');
  for (const name of names) {
    if (!KNOWN.includes(name)) throw new Error(`IOT_GATEWAY_PROTOCOLS: unknown protocol ${JSON.stringify(name)} (known: ${KNOWN.join(', ')})`);
    if (!SERVED.includes(name)) throw new Error(`IOT_GATEWAY_PROTOCOLS: the reference gateway does not serve ${name} (it serves ${SERVED.join(', ')})`);
  }
  return new Set(names as ServedProtocol[]);
}
