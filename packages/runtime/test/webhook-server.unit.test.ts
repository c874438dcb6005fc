// The webhook server over real HTTPS on loopback: 404/405/400/413 answers, a handler past its
// deadline (the configured one, or the API server's shorter `timeout`) refused with a message
// instead of hanging, exceptions never crash it, requests counted in controller-runtime's
// webhook metrics, a rotated certificate served to new connections without a restart (a
// half-written pair is not), and stop letting a request in flight finish.
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Registry } from '../src/metrics/prom-client.ts';
import { waitFor } from '../src/testing/env.ts';
import { allow, deny, mutatingWebhook, validatingWebhook } from '../src/webhook/admission.ts';
import { conversionWebhook } from '../src/webhook/conversion.ts';
import { parseGoDuration, WebhookServer } from '../src/webhook/server.ts';
import { makeCertificates, type TestCertificates } from './certificates.ts';

interface Answer {
  code: number;
  body: string;
  json: any;
  /** The Connection header of the answer. */
  connection: string | undefined;
}

function post(port: number, ca: string, urlPath: string, body: string | Buffer, headers: Record<string, string> = { 'Content-Type': 'application/json' }, method = 'POST', agent: https.Agent | false = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: urlPath, method, ca, agent, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ code: res.statusCode ?? 0, body: text, json, connection: res.headers.connection });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const review = (uid = 'u-1') =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid, kind: { group: 'example.com', version: 'v1', kind: 'Widget' }, resource: { group: 'example.com', version: 'v1', resource: 'widgets' }, operation: 'CREATE', userInfo: {}, object: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' }, spec: { size: 5 } } },
  });

let dir: string;
let certs: TestCertificates;

before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'webhook-server-'));
  certs = makeCertificates(dir, ['IP:127.0.0.1']);
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('webhook server', () => {
  it('answers reviews at their paths, refuses malformed requests with 4xx, counts everything in the webhook metrics', async () => {
    const registry = new Registry();
    const server = new WebhookServer({ address: '127.0.0.1:0', certFile: certs.certFile, keyFile: certs.keyFile, maxRequestBytes: 4096 }, { registry });
    server.register('/validate', validatingWebhook((request) => ((request.object!.spec as { size: number }).size > 3 ? deny('size above 3') : allow())));
    server.register('/crash', validatingWebhook(() => {
      throw new RangeError('handler bug');
    }));
    assert.throws(() => server.register('/validate', validatingWebhook(() => allow())), /already registered/);
    assert.equal(server.listening, false);
    await server.start();
    try {
      assert.equal(server.listening, true);
      const port = server.port!;
      const ok = await post(port, certs.ca, '/validate', review('abc'));
      assert.equal(ok.code, 200);
      assert.deepEqual(ok.json.response, { uid: 'abc', allowed: false, status: { code: 403, reason: 'Forbidden', message: 'size above 3' } });

      const crashed = await post(port, certs.ca, '/crash', review('def'));
      assert.equal(crashed.code, 200);
      assert.equal(crashed.json.response.status.message, 'handler bug');
      assert.equal((await post(port, certs.ca, '/validate', review())).code, 200, 'still serving after a handler threw');

      assert.equal((await post(port, certs.ca, '/nowhere', review())).code, 404);
      assert.equal((await post(port, certs.ca, '/validate', '', {}, 'GET')).code, 405);
      const wrongType = await post(port, certs.ca, '/validate', review(), { 'Content-Type': 'text/plain' });
      assert.equal(wrongType.code, 400);
      assert.match(wrongType.body, /expected application\/json/);
      const notJson = await post(port, certs.ca, '/validate', '{"apiVersion": ');
      assert.equal(notJson.code, 400);
      assert.match(notJson.body, /not JSON/);
      const notReview = await post(port, certs.ca, '/validate', JSON.stringify({ kind: 'Pod' }));
      assert.equal(notReview.code, 400);
      assert.match(notReview.body, /not an AdmissionReview/);
      const big = await post(port, certs.ca, '/validate', Buffer.alloc(5000, 'x'));
      assert.equal(big.code, 413);
      assert.match(big.body, /larger than 4096 bytes/);
      const chunked = await post(port, certs.ca, '/validate', Buffer.alloc(5000, ' '), { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      assert.equal(chunked.code, 413, 'a body without Content-Length is limited as it arrives');

      const text = await registry.metrics();
      assert.match(text, /^controller_runtime_webhook_requests_total\{webhook="\/validate",code="200"\} 2$/m);
      assert.match(text, /^controller_runtime_webhook_requests_total\{webhook="\/crash",code="200"\} 1$/m);
      assert.match(text, /^controller_runtime_webhook_requests_total\{webhook="\/validate",code="400"\} 3$/m);
      assert.match(text, /^controller_runtime_webhook_requests_total\{webhook="\/validate",code="405"\} 1$/m);
      assert.match(text, /^controller_runtime_webhook_requests_total\{webhook="\/validate",code="413"\} 2$/m);
      assert.match(text, /^controller_runtime_webhook_latency_seconds_count\{webhook="\/validate"\} 8$/m);
      assert.match(text, /^controller_runtime_webhook_latency_seconds_bucket\{le="10",webhook="\/validate"\} 8$/m);
      assert.match(text, /^controller_runtime_webhook_requests_in_flight\{webhook="\/validate"\} 0$/m);
      assert.doesNotMatch(text, /webhook="\/nowhere"/);
    } finally {
      await server.stop();
    }
    assert.equal(server.listening, false);
  });

  it('a handler past its deadline is refused with a message and its signal aborted; the API server`s shorter timeout wins', async () => {
    const registry = new Registry();
    const server = new WebhookServer({ address: '127.0.0.1:0', certFile: certs.certFile, keyFile: certs.keyFile, handlerTimeoutMs: 300 }, { registry });
    const aborted: boolean[] = [];
    const never = (signal: AbortSignal) => new Promise<never>(() => signal.addEventListener('abort', () => aborted.push(true)));
    server.register('/slow', validatingWebhook((_request, { signal }) => never(signal)));
    server.register('/slow-default', mutatingWebhook((_object, _request, { signal }) => never(signal)));
    server.register('/slow-convert', conversionWebhook((_object, _desired, { signal }) => never(signal)));
    await server.start();
    try {
      const port = server.port!;
      const slow = await post(port, certs.ca, '/slow', review('t1'));
      assert.equal(slow.code, 200);
      assert.deepEqual(slow.json.response, { uid: 't1', allowed: false, status: { code: 500, reason: 'InternalError', message: 'the validating webhook at /slow did not answer within 300 ms' } });
      const mutate = await post(port, certs.ca, '/slow-default?timeout=1s', review('t2'));
      assert.equal(mutate.json.response.allowed, false);
      assert.match(mutate.json.response.status.message, /did not answer within 300 ms/, 'the configured deadline is shorter than the caller’s 1 s');
      const convert = await post(port, certs.ca, '/slow-convert', JSON.stringify({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid: 't3', desiredAPIVersion: 'example.com/v2', objects: [{ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } }] } }));
      assert.deepEqual(convert.json.response, { uid: 't3', result: { status: 'Failure', message: 'the conversion webhook at /slow-convert did not answer within 300 ms' } });
      assert.deepEqual(aborted, [true, true, true]);
    } finally {
      await server.stop();
    }

    const patient = new WebhookServer({ address: '127.0.0.1:0', certFile: certs.certFile, keyFile: certs.keyFile }, { registry: new Registry() });
    patient.register('/slow', validatingWebhook((_request, { signal }) => never(signal)));
    await patient.start();
    try {
      const answer = await post(patient.port!, certs.ca, '/slow?timeout=1s', review('t4'));
      assert.match(answer.json.response.status.message, /did not answer within 500 ms/, 'the API server’s timeout=1s less the margin, not the default 9 s');
    } finally {
      await patient.stop();
    }
  });

  it('Go durations as the API server writes its timeout', () => {
    assert.equal(parseGoDuration('10s'), 10_000);
    assert.equal(parseGoDuration('1m30s'), 90_000);
    assert.equal(parseGoDuration('500ms'), 500);
    assert.equal(parseGoDuration('1.5s'), 1500);
    assert.equal(parseGoDuration('ten'), undefined);
    assert.equal(parseGoDuration(null), undefined);
  });

  it('a rotated certificate is served to new connections without a restart; a half-written pair is not', async () => {
    const served = path.join(dir, 'served');
    mkdirSync(served);
    const certFile = path.join(served, 'tls.crt');
    const keyFile = path.join(served, 'tls.key');
    copyFileSync(certs.certFile, certFile);
    copyFileSync(certs.keyFile, keyFile);
    const rotated = makeCertificates(mkdtempSync(path.join(dir, 'rotated-')), ['IP:127.0.0.1']);
    const server = new WebhookServer({ address: '127.0.0.1:0', certFile, keyFile, certReadIntervalMs: 200 }, { registry: new Registry() });
    server.register('/validate', validatingWebhook(() => allow()));
    await server.start();
    try {
      const port = server.port!;
      assert.equal((await post(port, certs.ca, '/validate', review())).code, 200);
      await assert.rejects(post(port, rotated.ca, '/validate', review()), /self-signed|unable to verify|certificate/i);

      copyFileSync(rotated.certFile, certFile); // the new certificate with the old key: unusable
      await new Promise((resolve) => setTimeout(resolve, 600));
      assert.equal((await post(port, certs.ca, '/validate', review())).code, 200, 'the old pair is still served');

      copyFileSync(rotated.keyFile, keyFile);
      await waitFor('the rotated certificate to be served', async () => {
        const answer = await post(port, rotated.ca, '/validate', review()).catch((err: Error) => err.message);
        return { done: typeof answer !== 'string' && answer.code === 200, value: true, seen: answer };
      }, { timeoutMs: 10_000 });
      await assert.rejects(post(port, certs.ca, '/validate', review()), /self-signed|unable to verify|certificate/i);
    } finally {
      await server.stop();
    }
  });

  it('start fails naming the files when the certificate cannot be read', async () => {
    const server = new WebhookServer({ address: '127.0.0.1:0', certFile: path.join(dir, 'absent.crt'), keyFile: certs.keyFile }, { registry: new Registry() });
    await assert.rejects(server.start(), /webhook certificate .*absent\.crt with key .*tls\.key: ENOENT/);
    assert.equal(server.listening, false);
  });

  it('stop drains first: a kept-alive connection\'s next request is answered and told to close, not reset', async () => {
    const server = new WebhookServer({ address: '127.0.0.1:0', certFile: certs.certFile, keyFile: certs.keyFile, drainMs: 500 }, { registry: new Registry() });
    server.register('/validate', validatingWebhook(async () => allow()));
    await server.start();
    const port = server.port!;
    const keptAlive = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    keptAlive.on('free', (socket) => sockets.add(socket));
    assert.equal((await post(port, certs.ca, '/validate', review('before'), undefined, 'POST', keptAlive)).connection, 'keep-alive');
    const stopped = server.stop();
    const during = await post(port, certs.ca, '/validate', review('during'), undefined, 'POST', keptAlive);
    assert.deepEqual(during.json.response, { uid: 'during', allowed: true }, 'answered on the connection kept alive');
    assert.equal(during.connection, 'close');
    assert.equal(sockets.size, 1, 'one connection served both');
    await stopped;
    await assert.rejects(post(port, certs.ca, '/validate', review()), /ECONNREFUSED/);
    keptAlive.destroy();
  });

  it('stop lets a request in flight finish, then refuses connections', async () => {
    let release!: () => void;
    const started = new Promise<void>((resolve) => (release = resolve));
    let finish!: () => void;
    const server = new WebhookServer({ address: '127.0.0.1:0', certFile: certs.certFile, keyFile: certs.keyFile }, { registry: new Registry() });
    server.register('/validate', validatingWebhook(async () => {
      release();
      await new Promise<void>((resolve) => (finish = resolve));
      return allow();
    }));
    await server.start();
    const port = server.port!;
    // Kept alive, as the API server's connections are.
    const keptAlive = new https.Agent({ keepAlive: true });
    const inFlight = post(port, certs.ca, '/validate', review('in-flight'), { 'Content-Type': 'application/json' }, 'POST', keptAlive);
    await started;
    const stopped = server.stop();
    finish();
    const answer = await inFlight;
    assert.deepEqual(answer.json.response, { uid: 'in-flight', allowed: true });
    assert.equal(answer.connection, 'close', 'an answer given while stopping closes its connection: its client sends nothing more on it');
    await stopped;
    await assert.rejects(post(port, certs.ca, '/validate', review()), /ECONNREFUSED/);
    keptAlive.destroy();
  });
});
