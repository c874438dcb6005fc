/**
 * core's HTTP API (port 8080): the device registry, the telemetry query and the gateway's
 * credential check.
 *
 * Guarantees: every route requires `Authorization: Bearer <token>` (compared in constant time) and
 * answers 401 without it or with another token, before reading the body. Besides applications'
 * tokens (below), two tokens are known:
 * the api token (iot-credentials `api-token`), good for every route, and the device-check token
 * (`device-check-token`, the gateway's), good for `POST /v1/internal/device-auth` alone — with it
 * any other route, method or path answers 401, so a gateway can verify devices and do nothing
 * else.
 * - `POST /v1/devices` `{"id"}` → 201 `{"id","password"}` (a fresh password, stored only hashed);
 *   the same id again → 409; a malformed id → 400.
 * - `POST /v1/devices/<id>/password` → 200 `{"id","password"}`: a fresh password replaces the
 *   device's (the old one is refused from then on); unknown device → 404.
 * - `GET /v1/devices/<id>` → 200 `{"id","connected","lastSeen"}`: whether a gateway holds an
 *   MQTT connection of the device open, and the latest of its connection transitions and stored
 *   telemetry (null if none); unknown device → 404.
 * - `DELETE /v1/devices/<id>` → 204: the device leaves the registry and is refused from then on;
 *   its stored telemetry stays, readable below until retention deletes it; unknown device → 404.
 *   Both changes are announced to every gateway (device-notices.ts) once stored and answered
 *   after the broker took the notice (or after waiting for it a bounded time: a notice lost is
 *   noticed missing by the gateways all the same, see gateway/device-changes.ts), so no gateway
 *   connected to the broker admits the old password from its login cache more than 3.5 s
 *   (SILENCE_LIMIT_MS and its 500 ms check) after the change, and its open MQTT connection is
 *   closed as the notice arrives. Neither is made while core is not connected to the broker: 503
 *   with `Retry-After: 1`, nothing changed. A DELETE of an unknown device is announced too, so a
 *   DELETE retried after an error is announced again.
 * - `GET /v1/devices/<id>/telemetry?limit=N` → 200 array of `{"messageId","receivedAt","storedAt","payload"}`
 *   newest first, N in 1..1000 (default 100, else 400); a device id neither registered nor with
 *   telemetry stored → 404. The next page:
 *   `&before=<receivedAt>&beforeMessageId=<messageId>` of the page's last record (strictly older
 *   records; `before` alone: everything received before that time); a `before` that is not an
 *   ISO 8601 time, or `beforeMessageId` without `before` or not a message id → 400.
 * - `POST /v1/devices/<id>/commands`, `GET /v1/devices/<id>/commands/<command id>`: commands to
 *   devices (commands.ts), with the api token.
 * - `POST /v1/internal/device-auth` `{"id","password"}` → 200 `{"authenticated": true|false}`:
 *   the check the gateway makes for each device it has not cached; it tells nothing more than
 *   whether this pair is valid. At most `checks.concurrency` (default: the CPUs, at most 4 —
 *   Node's crypto threads) checks compute at once and `checks.maxQueued` (default 8 per one at
 *   once, so none waits much more than eight checks) wait; beyond that → 503 with
 *   `Retry-After: 1` at once.
 *   A check whose request was closed by the gateway (its timeout) while waiting is not computed.
 * - Applications (applications.ts): `POST /v1/applications`, `DELETE /v1/applications/<id>`
 *   with the api token; an application's own token is good for the read-only routes alone
 *   (others → 403) and refused (401) once revoked (by other core replicas within 2 s). `GET /v1/stream`: the events as Server-Sent
 *   Events (event-stream.ts), for an application token or the api token.
 * Anything else → 404 (405 for a known path with another method). Errors of the store → 500
 * without detail in the response (logged).
 */

import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { availableParallelism } from 'node:os';
import { HttpError, parseBearer, readJson, sameSecret, sendError, sendJson } from '../shared/http.ts';
import type { Logger } from '../shared/log.ts';
import type { ApplicationStore, DeviceStore, TelemetryCursor } from '../shared/store.ts';
import { isDeviceId, isMessageId } from '../shared/telemetry.ts';
import { applicationMayUse, ApplicationTokens, issueApplication, revokeApplication } from './applications.ts';
import { Bounded, BusyError } from './bounded.ts';
import type { Commands } from './commands.ts';
import type { DeviceChangeAnnouncer } from './device-notices.ts';
import type { EventStreams } from './event-stream.ts';
import { generatePassword, hashPassword, verifyPassword } from './passwords.ts';

export const DEFAULT_TELEMETRY_LIMIT = 100;
export const MAX_TELEMETRY_LIMIT = 1000;

export interface CoreApiOptions {
  store: DeviceStore & ApplicationStore;
  /** Good for every route. */
  apiToken: string;
  /** Good for `POST /v1/internal/device-auth` only. */
  deviceCheckToken: string;
  /** Tells the gateways of a device's reset or deletion. */
  notices: DeviceChangeAnnouncer;
  /** `GET /v1/stream` (event-stream.ts). */
  events: EventStreams;
  log: Logger;
  checks?: { concurrency: number; maxQueued: number };
  /** Commands to devices (commands.ts); without it their routes are not served. */
  commands?: Commands;
}

const COMMAND_PATH = /^\/v1\/devices\/([^/]+)\/commands(?:\/([^/]+))?$/;

function parseLimit(value: string | null): number {
  if (value === null) return DEFAULT_TELEMETRY_LIMIT;
  const limit = Number(value);
  if (!/^\d+$/.test(value) || limit < 1 || limit > MAX_TELEMETRY_LIMIT) {
    throw new HttpError(400, `limit must be an integer from 1 to ${MAX_TELEMETRY_LIMIT}`);
  }
  return limit;
}

/** The page cursor of a telemetry query (`before`, `beforeMessageId`); undefined for the first page. */
function parseCursor(before: string | null, beforeMessageId: string | null): TelemetryCursor | undefined {
  if (before === null) {
    if (beforeMessageId !== null) throw new HttpError(400, 'beforeMessageId needs before');
    return undefined;
  }
  const time = Date.parse(before);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(before) || Number.isNaN(time)) throw new HttpError(400, 'before must be an ISO 8601 time (a record\'s receivedAt)');
  if (beforeMessageId !== null && !isMessageId(beforeMessageId)) throw new HttpError(400, 'beforeMessageId must be a message id');
  return { receivedAt: new Date(time).toISOString(), ...(beforeMessageId !== null ? { messageId: beforeMessageId } : {}) };
}

/** A percent-decoded path segment; a malformed encoding yields '' (no device has that id). */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return '';
  }
}

async function bodyObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const body = await readJson(req);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'body must be a JSON object');
  return body as Record<string, unknown>;
}

export function createCoreApi(options: CoreApiOptions): RequestListener {
  const { store, apiToken, deviceCheckToken, notices, events, log } = options;
  const concurrency = options.checks?.concurrency ?? Math.min(4, availableParallelism());
  const checks = new Bounded(concurrency, options.checks?.maxQueued ?? 8 * concurrency);
  const applications = new ApplicationTokens(store);

  async function registerDevice(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { id } = await bodyObject(req);
    if (!isDeviceId(id)) throw new HttpError(400, 'id must be 1-128 characters of A-Z a-z 0-9 . _ : -');
    const password = generatePassword();
    if (!(await store.createDevice(id, await hashPassword(password)))) throw new HttpError(409, `device ${id} exists`);
    log.info('device registered', { device: id });
    sendJson(res, 201, { id, password });
  }

  /** Refuses a change no gateway could be told of. */
  function mustAnnounce(): void {
    if (!notices.connected()) throw new HttpError(503, 'core is not connected to the broker, so the gateways cannot be told; nothing was changed', { 'Retry-After': '1' });
  }

  async function resetPassword(deviceId: string, res: ServerResponse): Promise<void> {
    if (!isDeviceId(deviceId)) throw new HttpError(404, `no device ${deviceId}`);
    mustAnnounce();
    const password = generatePassword();
    if (!(await store.setPasswordHash(deviceId, await hashPassword(password)))) throw new HttpError(404, `no device ${deviceId}`);
    await notices.announce(deviceId);
    log.info('device password reset', { device: deviceId });
    sendJson(res, 200, { id: deviceId, password });
  }

  async function deleteDevice(deviceId: string, res: ServerResponse): Promise<void> {
    if (!isDeviceId(deviceId)) throw new HttpError(404, `no device ${deviceId}`);
    mustAnnounce();
    const deleted = await store.deleteDevice(deviceId);
    options.commands?.forget(deviceId);
    await notices.announce(deviceId);
    if (!deleted) throw new HttpError(404, `no device ${deviceId}`);
    log.info('device deleted', { device: deviceId });
    res.writeHead(204).end();
  }

  async function showDevice(deviceId: string, res: ServerResponse): Promise<void> {
    const state = isDeviceId(deviceId) ? await store.deviceState(deviceId) : undefined;
    if (!state) throw new HttpError(404, `no device ${deviceId}`);
    sendJson(res, 200, state);
  }

  async function deviceTelemetry(deviceId: string, url: URL, res: ServerResponse): Promise<void> {
    const limit = parseLimit(url.searchParams.get('limit'));
    const before = parseCursor(url.searchParams.get('before'), url.searchParams.get('beforeMessageId'));
    const records = isDeviceId(deviceId) ? await store.telemetry(deviceId, limit, before) : undefined;
    if (!records) throw new HttpError(404, `no device ${deviceId}`);
    sendJson(res, 200, records);
  }

  async function authenticateDevice(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { id, password } = await bodyObject(req);
    if (typeof id !== 'string' || typeof password !== 'string') throw new HttpError(400, 'id and password must be strings');
    const abandoned = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abandoned.abort(new Error('the gateway closed the request'));
    });
    const verify = async () => {
      const hash = isDeviceId(id) ? await store.passwordHash(id) : undefined;
      return hash !== undefined && (await verifyPassword(password, hash));
    };
    let authenticated: boolean;
    try {
      authenticated = await checks.run(verify, abandoned.signal);
    } catch (error) {
      if (error instanceof BusyError) throw new HttpError(503, 'too many device checks at once', { 'Retry-After': '1' });
      if (abandoned.signal.aborted) return; // nobody is waiting for the answer
      throw error;
    }
    sendJson(res, 200, { authenticated });
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://core');
    const method = req.method ?? 'GET';
    const token = parseBearer(req.headers.authorization);
    const admin = token !== undefined && sameSecret(token, apiToken);
    const deviceCheck = !admin && token !== undefined && sameSecret(token, deviceCheckToken) && method === 'POST' && url.pathname === '/v1/internal/device-auth';
    const command = options.commands ? COMMAND_PATH.exec(url.pathname) : null;
    const application = admin || deviceCheck || token === undefined ? undefined : await applications.authenticate(token);
    if (!admin && !deviceCheck && application === undefined) throw new HttpError(401, 'a valid Authorization: Bearer <api token> is required');
    if (application !== undefined && !applicationMayUse(method, url.pathname)) {
      throw new HttpError(403, 'an application token is good for reading and commands only: GET /v1/stream, /v1/devices/<id>, /v1/devices/<id>/telemetry, POST /v1/devices/<id>/commands, GET /v1/devices/<id>/commands/<command id>');
    }
    const only = (allowed: string) => {
      if (method !== allowed) throw new HttpError(405, `use ${allowed}`);
    };
    if (url.pathname === '/v1/devices') {
      only('POST');
      return registerDevice(req, res);
    }
    if (url.pathname === '/v1/stream') {
      only('GET');
      const follower = application ?? 'api-token';
      return events.serve(req, res, url, {
        application: follower,
        stillAllowed: async () => application === undefined || (token !== undefined && (await applications.authenticate(token)) !== undefined),
      });
    }
    if (url.pathname === '/v1/applications') {
      only('POST');
      return issueApplication(req, res, store, log);
    }
    const applicationPath = /^\/v1\/applications\/([^/]+)$/.exec(url.pathname);
    if (applicationPath?.[1]) {
      only('DELETE');
      return revokeApplication(decodePathSegment(applicationPath[1]), res, store, applications, log);
    }
    if (url.pathname === '/v1/internal/device-auth') {
      only('POST');
      return authenticateDevice(req, res);
    }
    const telemetry = /^\/v1\/devices\/([^/]+)\/telemetry$/.exec(url.pathname);
    if (telemetry?.[1]) {
      only('GET');
      return deviceTelemetry(decodePathSegment(telemetry[1]), url, res);
    }
    const password = /^\/v1\/devices\/([^/]+)\/password$/.exec(url.pathname);
    if (password?.[1]) {
      only('POST');
      return resetPassword(decodePathSegment(password[1]), res);
    }
    if (command?.[1] && options.commands) {
      const deviceId = decodePathSegment(command[1]);
      if (command[2] === undefined) {
        only('POST');
        return options.commands.send(req, res, deviceId);
      }
      only('GET');
      return options.commands.read(res, deviceId, decodePathSegment(command[2]));
    }
    const device = /^\/v1\/devices\/([^/]+)$/.exec(url.pathname);
    if (device?.[1]) {
      if (method === 'GET') return showDevice(decodePathSegment(device[1]), res);
      if (method !== 'DELETE') throw new HttpError(405, 'use GET or DELETE');
      return deleteDevice(decodePathSegment(device[1]), res);
    }
    throw new HttpError(404, 'not found');
  }

  return (req, res) => {
    route(req, res).catch((error: unknown) => {
      if (!(error instanceof HttpError)) log.error('request failed', { method: req.method, path: req.url?.split('?')[0], error });
      sendError(res, error);
    });
  };
}
