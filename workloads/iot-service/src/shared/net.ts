/**
 * Listening, closing and reachability on plain sockets.
 *
 * Guarantees: `listenOn` resolves once the server listens on host:port (port 0: a free port) and
 * rejects with the listen error; `closeServer` stops accepting, ends idle keep-alive connections
 * and resolves once every connection is closed; `closeAfterEachAnswer` makes every answer an HTTP
 * server sends from then on end its connection (`Connection: close`), so a keep-alive client opens
 * its next connection anew, through the Service to a pod that stays; `tcpReachable` resolves once a TCP connection to
 * the endpoint opened (and closes it at once) and rejects on an error or after `timeoutMs`.
 */

import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { connect, type Server } from 'node:net';
import type { Endpoint } from './config.ts';

export function listenOn(server: Server, at: { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(at.port, at.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    if ('closeIdleConnections' in server) (server as HttpServer).closeIdleConnections();
  });
}

export function closeAfterEachAnswer(server: HttpServer | HttpsServer): void {
  // First among the request listeners: the handler may answer before any other listener runs.
  server.prependListener('request', (_req, res) => res.setHeader('Connection', 'close'));
}

export function tcpReachable(endpoint: Endpoint, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`${endpoint.host}:${endpoint.port}: no connection within ${timeoutMs} ms`)));
    socket.once('connect', () => {
      socket.end();
      resolve();
    });
    socket.once('error', reject);
  });
}
