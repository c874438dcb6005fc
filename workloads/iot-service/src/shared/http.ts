/**
 * Small HTTP pieces shared by core and gateway, on Node's own http module.
 *
 * Guarantees: `parseBearer` and `parseBasic` return the credentials of a well-formed
 * Authorization header of their scheme (scheme case-insensitive) and undefined for anything else;
 * `readJson` rejects with HttpError 413 beyond `limit` bytes, 415 without a JSON content type and
 * 400 for malformed JSON; `sendJson` writes a complete JSON response with Content-Length; `sendError` answers an HttpError
 * with its status and headers;
 * `sameSecret` compares two strings in time independent of where they differ.
 */

import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Largest accepted request body. */
export const BODY_LIMIT = 64 * 1024;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Headers the answer carries, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export function parseBearer(header: string | undefined): string | undefined {
  const match = /^Bearer +(\S+) *$/i.exec(header ?? '');
  return match?.[1];
}

export function parseBasic(header: string | undefined): { user: string; password: string } | undefined {
  const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return undefined;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Constant-time equality of two secrets (compared as SHA-256 digests, so lengths leak nothing either). */
export function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}

export async function readJson(req: IncomingMessage, limit = BODY_LIMIT): Promise<unknown> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
    throw new HttpError(415, 'Content-Type must be application/json');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, `body larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'body is not valid JSON');
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Answers an error thrown by a handler: its HttpError status, else 500 (the message is then not exposed). */
export function sendError(res: ServerResponse, error: unknown, headers: Record<string, string> = {}): void {
  if (error instanceof HttpError) sendJson(res, error.status, { error: error.message }, { ...error.headers, ...headers });
  else sendJson(res, 500, { error: 'internal error' });
}
