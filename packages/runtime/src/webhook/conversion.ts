/**
 * CRD conversion webhooks (apiextensions.k8s.io/v1 ConversionReview): the handler converts one
 * object to the version the API server asks for.
 *
 * Guarantees:
 * - Only `apiextensions.k8s.io/v1` reviews with a request, its uid, `desiredAPIVersion` and an
 *   `objects` list are accepted (the CRD must list `conversionReviewVersions: ["v1"]`); anything
 *   else is a bad request.
 * - The answer is an `apiextensions.k8s.io/v1` ConversionReview whose `response.uid` is the
 *   request's. On success `convertedObjects` holds every object of the request converted, in the
 *   request's order, each with `apiVersion` set to `desiredAPIVersion` (kind and metadata are the
 *   handler's to keep: the API server refuses changes other than labels and annotations), and
 *   `result.status` is `Success`; an object already in the desired version is passed through
 *   without calling the handler.
 * - If the handler throws for any object (or returns no object), the whole request fails:
 *   `result.status` is `Failure` with a message naming the object, the desired version and the
 *   error, and no objects are returned — the API server then fails the read or write that needed
 *   the conversion with that message.
 */
import type { KubeObject } from '../client/resource.ts';
import { BadReviewError, isRecord, type HandlerContext, type Webhook } from './review.ts';

/** apiextensions.k8s.io/v1 ConversionRequest. */
export interface ConversionRequest {
  uid: string;
  /** group/version every object is to be converted to, e.g. `example.com/v2`. */
  desiredAPIVersion: string;
  objects: KubeObject[];
}

/** Returns `object` converted to `desiredAPIVersion` (a new object, or `object` changed in place). */
export type ConversionHandler = (object: KubeObject, desiredAPIVersion: string, context: HandlerContext) => KubeObject | Promise<KubeObject>;

export interface ConversionReviewAnswer {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'ConversionReview';
  response: {
    uid: string;
    convertedObjects?: KubeObject[];
    result: { status: 'Success' } | { status: 'Failure'; message: string };
  };
}

export function conversionWebhook(handler: ConversionHandler): Webhook<ConversionRequest> {
  return {
    kind: 'conversion',
    decode: decodeConversionReview,
    refuse: (request, failure) => failed(request.uid, failure.message),
    async answer(request, context) {
      const converted: KubeObject[] = [];
      for (const object of request.objects) {
        if (object.apiVersion === request.desiredAPIVersion) {
          converted.push(object);
          continue;
        }
        try {
          const result = await handler(structuredClone(object), request.desiredAPIVersion, context);
          if (!isRecord(result)) throw new Error('the conversion handler returned no object');
          converted.push({ ...result, apiVersion: request.desiredAPIVersion });
        } catch (err) {
          return failed(request.uid, `converting ${describe(object)} to ${request.desiredAPIVersion}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      return { apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', response: { uid: request.uid, convertedObjects: converted, result: { status: 'Success' } } } satisfies ConversionReviewAnswer;
    },
  };
}

/** The request of an apiextensions.k8s.io/v1 ConversionReview; a `BadReviewError` for anything else. */
export function decodeConversionReview(body: unknown): ConversionRequest {
  if (!isRecord(body) || body.kind !== 'ConversionReview') throw new BadReviewError('the body is not a ConversionReview');
  if (body.apiVersion !== 'apiextensions.k8s.io/v1') {
    throw new BadReviewError(`ConversionReview ${String(body.apiVersion)} is not served: list only "v1" in the CRD's conversionReviewVersions`);
  }
  const request = body.request;
  if (!isRecord(request) || typeof request.uid !== 'string' || request.uid === '') throw new BadReviewError('the ConversionReview has no request with a uid');
  if (typeof request.desiredAPIVersion !== 'string' || !Array.isArray(request.objects) || !request.objects.every(isRecord)) {
    throw new BadReviewError('the ConversionReview request needs desiredAPIVersion and a list of objects');
  }
  return request as unknown as ConversionRequest;
}

function failed(uid: string, message: string): ConversionReviewAnswer {
  return { apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', response: { uid, result: { status: 'Failure', message } } };
}

function describe(object: KubeObject): string {
  const { namespace, name } = object.metadata ?? {};
  return `${object.apiVersion ?? '?'} ${object.kind ?? '?'} ${namespace ? `${namespace}/` : ''}${name ?? '(unnamed)'}`;
}
