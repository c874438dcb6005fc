/**
 * Application credentials: the tokens with which a tenant's applications use core's API (follow
 * the events stream, read devices and their telemetry, send commands to devices) and do nothing
 * else.
 *
 * Guarantees: `POST /v1/applications` `{"id"}` (api token) → 201 `{"id","token"}`: a fresh
 * token `app.<id>.<secret>` (192 random bits, stored only hashed, as device passwords are:
 * passwords.ts); the same id again → 409; an id not of 1–128 `A-Z a-z 0-9 . _ : -` → 400.
 * `DELETE /v1/applications/<id>` → 204, the token refused from then on by this core replica and
 * within APPLICATION_KNOWN_MS (2 s) by every other; unknown → 404. `ApplicationTokens.authenticate`
 * returns the application's id for a valid token and undefined for any other (never throws for a
 * malformed one; asks the store only for a token of the application form, and for an application
 * it found within APPLICATION_KNOWN_MS not again, so requests at any rate ask the store at most
 * once per application in that time). `applicationMayUse` is true for the reading routes and commands alone: `GET /v1/stream`,
 * `GET /v1/devices/<id>`, `GET /v1/devices/<id>/telemetry`, `POST /v1/devices/<id>/commands` and
 * `GET /v1/devices/<id>/commands/<command id>`.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, readJson, sendJson } from '../shared/http.ts';
import type { Logger } from '../shared/log.ts';
import type { ApplicationStore } from '../shared/store.ts';
import { isDeviceId } from '../shared/telemetry.ts';
import { generatePassword, hashPassword, verifyPassword } from './passwords.ts';
import { RecentAnswers } from './recent-answers.ts';

const TOKEN_PREFIX = 'app.';

/** An application's id follows the rule of a device id (telemetry.ts). */
const isApplicationId = isDeviceId;

function parseToken(token: string): { id: string; secret: string } | undefined {
  if (!token.startsWith(TOKEN_PREFIX)) return undefined;
  const dot = token.lastIndexOf('.');
  const id = token.slice(TOKEN_PREFIX.length, dot);
  const secret = token.slice(dot + 1);
  return dot > TOKEN_PREFIX.length && isApplicationId(id) && secret !== '' ? { id, secret } : undefined;
}

/** How long an application's token hash found in the store is used without asking again: another replica's revocation is seen within this. */
export const APPLICATION_KNOWN_MS = 2_000;

export class ApplicationTokens {
  private readonly hashes = new RecentAnswers<string, string | undefined>({ maxAgeMs: APPLICATION_KNOWN_MS, maxEntries: 10_000 });

  constructor(private readonly store: ApplicationStore) {}

  async authenticate(token: string): Promise<string | undefined> {
    const parsed = parseToken(token);
    if (!parsed) return undefined;
    const hash = await this.hashes.get(parsed.id, () => this.store.applicationTokenHash(parsed.id), (found) => found !== undefined);
    return hash !== undefined && (await verifyPassword(parsed.secret, hash)) ? parsed.id : undefined;
  }

  /** The application was revoked here: its token is refused from now on. */
  forget(id: string): void {
    this.hashes.forget(id);
  }
}

export function applicationMayUse(method: string, pathname: string): boolean {
  if (method === 'POST') return /^\/v1\/devices\/[^/]+\/commands$/.test(pathname);
  return method === 'GET' && (pathname === '/v1/stream' || /^\/v1\/devices\/[^/]+(\/telemetry|\/commands\/[^/]+)?$/.test(pathname));
}

export async function issueApplication(req: IncomingMessage, res: ServerResponse, store: ApplicationStore, log: Logger): Promise<void> {
  const body = await readJson(req);
  const id = typeof body === 'object' && body !== null ? (body as Record<string, unknown>).id : undefined;
  if (!isApplicationId(id)) throw new HttpError(400, 'id must be 1-128 characters of A-Z a-z 0-9 . _ : -');
  const secret = generatePassword();
  if (!(await store.createApplication(id, await hashPassword(secret)))) throw new HttpError(409, `application ${id} exists`);
  log.info('application credential issued', { application: id });
  sendJson(res, 201, { id, token: `${TOKEN_PREFIX}${id}.${secret}` });
}

export async function revokeApplication(id: string, res: ServerResponse, store: ApplicationStore, tokens: ApplicationTokens, log: Logger): Promise<void> {
  if (!isApplicationId(id)) throw new HttpError(404, `no application ${id}`);
  const deleted = await store.deleteApplication(id);
  tokens.forget(id);
  if (!deleted) throw new HttpError(404, `no application ${id}`);
  log.info('application credential revoked', { application: id });
  res.writeHead(204).end();
}
