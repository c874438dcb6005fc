/**
 * The gateway's device-facing HTTP adapter: `POST /v1/telemetry`, over plain HTTP (port 8080) or
 * HTTPS (8443, tls.ts).
 *
 * Guarantees: the device authenticates with basic auth (device id, password), checked as for MQTT
 * (login.ts), or over HTTPS with a verified client certificate, whose CN is then the device (basic
 * auth optional; naming another device → 403). Missing or wrong credentials → 401 with
 * `WWW-Authenticate: Basic`; too many failed logins for the id or from the address → 429, core
 * busy or unreachable → 503, both with `Retry-After` (seconds). Each device's messages are paced
 * (limits.ts `messageRate`, shared with MQTT): a request waits up to 1 s for its turn before its
 * body is read, else 429 with `Retry-After`. Each refusal is counted by reason (metrics.ts).
 * The body must be a JSON object or array of at most 64 KiB that can be stored (else 400 with the
 * reason, e.g. a NUL character or an unpaired surrogate; 413; 415). The optional `Message-Id` header
 * (1–128 printable ASCII characters, else 400) becomes the message id, so a device that sends a
 * message again with the same id has it stored once; without it the gateway assigns one. The
 * answer 202 `{"messageId"}` is sent only after the broker acknowledged the message; 503 when it
 * did not, with `Retry-After` (seconds) when the broker's stream is full. With `?ttd=<seconds>` the
 * answer may instead carry the device's next command, and `POST /v1/command/res/<command id>`
 * takes its answer (http-commands.ts); such a poll is a connection of the device while it is held
 * (connection-events.ts: `connected` as it begins, `disconnected` as its answer ends — `lost` when
 * the device went away first), and each refused login of a named device is a `refused` event, as
 * over MQTT. Any other path → 404, another method → 405.
 */

import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpError, parseBasic, readJson, sendError, sendJson } from '../shared/http.ts';
import type { Logger } from '../shared/log.ts';
import { isMessageId, isPayload, newMessageId, unstorable } from '../shared/telemetry.ts';
import type { CommandDelivery } from './command-delivery.ts';
import type { ConnectionSink } from './connection-events.ts';
import { BacklogFullError, type Forward } from './forwarder.ts';
import { answerWithCommand, respond, RESPONSE_PATH, ttdOf } from './http-commands.ts';
import type { DeviceLogin } from './login.ts';
import type { GatewayMetrics, RefusalReason } from './metrics.ts';
import { certificateDevice } from './tls.ts';
import type { TokenBuckets } from '../shared/token-buckets.ts';

/** What a device is told to wait before sending again while the broker's stream is full. */
export const BACKLOG_RETRY_AFTER_SECONDS = 5;

export interface HttpAdapterOptions {
  login: DeviceLogin;
  forward: Forward;
  log: Logger;
  metrics: GatewayMetrics;
  /** Paces each device's messages (shared with the MQTT adapter). */
  messageRate: TokenBuckets;
  /** Commands to devices that poll (http-commands.ts). */
  commands?: CommandDelivery;
  /** Told of polls opened and ended and of refused logins (connection-events.ts). */
  connections?: ConnectionSink;
}

/** The longest a request waits for its device's turn before it is answered 429. */
const MAX_PACING_WAIT_MS = 1_000;

export function createHttpAdapter(options: HttpAdapterOptions): RequestListener {
  const { login, forward, log, metrics, messageRate, commands, connections } = options;

  function refuse(reason: RefusalReason, device: string | undefined, error: HttpError): never {
    metrics.refused(reason);
    log.warn('http device refused', { device, reason: error.message });
    throw error;
  }

  /** A login of `device` refused: a connection event, as for MQTT, then `refuse`. */
  function refuseLogin(reason: RefusalReason, device: string, error: HttpError): never {
    connections?.refused(device);
    return refuse(reason, device, error);
  }

  async function authenticatedDevice(req: IncomingMessage): Promise<string> {
    const credentials = parseBasic(req.headers.authorization);
    const certified = certificateDevice(req.socket);
    if (certified) {
      if (credentials && credentials.user !== certified) refuseLogin('certificate', credentials.user, new HttpError(403, `the client certificate names device ${certified}`));
      return certified;
    }
    if (!credentials) return refuse('bad_credentials', undefined, new HttpError(401, 'basic auth with a registered device id and its password is required'));
    const result = await login.login(credentials.user, credentials.password, req.socket.remoteAddress ?? 'unknown');
    if (result.admitted) return credentials.user;
    const retryAfter = { 'Retry-After': String(result.retryAfterSeconds ?? 1) };
    if (result.reason === 'rate_limited') refuseLogin(result.reason, credentials.user, new HttpError(429, 'too many failed logins; try again later', retryAfter));
    if (result.reason === 'registry_busy') refuseLogin(result.reason, credentials.user, new HttpError(503, 'device registry busy or unavailable', retryAfter));
    return refuseLogin(result.reason, credentials.user, new HttpError(401, 'basic auth with a registered device id and its password is required'));
  }

  async function paced(deviceId: string): Promise<void> {
    const waitMs = messageRate.reserve(deviceId, MAX_PACING_WAIT_MS);
    if (waitMs === undefined) {
      const retryAfter = String(Math.max(1, Math.ceil(messageRate.wait(deviceId) / 1000)));
      refuse('message_rate', deviceId, new HttpError(429, 'the device sends faster than its message rate', { 'Retry-After': retryAfter }));
    }
    await sleep(waitMs);
  }

  async function telemetry(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const deviceId = await authenticatedDevice(req);
    await paced(deviceId);
    const ttd = commands ? ttdOf(req) : undefined;
    const given = req.headers['message-id'];
    if (given !== undefined && !isMessageId(given)) throw new HttpError(400, 'Message-Id must be 1-128 printable ASCII characters without spaces');
    const payload = await readJson(req);
    if (!isPayload(payload)) throw new HttpError(400, 'body must be a JSON object or array');
    const problem = unstorable(payload);
    if (problem) {
      log.warn('http message refused', { device: deviceId, reason: problem });
      throw new HttpError(400, `${problem}, which cannot be stored`);
    }
    const envelope = { messageId: given ?? newMessageId(), deviceId, receivedAt: new Date().toISOString(), payload };
    try {
      await forward(envelope);
    } catch (error) {
      log.warn('http message not forwarded', { device: deviceId, messageId: envelope.messageId, error });
      if (error instanceof BacklogFullError) throw new HttpError(503, 'the service is storing what it already has; send it again later', { 'Retry-After': String(BACKLOG_RETRY_AFTER_SECONDS) });
      throw new HttpError(503, 'the broker did not accept the message; send it again');
    }
    const accepted = () => sendJson(res, 202, { messageId: envelope.messageId });
    if (commands && ttd !== undefined) return answerWithCommand(commands, deviceId, ttd, res, accepted, connections);
    accepted();
  }

  async function commandResponse(commandId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const deviceId = await authenticatedDevice(req);
    if (commands) await respond(commands, deviceId, commandId, req, res);
  }

  return (req, res) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const response = commands ? RESPONSE_PATH.exec(path) : null;
    const handled = response?.[1]
      ? req.method !== 'POST'
        ? Promise.reject(new HttpError(405, 'use POST'))
        : commandResponse(response[1], req, res)
      : path !== '/v1/telemetry'
        ? Promise.reject(new HttpError(404, 'not found'))
        : req.method !== 'POST'
          ? Promise.reject(new HttpError(405, 'use POST'))
          : telemetry(req, res);
    handled.catch((error: unknown) => {
      if (!(error instanceof HttpError)) log.error('request failed', { path, error });
      sendError(res, error, error instanceof HttpError && error.status === 401 ? { 'WWW-Authenticate': 'Basic realm="iot-gateway"' } : {});
    });
  };
}
