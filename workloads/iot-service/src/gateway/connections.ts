/**
 * The device connections of the gateway, counted over every device-facing server, and what is
 * refused the moment a connection is accepted.
 *
 * Guarantees: `countConnections` keeps `metrics.connections` equal to the number of open TCP
 * connections of the servers it watches (before any TLS handshake or login). A connection is
 * closed at once, before its TLS handshake, and never reaches the protocol when it comes from a
 * source address `limitedSource` names (one out of failed-login tokens: a flood of wrong passwords
 * then costs no handshake; counted as refused `rate_limited`, not logged, as a flood would flood
 * the log), or, with `max`, when it would make more than `max` open (counted as refused
 * `connection_cap` and logged).
 */

import type { Server } from 'node:net';
import type { Logger } from '../shared/log.ts';
import type { GatewayMetrics } from './metrics.ts';

export interface ConnectionLimits {
  max?: number;
  /** Whether a source address is refused now. */
  limitedSource: (address: string) => boolean;
}

export function countConnections(server: Server, metrics: GatewayMetrics, log: Logger, { max, limitedSource }: ConnectionLimits): void {
  server.prependListener('connection', (socket) => {
    if (limitedSource(socket.remoteAddress ?? 'unknown')) {
      metrics.refused('rate_limited');
      socket.destroy();
      return;
    }
    if (max !== undefined && metrics.connections >= max) {
      metrics.refused('connection_cap');
      log.warn('connection refused', { remote: socket.remoteAddress, reason: `${max} device connections open (IOT_GATEWAY_MAX_CONNECTIONS)` });
      socket.destroy();
      return;
    }
    metrics.connections++;
    socket.once('close', () => metrics.connections--);
  });
}
