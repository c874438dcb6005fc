/**
 * Admission webhooks (admission.k8s.io/v1 AdmissionReview): validating and mutating handlers
 * typed by the object they admit.
 *
 * Guarantees:
 * - Only `admission.k8s.io/v1` reviews with a request and its uid are accepted (the
 *   configuration must list `admissionReviewVersions: ["v1"]`); anything else is a bad request.
 * - Every answer is an `admission.k8s.io/v1` AdmissionReview whose `response.uid` is the
 *   request's; `warnings` appear only when a handler gave some (`context.warn`).
 * - A validating handler returns `allow()`, `deny(message)` or nothing (allowed). A denial
 *   answers `allowed: false` with `status.code` 403 (reason Forbidden) and the message, which the
 *   API server shows its client.
 * - A mutating handler receives a copy of the request's object, changes it (or builds another)
 *   and returns it, or returns `deny(...)`; the answer carries a JSON patch (RFC 6902) from the
 *   request's object to the returned one, base64-encoded, `patchType: JSONPatch`, and no patch
 *   when nothing changed; returning no object denies the request. A request without an object (DELETE, CONNECT) is allowed unchanged
 *   without calling the handler.
 * - A handler that throws denies the request with the error's message (403, or the code and
 *   reason of an error carrying them, e.g. an `ApiError`), as controller-runtime treats a
 *   validator's error; it never reaches the server as an exception.
 */
import type { KubeObject } from '../client/resource.ts';
import { jsonPatch } from './json-patch.ts';
import { BadReviewError, refusalOf, isRecord, type Refusal, type HandlerContext, type Webhook } from './review.ts';

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

export interface UserInfo {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** admission.k8s.io/v1 AdmissionRequest. */
export interface AdmissionRequest<T extends KubeObject = KubeObject> {
  uid: string;
  kind: GroupVersionKind;
  resource: GroupVersionResource;
  subResource?: string;
  requestKind?: GroupVersionKind;
  requestResource?: GroupVersionResource;
  requestSubResource?: string;
  name?: string;
  namespace?: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  userInfo: UserInfo;
  /** The object as it would be stored (absent for DELETE). */
  object?: T;
  /** The object as stored (UPDATE, and DELETE where the server sends it). */
  oldObject?: T;
  dryRun?: boolean;
  options?: Record<string, unknown>;
}

/** What an admission handler is given besides the request. */
export interface AdmissionContext extends HandlerContext {
  /** Adds a warning to the answer, allowed or denied (kubectl prints each as `Warning: ...`). */
  warn(message: string): void;
}

/** A handler's decision; build it with `allow()` or `deny(message)`. */
export class Verdict {
  private constructor(
    readonly allowed: boolean,
    readonly message?: string,
  ) {}

  static readonly allowed = new Verdict(true);

  static denied(message: string): Verdict {
    return new Verdict(false, message);
  }
}

export function allow(): Verdict {
  return Verdict.allowed;
}

export function deny(message: string): Verdict {
  return Verdict.denied(message);
}

export type ValidatingHandler<T extends KubeObject = KubeObject> = (request: AdmissionRequest<T>, context: AdmissionContext) => Verdict | void | Promise<Verdict | void>;

export type MutatingHandler<T extends KubeObject = KubeObject> = (object: T, request: AdmissionRequest<T>, context: AdmissionContext) => T | Verdict | Promise<T | Verdict>;

/** admission.k8s.io/v1 AdmissionResponse as the API server reads it. */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; reason: string; message: string };
  patch?: string;
  patchType?: 'JSONPatch';
  warnings?: string[];
}

export interface AdmissionReviewAnswer {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

const denialDefaults = { code: 403, reason: 'Forbidden' };

/** A validating admission webhook: the handler allows or denies. */
export function validatingWebhook<T extends KubeObject = KubeObject>(handler: ValidatingHandler<T>): Webhook<AdmissionRequest<T>> {
  return {
    kind: 'validating',
    decode: (body) => decodeAdmissionReview<T>(body),
    refuse: (request, failure) => answer(request.uid, refusal(failure)),
    async answer(request, context) {
      const warnings: string[] = [];
      try {
        const verdict = (await handler(request, { ...context, warn: (message) => void warnings.push(message) })) ?? Verdict.allowed;
        return answer(request.uid, verdict.allowed ? { allowed: true } : refusal({ message: verdict.message ?? '', ...denialDefaults }), warnings);
      } catch (err) {
        return answer(request.uid, refusal(refusalOf(err, denialDefaults)), warnings);
      }
    },
  };
}

/** A mutating (defaulting) admission webhook: the handler returns the object to admit. */
export function mutatingWebhook<T extends KubeObject = KubeObject>(handler: MutatingHandler<T>): Webhook<AdmissionRequest<T>> {
  return {
    kind: 'mutating',
    decode: (body) => decodeAdmissionReview<T>(body),
    refuse: (request, failure) => answer(request.uid, refusal(failure)),
    async answer(request, context) {
      if (!isRecord(request.object)) return answer(request.uid, { allowed: true });
      const warnings: string[] = [];
      try {
        const result = await handler(structuredClone(request.object), request, { ...context, warn: (message) => void warnings.push(message) });
        if (result instanceof Verdict) {
          return answer(request.uid, result.allowed ? { allowed: true } : refusal({ message: result.message ?? '', ...denialDefaults }), warnings);
        }
        if (!isRecord(result)) throw new Error('the mutating webhook handler returned no object');
        const ops = jsonPatch(request.object, result);
        if (ops.length === 0) return answer(request.uid, { allowed: true }, warnings);
        return answer(request.uid, { allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops)).toString('base64') }, warnings);
      } catch (err) {
        return answer(request.uid, refusal(refusalOf(err, denialDefaults)), warnings);
      }
    },
  };
}

/** The request of an admission.k8s.io/v1 AdmissionReview; a `BadReviewError` for anything else. */
export function decodeAdmissionReview<T extends KubeObject = KubeObject>(body: unknown): AdmissionRequest<T> {
  if (!isRecord(body) || body.kind !== 'AdmissionReview') throw new BadReviewError('the body is not an AdmissionReview');
  if (body.apiVersion !== 'admission.k8s.io/v1') {
    throw new BadReviewError(`AdmissionReview ${String(body.apiVersion)} is not served: list only "v1" in the webhook's admissionReviewVersions`);
  }
  const request = body.request;
  if (!isRecord(request) || typeof request.uid !== 'string' || request.uid === '') throw new BadReviewError('the AdmissionReview has no request with a uid');
  return request as unknown as AdmissionRequest<T>;
}

function refusal(failure: Refusal): Omit<AdmissionResponse, 'uid'> {
  return { allowed: false, status: { code: failure.code, reason: failure.reason, message: failure.message } };
}

function answer(uid: string, response: Omit<AdmissionResponse, 'uid'>, warnings: string[] = []): AdmissionReviewAnswer {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, ...response, ...(warnings.length > 0 ? { warnings } : {}) } };
}
