/**
 * The device connections of the gateway, counted over every device-facing server, and their cap.
 *
 * Guarantees: `countConnections` keeps `metrics.connections` equal to the number of open TCP
 * connections of the servers it watches (before any TLS handshake or login); with `max`, a
 * connection that would make more than `max` is closed at once, counted as refused
 * (`connection_cap`) and logged, and never reaches the protocol.
 */

import type { Server } from 'node:net';
import type { Logger } from '../shared/log.ts';
import type { GatewayMetrics } from './metrics.ts';

export function countConnections(server: Server, metrics: GatewayMetrics, log: Logger, max?: number): void {
  server.prependListener('connection', (socket) => {
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
