/**
 * Typed API failures.
 *
 * Guarantees: every non-2xx answer of the API server becomes an `ApiError` carrying the HTTP
 * code, the Kubernetes `reason` and the server's message; callers branch on `reason`, never on
 * message text. The reason is the one the server's Status body names, whatever it is (409 comes
 * as `AlreadyExists` or `Conflict`, 410 as `Gone` or `Expired`, 500 as `InternalError` or
 * `ServerTimeout`, ...); only an answer without one gets a reason derived from the code.
 * Transport failures (connection refused, reset, timeout) become `ApiError` with code 0 and
 * reason `ServiceUnavailable`, so they are retried like any other transient failure.
 * `ifFound(request)` turns a NotFound answer into undefined.
 */

/** The reasons of metav1.StatusReason; a server may send others, which are kept as sent. */
export type KnownStatusReason =
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Invalid'
  | 'Forbidden'
  | 'Unauthorized'
  | 'Gone'
  | 'Expired'
  | 'TooManyRequests'
  | 'BadRequest'
  | 'MethodNotAllowed'
  | 'UnsupportedMediaType'
  | 'Timeout'
  | 'ServerTimeout'
  | 'InternalError'
  | 'ServiceUnavailable'
  | 'NotAcceptable'
  | 'RequestEntityTooLarge'
  | 'Unknown';

// `string & {}` keeps reasons newer servers add while editors still offer the known ones.
export type StatusReason = KnownStatusReason | (string & {});

/** client-go's reasonForCode: what an answer without a Status reason means. */
const reasonByCode: Record<number, KnownStatusReason> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Gone',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: number,
    readonly reason: StatusReason,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }

  /** Builds the error from an HTTP status code and a response body (a metav1.Status or anything). */
  static fromResponse(code: number, body: unknown, method: string, path: string): ApiError {
    const status = isStatus(body) ? body : undefined;
    const reason = typeof status?.reason === 'string' && status.reason !== '' ? status.reason : (reasonByCode[code] ?? 'Unknown');
    const message = status?.message ?? `${method} ${path}: HTTP ${code}`;
    return new ApiError(code, reason, message, status?.details);
  }

  static transport(cause: unknown, method: string, path: string): ApiError {
    const text = cause instanceof Error ? cause.message : String(cause);
    const err = new ApiError(0, 'ServiceUnavailable', `${method} ${path}: ${text}`);
    (err as { cause?: unknown }).cause = cause;
    return err;
  }

  /** Transient failures that a retry with backoff can fix. */
  get retriable(): boolean {
    return (
      this.code === 0 ||
      this.code >= 500 ||
      this.reason === 'Conflict' ||
      this.reason === 'TooManyRequests' ||
      this.reason === 'Timeout' ||
      this.reason === 'ServerTimeout'
    );
  }
}

interface StatusBody {
  kind: 'Status';
  reason?: StatusReason;
  message?: string;
  details?: unknown;
}

function isStatus(body: unknown): body is StatusBody {
  return typeof body === 'object' && body !== null && (body as { kind?: unknown }).kind === 'Status';
}

export function isApiError(err: unknown, reason?: StatusReason): err is ApiError {
  return err instanceof ApiError && (reason === undefined || err.reason === reason);
}

export const isNotFound = (err: unknown): boolean => isApiError(err, 'NotFound');

/** What `request` resolves to, or undefined when the API server answers NotFound; any other failure is passed on. */
export async function ifFound<T>(request: Promise<T>): Promise<T | undefined> {
  try {
    return await request;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** A write lost a race: the object changed since it was read (resourceVersion precondition). */
export const isConflict = (err: unknown): boolean => isApiError(err, 'Conflict');
export const isAlreadyExists = (err: unknown): boolean => isApiError(err, 'AlreadyExists');
export const isInvalid = (err: unknown): boolean => isApiError(err, 'Invalid');
export const isForbidden = (err: unknown): boolean => isApiError(err, 'Forbidden');
/** The resourceVersion asked for is too old (410, reason `Gone` or `Expired`): list again. */
export const isGone = (err: unknown): boolean => isApiError(err, 'Gone') || isApiError(err, 'Expired');
