/**
 * What the webhook server needs from every kind of webhook (admission, conversion), so that the
 * server alone owns HTTP, limits, deadlines and metrics and each kind owns its review format.
 *
 * Guarantees: `decode` throws a `BadReviewError` for a body that is not a review of its kind
 * (the server answers 400 with its message); `answer` turns a decoded review into the response
 * body the API server expects, with a handler's exception turned into that kind's refusal by
 * the kind itself; `refuse` builds the refusal for a review the server gave up on (the
 * handler's deadline passed).
 */
import type { Logger } from 'pino';

/** What a handler is given besides its request. */
export interface HandlerContext {
  /** Aborted when the handler's deadline passes (its answer is then no longer awaited). */
  signal: AbortSignal;
  logger: Logger;
}

export interface Webhook<Review = unknown> {
  /** Names the kind in logs. */
  readonly kind: 'validating' | 'mutating' | 'conversion';
  decode(body: unknown): Review;
  answer(review: Review, context: HandlerContext): Promise<unknown>;
  refuse(review: Review, refusal: Refusal): unknown;
}

/** Why a request was refused: the message the API server shows, an HTTP-like code and its reason. */
export interface Refusal {
  message: string;
  code: number;
  reason: string;
}

export class BadReviewError extends Error {
  override readonly name = 'BadReviewError';
}

/** A thrown value as a refusal: an error carrying a Kubernetes code and reason (an `ApiError`) keeps them. */
export function refusalOf(err: unknown, fallback: { code: number; reason: string }): Refusal {
  const message = err instanceof Error ? err.message : String(err);
  const carried = err as { code?: unknown; reason?: unknown } | null;
  if (carried && typeof carried.code === 'number' && carried.code >= 400 && carried.code < 600 && typeof carried.reason === 'string') {
    return { message, code: carried.code, reason: carried.reason };
  }
  return { message, ...fallback };
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
