/**
 * The gateway's device-facing HTTP adapter (port 8080): `POST /v1/telemetry`.
 *
 * Guarantees: the device authenticates with basic auth (device id, password), checked as for MQTT;
 * missing or wrong credentials → 401 with `WWW-Authenticate: Basic`, and core unreachable → 503.
 * The body must be a JSON object or array of at most 64 KiB that can be stored (else 400 with the
 * reason, e.g. a NUL character or an unpaired surrogate; 413; 415). The optional `Message-Id` header
 * (1–128 printable ASCII characters, else 400) becomes the message id, so a device that sends a
 * message again with the same id has it stored once; without it the gateway assigns one. The
 * answer 202 `{"messageId"}` is sent only after the broker acknowledged the message; 503 when it
 * did not, with `Retry-After` (seconds) when the broker's stream is full. Any other path → 404,
 * another method → 405.
 */

import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { HttpError, parseBasic, readJson, sendError, sendJson } from '../shared/http.ts';
import type { Logger } from '../shared/log.ts';
import { isMessageId, isPayload, newMessageId, unstorable } from '../shared/telemetry.ts';
import type { DeviceAuthenticator } from './devices.ts';
import { BacklogFullError, type Forward } from './forwarder.ts';

/** What a device is told to wait before sending again while the broker's stream is full. */
export const BACKLOG_RETRY_AFTER_SECONDS = 5;

export interface HttpAdapterOptions {
  devices: DeviceAuthenticator;
  forward: Forward;
  log: Logger;
}

export function createHttpAdapter(options: HttpAdapterOptions): RequestListener {
  const { devices, forward, log } = options;

  async function authenticatedDevice(req: IncomingMessage): Promise<string> {
    const credentials = parseBasic(req.headers.authorization);
    let valid = false;
    if (credentials) {
      try {
        valid = await devices.authenticate(credentials.user, credentials.password);
      } catch (error) {
        log.error('device check failed', { device: credentials.user, error });
        throw new HttpError(503, 'device registry unavailable');
      }
    }
    if (!credentials || !valid) {
      log.warn('http device refused', { device: credentials?.user, reason: 'bad user name or password' });
      throw new HttpError(401, 'basic auth with a registered device id and its password is required');
    }
    return credentials.user;
  }

  async function telemetry(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const deviceId = await authenticatedDevice(req);
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
    sendJson(res, 202, { messageId: envelope.messageId });
  }

  return (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const handled =
      path !== '/v1/telemetry'
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
