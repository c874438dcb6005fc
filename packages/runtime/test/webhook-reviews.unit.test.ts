// Admission (admission.k8s.io/v1) and conversion (apiextensions.k8s.io/v1) reviews as the API
// server reads them: uid echoed, exact response shapes for allow, deny, warnings and patches,
// a handler's exception as a refusal with its message, conversions in order or failed whole.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { ApiError } from '../src/client/errors.ts';
import type { KubeObject } from '../src/client/resource.ts';
import { allow, deny, mutatingWebhook, validatingWebhook, type AdmissionRequest } from '../src/webhook/admission.ts';
import { conversionWebhook } from '../src/webhook/conversion.ts';
import { BadReviewError, type Webhook } from '../src/webhook/review.ts';

const context = { signal: new AbortController().signal, logger: pino({ level: 'silent' }) };

function admissionReview(object: KubeObject | undefined, operation: AdmissionRequest['operation'] = 'CREATE') {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: { group: 'example.com', version: 'v1', kind: 'Widget' },
      resource: { group: 'example.com', version: 'v1', resource: 'widgets' },
      name: 'w',
      namespace: 'team',
      operation,
      userInfo: { username: 'admin' },
      ...(object ? { object } : {}),
    },
  };
}

async function call<R>(webhook: Webhook<R>, body: unknown): Promise<any> {
  return webhook.answer(webhook.decode(body), context);
}

const widget = (spec: Record<string, unknown> = {}): KubeObject => ({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', namespace: 'team' }, spec });

describe('validating admission', () => {
  it('allowed: the uid echoed, nothing else in the response', async () => {
    const answer = await call(validatingWebhook(() => allow()), admissionReview(widget()));
    assert.deepEqual(answer, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true } });
    assert.deepEqual((await call(validatingWebhook(() => undefined), admissionReview(widget()))).response, { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true });
  });

  it('denied with a message (403 Forbidden) and warnings', async () => {
    const webhook = validatingWebhook((request, ctx) => {
      ctx.warn('spec.size is deprecated');
      return (request.object!.spec as { size?: number }).size! > 3 ? deny('spec.size must be at most 3') : allow();
    });
    assert.deepEqual((await call(webhook, admissionReview(widget({ size: 5 })))).response, {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      allowed: false,
      status: { code: 403, reason: 'Forbidden', message: 'spec.size must be at most 3' },
      warnings: ['spec.size is deprecated'],
    });
    assert.deepEqual((await call(webhook, admissionReview(widget({ size: 1 })))).response.warnings, ['spec.size is deprecated']);
  });

  it('a throwing handler denies with its message; an error carrying a code and reason keeps them', async () => {
    const thrower = validatingWebhook(() => {
      throw new Error('lookup of the quota failed');
    });
    assert.deepEqual((await call(thrower, admissionReview(widget()))).response.status, { code: 403, reason: 'Forbidden', message: 'lookup of the quota failed' });
    const apiFailure = validatingWebhook(async () => {
      throw new ApiError(409, 'Conflict', 'the object has been modified');
    });
    const status = (await call(apiFailure, admissionReview(widget()))).response.status;
    assert.equal(status.code, 409);
    assert.equal(status.reason, 'Conflict');
  });

  it('refuses reviews it cannot answer: another version, no request, no uid', () => {
    const webhook = validatingWebhook(() => allow());
    assert.throws(() => webhook.decode({ ...admissionReview(widget()), apiVersion: 'admission.k8s.io/v1beta1' }), (err: Error) => err instanceof BadReviewError && /admissionReviewVersions/.test(err.message));
    assert.throws(() => webhook.decode({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }), BadReviewError);
    assert.throws(() => webhook.decode({ ...admissionReview(widget()), request: { uid: '' } }), BadReviewError);
    assert.throws(() => webhook.decode({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid: 'x' } }), BadReviewError);
  });

  it('a refusal built by the server (deadline passed) has the review shape', () => {
    const webhook = validatingWebhook(() => allow());
    const request = webhook.decode(admissionReview(widget()));
    assert.deepEqual(webhook.refuse(request, { message: 'too slow', code: 500, reason: 'InternalError' }), {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: request.uid, allowed: false, status: { code: 500, reason: 'InternalError', message: 'too slow' } },
    });
  });
});

describe('mutating admission', () => {
  it('the returned object becomes a base64 JSON patch from the request object, patchType JSONPatch', async () => {
    const webhook = mutatingWebhook<KubeObject & { spec: { size?: number } }>((object, _request, ctx) => {
      object.spec.size ??= 1;
      object.metadata.annotations = { 'example.com/defaulted': 'true' };
      ctx.warn('size defaulted');
      return object;
    });
    const review = admissionReview(widget({ mode: 'a' }));
    const answer = await call(webhook, review);
    assert.equal(answer.apiVersion, 'admission.k8s.io/v1');
    assert.equal(answer.kind, 'AdmissionReview');
    assert.equal(answer.response.uid, review.request.uid);
    assert.equal(answer.response.allowed, true);
    assert.equal(answer.response.patchType, 'JSONPatch');
    assert.deepEqual(answer.response.warnings, ['size defaulted']);
    assert.deepEqual(JSON.parse(Buffer.from(answer.response.patch, 'base64').toString('utf8')), [
      { op: 'add', path: '/metadata/annotations', value: { 'example.com/defaulted': 'true' } },
      { op: 'add', path: '/spec/size', value: 1 },
    ]);
    assert.deepEqual(review.request.object!.spec, { mode: 'a' }, 'the handler changed a copy');
  });

  it('nothing changed: allowed without a patch', async () => {
    const answer = await call(mutatingWebhook((object) => object), admissionReview(widget({ size: 2 })));
    assert.deepEqual(answer.response, { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true });
  });

  it('deny(), a throw or no object returned deny; a request without an object is allowed without calling the handler', async () => {
    assert.deepEqual((await call(mutatingWebhook(() => deny('no widgets on Fridays')), admissionReview(widget()))).response.status, { code: 403, reason: 'Forbidden', message: 'no widgets on Fridays' });
    const threw = await call(mutatingWebhook(() => {
      throw new TypeError("Cannot read properties of undefined (reading 'size')");
    }), admissionReview(widget()));
    assert.equal(threw.response.allowed, false);
    assert.equal(threw.response.status.message, "Cannot read properties of undefined (reading 'size')");
    assert.equal(threw.response.patch, undefined);
    const nothing = await call(mutatingWebhook((() => undefined) as never), admissionReview(widget()));
    assert.match(nothing.response.status.message, /returned no object/);
    let called = false;
    const onDelete = await call(mutatingWebhook((object) => ((called = true), object)), admissionReview(undefined, 'DELETE'));
    assert.deepEqual(onDelete.response, { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true });
    assert.equal(called, false);
  });
});

describe('conversion', () => {
  const rename = conversionWebhook((object, desired) => {
    const spec = object.spec as Record<string, unknown>;
    if (spec.fail) throw new Error('cannot convert a failing widget');
    if (desired === 'example.com/v2') return { ...object, spec: { color: spec.colour } };
    return { ...object, spec: { colour: spec.color } };
  });
  const review = (desiredAPIVersion: string, objects: KubeObject[]) => ({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid: 'c0ffee', desiredAPIVersion, objects } });
  const v1 = (name: string, spec: Record<string, unknown>): KubeObject => ({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name, namespace: 'team', uid: `uid-${name}` }, spec });

  it('every object converted to desiredAPIVersion in the request order, uid echoed, Success', async () => {
    const answer = await call(rename, review('example.com/v2', [v1('a', { colour: 'red' }), v1('b', { colour: 'blue' })]));
    assert.deepEqual(answer, {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'ConversionReview',
      response: {
        uid: 'c0ffee',
        convertedObjects: [
          { apiVersion: 'example.com/v2', kind: 'Widget', metadata: { name: 'a', namespace: 'team', uid: 'uid-a' }, spec: { color: 'red' } },
          { apiVersion: 'example.com/v2', kind: 'Widget', metadata: { name: 'b', namespace: 'team', uid: 'uid-b' }, spec: { color: 'blue' } },
        ],
        result: { status: 'Success' },
      },
    });
  });

  it('an object already in the desired version passes through unchanged', async () => {
    const v2 = { apiVersion: 'example.com/v2', kind: 'Widget', metadata: { name: 'c' }, spec: { color: 'green' } };
    const answer = await call(rename, review('example.com/v2', [v2, v1('a', { colour: 'red' })]));
    assert.deepEqual(answer.response.convertedObjects.map((o: KubeObject) => o.spec), [{ color: 'green' }, { color: 'red' }]);
  });

  it('one object failing fails the whole request with a reason naming it; no objects returned', async () => {
    const answer = await call(rename, review('example.com/v2', [v1('a', { colour: 'red' }), v1('bad', { fail: true })]));
    assert.deepEqual(answer, {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'ConversionReview',
      response: { uid: 'c0ffee', result: { status: 'Failure', message: 'converting example.com/v1 Widget team/bad to example.com/v2: cannot convert a failing widget' } },
    });
  });

  it('refuses reviews it cannot answer', () => {
    assert.throws(() => rename.decode({ ...review('example.com/v2', []), apiVersion: 'apiextensions.k8s.io/v1beta1' }), /conversionReviewVersions/);
    assert.throws(() => rename.decode({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid: 'x', desiredAPIVersion: 'example.com/v2' } }), BadReviewError);
    assert.throws(() => rename.decode(admissionReview(widget())), BadReviewError);
  });
});
