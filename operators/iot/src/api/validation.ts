/**
 * The operator's own check of an IoTService spec, the one the API server makes through the CRD.
 *
 * Guarantees: `validateIoTServiceSpec` checks every field of the TypeBox schema (iotservice.ts,
 * scheduling.ts) and rejects unknown fields everywhere, applies the schema's defaults (the input
 * is not modified), then checks the cross-field rules, mirrored here as predicates with the
 * messages of their CEL rules (iotservice.ts), and the cross-field rules the CRD has no room for
 * (`spec.restore.fromBucket` needs `spec.backup.target.s3`), which the operator alone checks: an
 * IoTService breaking them is Failed (InvalidSpec) before anything of it is made. Errors are
 * readable: one per path, in the schema's own words where it has them.
 */

import { isIP } from 'node:net';
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler, ValueErrorType, type ValueError } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import {
  COMPONENTS,
  backupTargetOne,
  CONFIG_KEY_PATTERN,
  EPHEMERAL_STORAGE,
  IoTServiceSpecSchema,
  REPLICA_RANGES,
  RESERVED_CONFIG_KEYS,
  RETENTION_PATTERN,
  configKeysNotReserved,
  configKeysWellFormed,
  applicationSourcesAreCidrs,
  deviceSourcesAreCidrs,
  egressCidr,
  retentionWellFormed,
  eventRetentionWellFormed,
  RESTORE_FROM_BUCKET_NEEDS_S3,
  storageClassNeedsVolume,
  TLS_HOSTNAME_PATTERN,
  tlsHostnamesWellFormed,
  type DefaultedIoTServiceSpec,
} from './iotservice.ts';

/**
 * Options that exist only for this module's error messages. crd.ts strips them (it keeps only
 * JSON-Schema-props keywords), so they never reach the API server.
 */
interface Readable {
  errorMessage?: string;
}

/**
 * A config key as a reader might match it: case, '.', '_' and '-' ignored, so `Instance`,
 * `VERSION` and `end_points` all name a reserved key. (The key grammar admits nothing else.)
 */
export function configKeySpelling(key: string): string {
  return key.normalize('NFKC').toLowerCase().replace(/[^a-z0-9]/g, '');
}

/** True for an IPv4 or IPv6 CIDR (address/prefix length), as CEL's isCIDR. */
export function isCidr(text: string): boolean {
  const [address = '', prefix, ...rest] = text.split('/');
  const version = isIP(address);
  if (version === 0 || prefix === undefined || rest.length > 0 || !/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (version === 4 ? 32 : 128);
}

/** Cross-field rules as predicates over a schema-valid, defaulted spec; same messages as the CEL. */
const crossFieldChecks: ReadonlyArray<{ path: string; message: string; holds: (spec: DefaultedIoTServiceSpec) => boolean }> = [
  ...COMPONENTS.flatMap((component) => {
    const only = REPLICA_RANGES[component].only;
    return only ? [{ path: `spec.${component}.replicas`, message: only.message, holds: (spec: DefaultedIoTServiceSpec) => only.counts.includes(spec[component].replicas) }] : [];
  }),
  ...(['broker', 'database'] as const).map((component) => ({
    path: `spec.${component}.storageClassName`,
    message: storageClassNeedsVolume.message,
    holds: (spec: DefaultedIoTServiceSpec) => !spec[component].storageClassName || spec[component].storage !== EPHEMERAL_STORAGE,
  })),
  {
    path: 'spec.retention',
    message: retentionWellFormed.message,
    holds: (spec) => new RegExp(RETENTION_PATTERN).test(spec.retention),
  },
  {
    path: 'spec.eventRetention',
    message: eventRetentionWellFormed.message,
    holds: (spec) => new RegExp(RETENTION_PATTERN).test(spec.eventRetention),
  },
  {
    path: 'spec.gateway.deviceSources',
    message: deviceSourcesAreCidrs.message,
    holds: (spec) => (spec.gateway.deviceSources ?? []).every(isCidr),
  },
  {
    path: 'spec.core.applicationSources',
    message: applicationSourcesAreCidrs.message,
    holds: (spec) => (spec.core.applicationSources ?? []).every(isCidr),
  },
  {
    path: 'spec.gateway.tls.hostnames',
    message: tlsHostnamesWellFormed.message,
    holds: (spec) => (spec.gateway.tls?.hostnames ?? []).every((h) => isIP(h) !== 0 || new RegExp(TLS_HOSTNAME_PATTERN).test(h)),
  },
  {
    path: 'spec.egress',
    message: egressCidr.message,
    holds: (spec) => (spec.egress ?? []).every((rule) => isCidr(rule.cidr)),
  },
  {
    path: 'spec.config',
    message: configKeysWellFormed.message,
    holds: (spec) => Object.keys(spec.config ?? {}).every((k) => new RegExp(CONFIG_KEY_PATTERN).test(k)),
  },
  {
    path: 'spec.backup.target',
    message: backupTargetOne.message,
    holds: (spec) => !spec.backup || (spec.backup.target.volumeClaim === undefined) !== (spec.backup.target.s3 === undefined),
  },
  {
    path: 'spec.restore.fromBucket',
    message: RESTORE_FROM_BUCKET_NEEDS_S3,
    holds: (spec) => spec.restore?.fromBucket !== true || spec.backup?.target.s3 !== undefined,
  },
  {
    path: 'spec.config',
    message: configKeysNotReserved.message,
    holds: (spec) => !Object.keys(spec.config ?? {}).some((k) => RESERVED_CONFIG_KEYS.includes(configKeySpelling(k))),
  },
];

export type SpecValidationResult =
  | { ok: true; spec: DefaultedIoTServiceSpec }
  | { ok: false; errors: string[] };

const compiledSpec = TypeCompiler.Compile(IoTServiceSpecSchema);

/**
 * Validates a spec the way the CRD does and returns it with defaults applied (the input is not
 * modified). Errors are readable: `spec.gateway.replicas: must be an integer from 0 to 50`.
 */
export function validateIoTServiceSpec(spec: unknown): SpecValidationResult {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    return { ok: false, errors: ['spec: must be an object with at least spec.version'] };
  }
  const defaulted = Value.Default(IoTServiceSpecSchema, Value.Clone(spec));
  if (!compiledSpec.Check(defaulted)) {
    return { ok: false, errors: readableErrors(compiledSpec.Errors(defaulted)) };
  }
  const typed = defaulted as DefaultedIoTServiceSpec;
  const errors = crossFieldChecks.filter((c) => !c.holds(typed)).map((c) => `${c.path}: ${c.message}`);
  return errors.length === 0 ? { ok: true, spec: typed } : { ok: false, errors };
}

/** One message per path, the most specific schema's own wording where it has one. */
function readableErrors(errors: Iterable<ValueError>): string[] {
  const byPath = new Map<string, string>();
  for (const error of errors) {
    const path = specPath(error.path);
    if (error.type === ValueErrorType.ObjectRequiredProperty) {
      if (!byPath.has(path)) byPath.set(path, 'required field is missing');
      continue;
    }
    const owner = ownerWithMessage(error);
    const message = owner ? owner.message : error.message.replace(/^Expected/, 'expected');
    const key = owner ? specPath(owner.path) : path;
    if (!byPath.has(key)) byPath.set(key, message === 'Unexpected property' ? 'unknown field' : message);
  }
  return [...byPath].map(([path, message]) => `${path}: ${message}`);
}

/**
 * The error's schema carries `errorMessage`, or (for a bad item of an array whose schema carries
 * one, e.g. an unknown protocol) the enclosing array does.
 */
function ownerWithMessage(error: ValueError): { path: string; message: string } | undefined {
  const own = (error.schema as TSchema & Readable).errorMessage;
  if (own) return { path: error.path, message: own };
  const parentPath = error.path.replace(/\/[^/]*$/, '');
  if (/\/\d+$/.test(error.path)) {
    // an item schema without its own message, e.g. a non-string in a list of strings
    const parent = schemaAt(IoTServiceSpecSchema, parentPath);
    const message = (parent as (TSchema & Readable) | undefined)?.errorMessage;
    if (message) return { path: parentPath, message };
  }
  return undefined;
}

function schemaAt(schema: TSchema, pointer: string): TSchema | undefined {
  let current: TSchema | undefined = schema;
  for (const segment of pointer.split('/').slice(1)) {
    const key = decodePointerSegment(segment);
    const properties = current?.['properties'] as Record<string, TSchema> | undefined;
    current = properties?.[key];
  }
  return current;
}

function decodePointerSegment(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** `/gateway/protocols/2` -> `spec.gateway.protocols[2]`; map keys with dots or slashes are quoted. */
function specPath(pointer: string): string {
  let path = 'spec';
  for (const segment of pointer.split('/').slice(1)) {
    const key = decodePointerSegment(segment);
    if (/^\d+$/.test(key)) path += `[${key}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) path += `.${key}`;
    else path += `[${JSON.stringify(key)}]`;
  }
  return path;
}

