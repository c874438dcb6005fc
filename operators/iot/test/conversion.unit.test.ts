/**
 * Round-trip properties of the IoTService conversion (src/api/conversion.ts) on generated objects:
 * a seeded generator builds IoTServices with random subsets of components, random scheduling fields
 * (empty maps and lists included), other component and spec fields (the gateway's TLS with its
 * cert-manager issuerRef among them), status, labels and annotations,
 * each in both its v1alpha1 and v1beta1 form. Guarantees checked on every case:
 * - v1alpha1 -> v1beta1 -> v1alpha1 and v1beta1 -> v1alpha1 -> v1beta1 give the object back, and
 *   each conversion gives exactly the other form (scheduling fields under `placement` in v1beta1,
 *   beside the other fields in v1alpha1);
 * - metadata, kind, status and every other spec field are untouched; the input is not modified;
 * - a converted spec is valid for its version (the TypeBox schemas the CRD is generated from);
 * - a version other than the two is refused, naming the version;
 * - a ConversionReview through the operator's webhook returns every object converted, in order.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '@iot-operator/runtime';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import type { TSchema } from '@sinclair/typebox';
import { pino } from 'pino';
import { convertIoTService } from '../src/api/conversion.ts';
import { allowedReplicas, COMPONENTS, GATEWAY_PROTOCOLS, IOTSERVICE_API_VERSION, ISSUER_KINDS, IoTServiceSpecSchema, SERVICE_TYPES } from '../src/api/iotservice.ts';
import { IOTSERVICE_V1ALPHA1_API_VERSION, IoTServiceV1alpha1SpecSchema } from '../src/api/v1alpha1.ts';
import { iotServiceConversionWebhook } from '../src/webhooks/conversion-webhook.ts';

const ALPHA = IOTSERVICE_V1ALPHA1_API_VERSION;
const BETA = IOTSERVICE_API_VERSION;
const CASES = 400;

type Fields = Record<string, unknown>;
type IoT = KubeObject & { spec: Fields; status?: Fields };

/** mulberry32: a small seeded PRNG, so that a failing case can be replayed from its seed. */
function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1));
  const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)]!;
  const chance = (p = 0.5) => next() < p;
  const word = (length = int(1, 8)) => Array.from({ length }, () => pick('abcdefghijklmnopqrstuvwxyz0123456789'.split(''))).join('');
  const subset = <T>(items: readonly T[]) => items.filter(() => chance());
  const map = (size = int(0, 3)) => Object.fromEntries(Array.from({ length: size }, () => [`${word()}.example.com/${word()}`, word()]));
  return { int, pick, chance, word, subset, map };
}
type Random = ReturnType<typeof random>;

function nodeSelectorTerm(r: Random): Fields {
  const requirement = () => ({ key: `${r.word()}.io/${r.word()}`, operator: r.pick(['In', 'NotIn', 'Exists', 'DoesNotExist']), ...(r.chance() ? { values: Array.from({ length: r.int(0, 3) }, () => r.word()) } : {}) });
  return { ...(r.chance() ? { matchExpressions: Array.from({ length: r.int(0, 2) }, requirement) } : {}), ...(r.chance(0.2) ? { matchFields: [{ key: 'metadata.name', operator: 'In', values: [r.word()] }] } : {}) };
}

function podAffinityTerm(r: Random): Fields {
  return {
    topologyKey: r.pick(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']),
    ...(r.chance() ? { labelSelector: { matchLabels: r.map() } } : {}),
    ...(r.chance(0.3) ? { namespaces: [] } : {}),
  };
}

/** core/v1 Affinity, anything from `{}` to all three parts. */
function affinity(r: Random): Fields {
  const out: Fields = {};
  if (r.chance()) {
    out.nodeAffinity = {
      ...(r.chance() ? { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: Array.from({ length: r.int(1, 2) }, () => nodeSelectorTerm(r)) } } : {}),
      ...(r.chance() ? { preferredDuringSchedulingIgnoredDuringExecution: Array.from({ length: r.int(0, 2) }, () => ({ weight: r.int(1, 100), preference: nodeSelectorTerm(r) })) } : {}),
    };
  }
  for (const kind of ['podAffinity', 'podAntiAffinity']) {
    if (r.chance(0.3)) out[kind] = r.chance() ? { requiredDuringSchedulingIgnoredDuringExecution: [podAffinityTerm(r)] } : { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: r.int(1, 100), podAffinityTerm: podAffinityTerm(r) }] };
  }
  return out;
}

function toleration(r: Random): Fields {
  const exists = r.chance();
  return {
    ...(r.chance(0.8) ? { key: `${r.word()}.io/${r.word()}` } : {}),
    operator: exists ? 'Exists' : 'Equal',
    ...(exists ? {} : { value: r.word() }),
    ...(r.chance() ? { effect: r.pick(['NoSchedule', 'PreferNoSchedule', 'NoExecute']) } : {}),
    ...(r.chance(0.2) ? { tolerationSeconds: r.int(0, 3600) } : {}),
  };
}

/** A component's scheduling fields: any subset of the three, each possibly empty. */
function placementParts(r: Random): Fields {
  const parts: Fields = {};
  if (r.chance()) parts.nodeSelector = r.map();
  if (r.chance()) parts.tolerations = Array.from({ length: r.int(0, 3) }, () => toleration(r));
  if (r.chance()) parts.affinity = affinity(r);
  return parts;
}

function otherComponentFields(r: Random, component: (typeof COMPONENTS)[number]): Fields {
  const out: Fields = {};
  if (r.chance()) out.replicas = r.pick(allowedReplicas(component));
  if (r.chance(0.3)) out.image = `registry.example.com/${r.word()}:${r.word()}`;
  if (r.chance(0.4)) out.resources = { ...(r.chance() ? { limits: { cpu: `${r.int(1, 900)}m`, memory: `${r.int(1, 64)}Mi` } } : {}), ...(r.chance() ? { requests: { cpu: r.int(0, 4) } } : {}) };
  if (component === 'gateway') {
    if (r.chance()) {
      const protocols = r.subset(GATEWAY_PROTOCOLS);
      out.protocols = protocols.length > 0 ? protocols : ['mqtt'];
    }
    if (r.chance()) out.deviceSources = Array.from({ length: r.int(0, 2) }, () => `203.0.113.${r.int(0, 255)}/32`);
    if (r.chance()) out.serviceType = r.pick(SERVICE_TYPES);
    if (r.chance()) out.connections = r.int(1, 100_000);
    if (r.chance(0.4)) out.tls = { ...(r.chance() ? { hostnames: [`${r.word()}.example.com`] } : {}), ...(r.chance() ? { issuerRef: { kind: r.pick(ISSUER_KINDS), name: r.word() } } : {}) };
  }
  if (component === 'core' && r.chance()) out.applicationSources = Array.from({ length: r.int(0, 2) }, () => `198.51.100.${r.int(0, 255)}/32`);
  if ((component === 'broker' || component === 'database') && r.chance()) {
    out.storage = `${r.int(1, 20)}Gi`;
    if (r.chance()) out.storageClassName = r.word();
  }
  if (component === 'broker' && r.chance()) out.maxBacklog = `${r.int(1, 4096)}${r.pick(['Mi', 'Gi', 'M', ''])}`;
  return out;
}

/** One generated IoTService, in both versions' forms. */
function generate(seed: number): { alpha: IoT; beta: IoT } {
  const r = random(seed);
  const alphaSpec: Fields = { version: `${r.int(0, 9)}.${r.int(0, 9)}.${r.int(0, 99)}` };
  if (r.chance(0.3)) alphaSpec.registry = `registry.example.com/${r.word()}`;
  if (r.chance(0.3)) alphaSpec.paused = r.chance();
  if (r.chance(0.2)) alphaSpec.egress = [{ cidr: `198.51.100.${r.int(0, 255)}/32`, ...(r.chance() ? { ports: [r.int(1, 65535)] } : {}) }];
  if (r.chance(0.2)) alphaSpec.quota = { cpu: r.int(1, 8), memory: `${r.int(1, 16)}Gi` };
  if (r.chance(0.3)) alphaSpec.config = r.chance() ? {} : { [r.word()]: r.word() };
  if (r.chance(0.3)) alphaSpec.retention = `${r.int(1, 999999)}${r.pick(['s', 'm', 'h', 'd'])}`;
  const betaSpec: Fields = { ...alphaSpec };
  for (const component of r.subset(COMPONENTS)) {
    const other = otherComponentFields(r, component);
    const parts = placementParts(r);
    alphaSpec[component] = { ...other, ...parts };
    betaSpec[component] = Object.keys(parts).length > 0 ? { ...other, placement: parts } : { ...other };
  }
  const metadata = {
    name: `iot-${r.word()}`,
    namespace: `ls-${r.word(6)}`,
    uid: `00000000-0000-4000-8000-${String(seed).padStart(12, '0')}`,
    resourceVersion: String(r.int(1, 1e6)),
    generation: r.int(1, 20),
    creationTimestamp: '2026-11-27T20:00:00Z',
    ...(r.chance() ? { labels: r.map() } : {}),
    ...(r.chance() ? { annotations: r.map() } : {}),
    ...(r.chance(0.3) ? { finalizers: ['cp.iotservices.io/cleanup'] } : {}),
  };
  const status: Fields | undefined = r.chance(0.7)
    ? {
        phase: r.pick(['Available', 'Processing', 'Failed']),
        observedGeneration: metadata.generation,
        ready: `${r.int(0, 7)}/7`,
        components: { gateway: { desired: 2, updated: 2, ready: r.int(0, 2) } },
        conditions: [{ type: 'Ready', status: r.pick(['True', 'False', 'Unknown']), lastTransitionTime: '2026-11-27T20:01:00Z', reason: r.word(), message: r.word(12) }],
      }
    : undefined;
  const object = (apiVersion: string, spec: Fields): IoT => ({ apiVersion, kind: 'IoTService', metadata: structuredClone(metadata), spec, ...(status ? { status: structuredClone(status) } : {}) });
  return { alpha: object(ALPHA, alphaSpec), beta: object(BETA, betaSpec) };
}

const schemas: Record<string, TSchema> = { [ALPHA]: IoTServiceV1alpha1SpecSchema, [BETA]: IoTServiceSpecSchema };
const validators: Record<string, ReturnType<typeof TypeCompiler.Compile>> = { [ALPHA]: TypeCompiler.Compile(IoTServiceV1alpha1SpecSchema), [BETA]: TypeCompiler.Compile(IoTServiceSpecSchema) };

/** The spec's schema errors for its object's version (after the API server's defaulting); [] when valid. */
function schemaErrors(object: IoT): string[] {
  const defaulted = Value.Default(schemas[object.apiVersion!]!, structuredClone(object.spec));
  return [...validators[object.apiVersion!]!.Errors(defaulted)].map((e) => `${e.path}: ${e.message}`);
}

/** The object with each component's scheduling fields dropped: what no conversion may touch. */
function withoutScheduling(object: IoT): IoT {
  const spec: Fields = { ...object.spec };
  for (const component of COMPONENTS) {
    if (!spec[component]) continue;
    const { placement: _p, nodeSelector: _n, tolerations: _t, affinity: _a, ...rest } = spec[component] as Fields;
    spec[component] = rest;
  }
  const { apiVersion: _version, ...others } = object;
  return { ...others, spec } as IoT;
}

const convert = (object: IoT, version: string) => convertIoTService(object, version) as IoT;
const seeds = Array.from({ length: CASES }, (_, i) => 0x10750 + i);

describe('convertIoTService on generated IoTServices', () => {
  it('generates objects of every shape: each component present or not, each scheduling field absent, empty or set', () => {
    const seen = new Set<string>();
    for (const seed of seeds) {
      const { alpha, beta } = generate(seed);
      for (const component of COMPONENTS) {
        const flat = alpha.spec[component] as Fields | undefined;
        seen.add(`${component}:${flat ? 'present' : 'absent'}`);
        if ((beta.spec[component] as Fields | undefined)?.placement) seen.add(`${component}:placement`);
        for (const field of ['nodeSelector', 'tolerations', 'affinity']) {
          const value = flat?.[field];
          if (value !== undefined) seen.add(`${field}:${Object.keys(value as object).length === 0 ? 'empty' : 'set'}`);
        }
      }
      if ((beta.spec['broker'] as Fields | undefined)?.maxBacklog !== undefined) seen.add('maxBacklog');
      if ((beta.spec['gateway'] as Fields | undefined)?.connections !== undefined) seen.add('connections');
      if (beta.spec['retention'] !== undefined) seen.add('retention');
      if (((beta.spec['gateway'] as Fields | undefined)?.tls as Fields | undefined)?.issuerRef !== undefined) seen.add('issuerRef');
      if (!beta.status) seen.add('no status');
      if (beta.metadata.labels) seen.add('labels');
      if (beta.metadata.annotations) seen.add('annotations');
    }
    for (const component of COMPONENTS) for (const form of ['present', 'absent', 'placement']) assert.ok(seen.has(`${component}:${form}`), `${component} ${form}`);
    for (const field of ['nodeSelector', 'tolerations', 'affinity']) for (const form of ['empty', 'set']) assert.ok(seen.has(`${field}:${form}`), `${field} ${form}`);
    for (const kind of ['no status', 'labels', 'annotations', 'maxBacklog', 'retention', 'connections', 'issuerRef']) assert.ok(seen.has(kind), kind);
  });

  it(`v1alpha1 -> v1beta1 -> v1alpha1 is the identity, and v1beta1 is exactly the grouped form (${CASES} objects)`, () => {
    for (const seed of seeds) {
      const { alpha, beta } = generate(seed);
      const before = structuredClone(alpha);
      const converted = convert(alpha, BETA);
      assert.deepEqual(converted, beta, `seed ${seed}: v1alpha1 -> v1beta1`);
      assert.deepEqual(convert(converted, ALPHA), before, `seed ${seed}: back to v1alpha1`);
      assert.deepEqual(alpha, before, `seed ${seed}: the input is not modified`);
    }
  });

  it(`v1beta1 -> v1alpha1 -> v1beta1 is the identity, and v1alpha1 is exactly the flat form (${CASES} objects)`, () => {
    for (const seed of seeds) {
      const { alpha, beta } = generate(seed);
      const before = structuredClone(beta);
      const converted = convert(beta, ALPHA);
      assert.deepEqual(converted, alpha, `seed ${seed}: v1beta1 -> v1alpha1`);
      assert.deepEqual(convert(converted, BETA), before, `seed ${seed}: back to v1beta1`);
      assert.deepEqual(beta, before, `seed ${seed}: the input is not modified`);
    }
  });

  it('leaves kind, metadata, status and every field but the scheduling ones as they are', () => {
    for (const seed of seeds) {
      const { alpha, beta } = generate(seed);
      for (const [from, to] of [[alpha, BETA], [beta, ALPHA]] as const) {
        const converted = convert(from, to);
        assert.equal(converted.apiVersion, to);
        assert.deepEqual(withoutScheduling(converted), withoutScheduling(from), `seed ${seed}: ${from.apiVersion} -> ${to}`);
        assert.deepEqual(converted.metadata, from.metadata);
        assert.deepEqual(converted.status, from.status);
      }
    }
  });

  it('gives specs valid for the target version: placement in v1beta1 only, the flat fields in v1alpha1 only', () => {
    for (const seed of seeds) {
      const { alpha, beta } = generate(seed);
      assert.deepEqual(schemaErrors(alpha), [], `seed ${seed}: the generated v1alpha1 object`);
      assert.deepEqual(schemaErrors(beta), [], `seed ${seed}: the generated v1beta1 object`);
      assert.deepEqual(schemaErrors(convert(alpha, BETA)), [], `seed ${seed}: converted to v1beta1`);
      assert.deepEqual(schemaErrors(convert(beta, ALPHA)), [], `seed ${seed}: converted to v1alpha1`);
    }
    // the schemas do tell the forms apart, so the checks above can fail
    const { alpha, beta } = generate(seeds.find((seed) => Object.values(generate(seed).beta.spec).some((c) => (c as Fields).placement))!);
    assert.notDeepEqual(schemaErrors({ ...alpha, apiVersion: BETA }), []);
    assert.notDeepEqual(schemaErrors({ ...beta, apiVersion: ALPHA }), []);
  });

  it('keeps the broker\'s maxBacklog and replicas through v1alpha1 and back, placement or not', () => {
    const beta: IoT = {
      apiVersion: BETA,
      kind: 'IoTService',
      metadata: { name: 'tenant-a', namespace: 'devawsk8s' },
      spec: { version: '2.4.1', broker: { replicas: 3, storage: '10Gi', maxBacklog: '2Gi', placement: { nodeSelector: { disk: 'ssd' } } } },
    };
    const alpha = convert(beta, ALPHA);
    assert.deepEqual(alpha.spec['broker'], { replicas: 3, storage: '10Gi', maxBacklog: '2Gi', nodeSelector: { disk: 'ssd' } });
    assert.deepEqual(schemaErrors(alpha), []);
    assert.deepEqual(convert(alpha, BETA), beta);
  });

  it('keeps retention through v1alpha1 and back', () => {
    const beta: IoT = {
      apiVersion: BETA,
      kind: 'IoTService',
      metadata: { name: 'tenant-a', namespace: 'devawsk8s' },
      spec: { version: '2.4.1', retention: '12h', broker: { placement: { nodeSelector: { disk: 'ssd' } } } },
    };
    const alpha = convert(beta, ALPHA);
    assert.deepEqual(alpha.spec, { version: '2.4.1', retention: '12h', broker: { nodeSelector: { disk: 'ssd' } } });
    assert.deepEqual(schemaErrors(alpha), []);
    assert.deepEqual(convert(alpha, BETA), beta);
  });

  it('keeps the gateway\'s connections through v1alpha1 and back, a field of both versions', () => {
    const beta: IoT = {
      apiVersion: BETA,
      kind: 'IoTService',
      metadata: { name: 'tenant-a', namespace: 'devawsk8s' },
      spec: { version: '2.4.1', gateway: { connections: 5000, protocols: ['mqtts'], placement: { tolerations: [{ key: 'edge', operator: 'Exists' }] } } },
    };
    const alpha = convert(beta, ALPHA);
    assert.deepEqual(alpha.spec['gateway'], { connections: 5000, protocols: ['mqtts'], tolerations: [{ key: 'edge', operator: 'Exists' }] });
    assert.deepEqual(schemaErrors(alpha), [], 'v1alpha1 has the field: nothing to carry elsewhere');
    assert.deepEqual(convert(alpha, BETA), beta);
    assert.notDeepEqual(schemaErrors({ ...alpha, spec: { ...alpha.spec, gateway: { connections: 0 } } }), [], 'v1alpha1 checks it as v1beta1 does');
  });

  it('converts an object to its own version as it is', () => {
    const { alpha, beta } = generate(7);
    assert.deepEqual(convert(alpha, ALPHA), alpha);
    assert.deepEqual(convert(beta, BETA), beta);
  });

  it('refuses a version other than v1alpha1 and v1beta1, naming it', () => {
    const { alpha } = generate(1);
    assert.throws(() => convert(alpha, 'cp.iotservices.io/v2'), { message: 'cannot convert an IoTService to cp.iotservices.io/v2: only cp.iotservices.io/v1alpha1 and cp.iotservices.io/v1beta1 exist' });
    assert.throws(() => convert({ ...alpha, apiVersion: 'cp.iotservices.io/v1' }, BETA), { message: 'cannot convert an IoTService of cp.iotservices.io/v1: only cp.iotservices.io/v1alpha1 and cp.iotservices.io/v1beta1 exist' });
    assert.throws(() => convert({ ...alpha, apiVersion: 'other.example.com/v1beta1' }, ALPHA), /cannot convert an IoTService of other\.example\.com\/v1beta1/);
  });
});

describe('a ConversionReview through the operator’s conversion webhook', () => {
  const webhook = iotServiceConversionWebhook();
  const context = { signal: new AbortController().signal, logger: pino({ level: 'silent' }) };
  const review = (uid: string, desiredAPIVersion: string, objects: KubeObject[]) => ({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid, desiredAPIVersion, objects } });
  type Answer = { response: { uid: string; convertedObjects?: KubeObject[]; result: { status: string; message?: string } } };

  it('returns every object converted, in the request’s order (mixed versions, batches of 0 to 12)', async () => {
    const r = random(46);
    let objects = 0;
    for (let batch = 0; batch < 60; batch++) {
      const generated = Array.from({ length: r.int(0, 12) }, () => generate(r.int(0, 1e9)));
      const request = generated.map((g) => (r.chance() ? g.alpha : g.beta));
      const desired = r.pick([ALPHA, BETA]);
      const answer = (await webhook.answer(webhook.decode(review(`uid-${batch}`, desired, request)), context)) as Answer;
      assert.equal(answer.response.uid, `uid-${batch}`);
      assert.deepEqual(answer.response.result, { status: 'Success' });
      assert.deepEqual(answer.response.convertedObjects, generated.map((g) => (desired === ALPHA ? g.alpha : g.beta)), `batch ${batch}`);
      objects += request.length;
    }
    assert.ok(objects > 200, `${objects} objects converted`);
  });

  it('fails the whole review for an object of an unknown version, naming the object, and returns no objects', async () => {
    const { alpha, beta } = generate(3);
    const stray = { ...alpha, apiVersion: 'cp.iotservices.io/v0', metadata: { ...alpha.metadata, name: 'stray' } };
    const answer = (await webhook.answer(webhook.decode(review('uid-bad', BETA, [alpha, stray, beta])), context)) as Answer;
    assert.equal(answer.response.result.status, 'Failure');
    assert.equal(answer.response.convertedObjects, undefined);
    assert.match(answer.response.result.message!, new RegExp(`converting cp\\.iotservices\\.io/v0 IoTService ${alpha.metadata.namespace}/stray to cp\\.iotservices\\.io/v1beta1: cannot convert an IoTService of cp\\.iotservices\\.io/v0`));
    const toUnknown = (await webhook.answer(webhook.decode(review('uid-v2', 'cp.iotservices.io/v2', [beta])), context)) as Answer;
    assert.match(toUnknown.response.result.message!, /cannot convert an IoTService to cp\.iotservices\.io\/v2/);
  });
});
