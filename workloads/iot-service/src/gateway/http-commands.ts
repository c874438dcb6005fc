/**
 * Commands over HTTP (shared/commands.ts) for devices that poll: Hono's time-till-disconnect.
 *
 * Guarantees: `ttdOf` reads `?ttd=<seconds>` or the `hono-ttd` header (1..MAX_TTD_SECONDS, else
 * 400 with the reason; neither: undefined). `answerWithCommand` holds a telemetry request that
 * gave one until the device's next pending command or `ttd` seconds: with a command the answer is
 * 200, headers `Command-Id` and `Command-Name`, body the payload's JSON text, and the command
 * counts as delivered once that answer was written completely (a connection lost before, also
 * while the poll waited, puts it back at once for the next delivery); without one it is
 * `fallback`. Told `connections`, the poll is a connection of the device: `connected` as it
 * begins, `disconnected` when its answer ends (clean once written completely, else lost: the device
 * went away first). `respond` takes the device's answer
 * `POST /v1/command/res/<command id>?status=<100..599, default 200>` (body: JSON, or empty for
 * none): 204 once recorded, 404 for a command that is not the device's, 400 for a bad status.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { isCommandId } from '../shared/commands.ts';
import { HttpError, readJson } from '../shared/http.ts';
import type { CommandDelivery } from './command-delivery.ts';
import type { ConnectionSink } from './connection-events.ts';

export const MAX_TTD_SECONDS = 60;
export const RESPONSE_PATH = /^\/v1\/command\/res\/([^/]+)$/;

export function ttdOf(req: IncomingMessage): number | undefined {
  const given = new URL(req.url ?? '/', 'http://gateway').searchParams.get('ttd') ?? req.headers['hono-ttd'];
  if (given === undefined || given === null) return undefined;
  const seconds = Number(given);
  if (typeof given !== 'string' || !/^\d+$/.test(given) || seconds < 1 || seconds > MAX_TTD_SECONDS) throw new HttpError(400, `ttd must be a whole number of seconds from 1 to ${MAX_TTD_SECONDS}`);
  return seconds;
}

export async function answerWithCommand(
  delivery: CommandDelivery,
  deviceId: string,
  ttdSeconds: number,
  res: ServerResponse,
  fallback: () => void,
  connections?: ConnectionSink,
): Promise<void> {
  if (connections) {
    const connectionId = connections.connected(deviceId);
    res.once('close', () => connections.disconnected(deviceId, connectionId, res.writableFinished));
  }
  const polled = await delivery.next(deviceId, ttdSeconds * 1000);
  if (!polled) return fallback();
  // The device went away while its poll waited: the command goes back at once for its next poll.
  if (res.closed) return polled.undelivered();
  const body = JSON.stringify(polled.command.payload);
  res.once('close', () => {
    if (res.writableFinished) void polled.delivered();
    else polled.undelivered();
  });
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Command-Id': polled.command.id, 'Command-Name': polled.command.name });
  res.end(body);
}

export async function respond(delivery: CommandDelivery, deviceId: string, commandId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const given = new URL(req.url ?? '/', 'http://gateway').searchParams.get('status') ?? '200';
  const status = Number(given);
  if (!/^\d{3}$/.test(given) || status < 100 || status > 599) throw new HttpError(400, 'status must be an HTTP status code from 100 to 599');
  const response = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] ? await readJson(req) : null;
  if (!isCommandId(commandId) || !(await delivery.respond(deviceId, commandId, status, response))) throw new HttpError(404, `no command ${commandId} of device ${deviceId}`);
  res.writeHead(204).end();
}
