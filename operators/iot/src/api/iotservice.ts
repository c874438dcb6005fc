/**
 * The IoTService API (cp.iotservices.io v1beta1, the stored version the operator works on, and
 * v1alpha1, the seed's), defined once: its names, the v1beta1 spec and status, and the cross-field
 * rules; the core/v1 scheduling fields come from scheduling.ts, the v1alpha1 spec is derived from
 * this one in v1alpha1.ts.
 *
 * Versions: v1beta1 differs from v1alpha1 in one place only: a component's scheduling fields
 * (`nodeSelector`, `tolerations`, `affinity`) sit under `spec.<component>.placement` instead of
 * beside its replicas and image. conversion.ts converts between the two without loss.
 *
 * Guarantees: the TypeBox schemas below are the single source of the TypeScript types
 * (`IoTServiceSpec`, `IoTServiceStatus`, `IoTService`), of the operator-side validation
 * (`validateIoTServiceSpec`, validation.ts) and of the CRD's OpenAPI schema (see crd.ts). Defaults
 * live in the schema and are applied identically by the API server (CRD `default`) and by
 * `validateIoTServiceSpec`. Cross-field rules are written once as CEL for the API server and
 * mirrored in validation.ts as predicates with the same message, so a spec the API server accepts
 * is accepted there too (the operator's check is at most stricter; see `validateIoTServiceSpec`).
 *
 * Replica ranges (chosen, documented in the CRD descriptions):
 *   gateway 0..50 (default 2), core 0..20 (default 2), processing 0..8 (default 1: the replicas
 *   share the telemetry stream's durable consumer, each message going to one of them; more than
 *   8 writers only contend for the one database),
 *   broker 1 or 3 (default 1; 3 replicates every message on three brokers, any one of which may
 *   fail), database 1 or 3 (default 1; 3 is a primary and two standbys under Patroni, replicated
 *   synchronously, any one of which may fail). Both are fixed at creation.
 * core and processing may be scaled to 0 to stop an instance's API or pipeline without deleting
 * it; broker and database hold the instance's data and always run at least one replica.
 *
 * Unknown fields: the CRD schema is structural, so the API server prunes unknown fields (and
 * rejects them outright for clients that ask for strict field validation, e.g. `kubectl apply`,
 * whose default is `--validate=strict`), except inside the few objects the CRD leaves unchecked
 * to stay small (crd-schema.ts: label selectors of an affinity; v1alpha1's affinity). The
 * operator's validator checks every field of the schemas below and rejects unknown fields
 * everywhere, so what the API server does not check still never reaches a workload.
 */

import { FormatRegistry, Type, type Static, type TProperties } from '@sinclair/typebox';
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { AffinitySchema, TolerationSchema } from './scheduling.ts';

export const API_GROUP = 'cp.iotservices.io';
/** The version the operator reads and writes, and the API server stores. */
export const API_VERSION = 'v1beta1';
export const IOTSERVICE_API_VERSION = `${API_GROUP}/${API_VERSION}` as const;
export const IOTSERVICE_KIND = 'IoTService' as const;
export const IOTSERVICE_PLURAL = 'iotservices';
export const IOTSERVICE_SINGULAR = 'iotservice';
export const IOTSERVICE_SHORT_NAMES: readonly string[] = ['iots'];

/** Image tag grammar (OCI distribution spec): what `spec.version` is used as. */
export const IMAGE_TAG_PATTERN = '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$';

/** Registry host with optional port and path, e.g. `registry.example.com:5000/iot`; empty = operator default. */
export const REGISTRY_PATTERN =
  '^([a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*)?$';

/** Non-negative resource.Quantity in string form (the API server's grammar without a sign). */
export const QUANTITY_PATTERN =
  '^(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';

/** `storage` asking for no persistent volume: the data lives in an emptyDir and is lost with the pod. */
export const EPHEMERAL_STORAGE = 'ephemeral';
/** The size of a replica's persistent volume when `storage` is empty. */
export const DEFAULT_STORAGE = '1Gi';
/** `storage`: empty (a volume of DEFAULT_STORAGE), a size, or EPHEMERAL_STORAGE. */
export const STORAGE_PATTERN = `^$|^${EPHEMERAL_STORAGE}$|${QUANTITY_PATTERN}`;

/** Keys of config.yml that the operator writes itself; `spec.config` may not set them in any spelling. */
export const RESERVED_CONFIG_KEYS: readonly string[] = ['instance', 'landscape', 'namespace', 'version', 'endpoints', 'stream', 'retention', 'events'];

/** A `spec.config` key: letters, digits, '.', '_' and '-', starting and ending with a letter or digit. */
export const CONFIG_KEY_PATTERN = '^[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$';

export const GATEWAY_PROTOCOLS = ['mqtt', 'mqtts', 'http', 'https', 'coap'] as const;
/** The protocols whose devices' passwords and telemetry cross the network unencrypted. */
export const PLAINTEXT_PROTOCOLS: readonly GatewayProtocol[] = ['mqtt', 'http', 'coap'];
export type GatewayProtocol = (typeof GATEWAY_PROTOCOLS)[number];
export const SERVICE_TYPES = ['ClusterIP', 'NodePort', 'LoadBalancer'] as const;
export type GatewayServiceType = (typeof SERVICE_TYPES)[number];
/** The cert-manager kinds spec.gateway.tls.issuerRef may name (group cert-manager.io). */
export const ISSUER_KINDS = ['Issuer', 'ClusterIssuer'] as const;
export type IssuerKind = (typeof ISSUER_KINDS)[number];
export const PHASES = ['Available', 'Processing', 'Failed'] as const;
export type IoTServicePhase = (typeof PHASES)[number];
/** How telemetry moves from the broker into the database (ingestion.ts). */
export const INGESTION_STATES = ['Flowing', 'Stalled', 'Full'] as const;
export type IngestionState = (typeof INGESTION_STATES)[number];

/** Components of an instance, in the order they are reported. */
export const COMPONENTS = ['gateway', 'core', 'processing', 'broker', 'database'] as const;
export type ComponentName = (typeof COMPONENTS)[number];

/** Replica bounds and default of a component, and for some the only counts allowed within the bounds. */
export interface ReplicaRange {
  min: number;
  max: number;
  default: number;
  /** The only counts allowed (a CEL rule and its mirror below), with why as the message a user sees; absent: every count from min to max. */
  only?: { counts: readonly number[]; description: string; message: string };
}

/** Replica bounds and defaults per component (see the module comment for the reasoning). */
export const REPLICA_RANGES: Readonly<Record<ComponentName, ReplicaRange>> = {
  gateway: { min: 0, max: 50, default: 2 },
  core: { min: 0, max: 20, default: 2 },
  processing: { min: 0, max: 8, default: 1 },
  broker: {
    min: 1,
    max: 3,
    default: 1,
    only: {
      counts: [1, 3],
      description: 'Number of broker replicas: 1, or 3 to replicate every message on three brokers, any one of which may fail (default 1). Fixed at creation.',
      message: 'broker.replicas must be 1 or 3: 3 replicates every message on three brokers (any one may fail)',
    },
  },
  database: {
    min: 1,
    max: 3,
    default: 1,
    only: {
      counts: [1, 3],
      description:
        'Number of database replicas: 1, or 3 for a primary and two standbys under Patroni, replicated synchronously, any one of which may fail (default 1). Fixed at creation.',
      message: 'database.replicas must be 1 or 3: 3 runs a primary and two synchronous standbys (any one may fail)',
    },
  },
};

/** The replica counts `component` may run, in ascending order. */
export function allowedReplicas(component: ComponentName): number[] {
  const r = REPLICA_RANGES[component];
  return r.only ? [...r.only.counts] : Array.from({ length: r.max - r.min + 1 }, (_, i) => r.min + i);
}

// ---------------------------------------------------------------------------------------------
// Cross-field rules: CEL for the API server, a predicate with the same meaning for the operator
// (validation.ts).
// ---------------------------------------------------------------------------------------------

/** A CEL rule on one object of the schema, in the shape of `x-kubernetes-validations` entries. */
export interface CelRule {
  rule: string;
  message: string;
}

export const storageClassNeedsVolume: CelRule = {
  rule: `!has(self.storageClassName) || self.storageClassName == '' || !has(self.storage) || self.storage != '${EPHEMERAL_STORAGE}'`,
  message: `storageClassName cannot be set with storage: ${EPHEMERAL_STORAGE} (an emptyDir has no StorageClass)`,
};

/**
 * StatefulSet volume claim templates are immutable, so storage and storageClassName cannot change
 * once an instance exists. A transition rule: the API server evaluates it on updates only; the
 * operator cannot (it has no old object) and reports the refused StatefulSet update instead.
 */
const storageImmutable: CelRule = {
  rule:
    "(has(self.storage) ? self.storage : '') == (has(oldSelf.storage) ? oldSelf.storage : '') && " +
    "(has(self.storageClassName) ? self.storageClassName : '') == (has(oldSelf.storageClassName) ? oldSelf.storageClassName : '')",
  message: 'storage and storageClassName cannot be changed after creation (StatefulSet volume claims are immutable)',
};

/** A transition rule, like `storageImmutable`: `component`'s replicas stay what they were made with. */
function replicasFixed(component: 'broker' | 'database', why: string): CelRule {
  const count = (self: string) => `(has(${self}.replicas) ? ${self}.replicas : ${REPLICA_RANGES[component].default})`;
  return {
    rule: `${count('self')} == ${count('oldSelf')}`,
    message: `${component}.replicas cannot be changed after creation: ${why} (create a new IoTService with the count you need)`,
  };
}

/**
 * A single broker's stream does not carry over into a cluster of three (nor back): JetStream keeps
 * a standalone server's streams apart from a cluster's, so changing the count would strand what
 * the stream holds.
 */
const brokerReplicasFixed = replicasFixed('broker', 'the stream of one broker does not carry over into a cluster of three, or back');

/**
 * One database runs PostgreSQL alone, three run it under Patroni, which makes its cluster at its
 * first start: the data of one does not become the primary of three, or back.
 */
const databaseReplicasFixed = replicasFixed('database', "one database's data does not become a primary with two standbys under Patroni, or back");

/** A list of sources (`what`: device, application) whose every entry is a CIDR. */
const sourcesAreCidrs = (what: string): CelRule => ({ rule: 'self.all(c, isCIDR(c))', message: `every ${what} source must be a CIDR such as 203.0.113.0/24` });
export const deviceSourcesAreCidrs = sourcesAreCidrs('device');
export const applicationSourcesAreCidrs = sourcesAreCidrs('application');

/** CIDRs admitted to one component's ports (spec.gateway.deviceSources, spec.core.applicationSources). */
const sourceCidrs = (description: string, rule: CelRule) =>
  Type.Array(Type.String({ maxLength: 43 }), {
    maxItems: 32,
    description,
    errorMessage: 'must list CIDRs such as 203.0.113.0/24, at most 32',
    'x-kubernetes-validations': [rule],
  });

/**
 * A name devices reach the gateway by from outside: a lowercase DNS name (RFC 1123) or an IPv4 or
 * IPv6 address. A CEL rule rather than a `pattern`, as an address is easier said with isIP.
 */
export const TLS_HOSTNAME_PATTERN = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?([.][a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$';
export const tlsHostnamesWellFormed: CelRule = {
  rule: `self.all(h, isIP(h) || h.matches('${TLS_HOSTNAME_PATTERN}'))`,
  message: 'every hostname must be a lowercase DNS name such as iot.example.com or an IP address such as 203.0.113.7',
};

export const egressCidr: CelRule = {
  rule: 'isCIDR(self.cidr)',
  message: 'cidr must be a CIDR such as 198.51.100.0/24',
};

/**
 * How long telemetry is kept: a whole number (1 to 999999, no leading zero) of seconds, minutes,
 * hours or days. A CEL rule rather than a `pattern`, so that the API server gives this message.
 */
export const RETENTION_PATTERN = '^[1-9][0-9]{0,5}(s|m|h|d)$';
export const DEFAULT_RETENTION = '30d';
const RETENTION_UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86400 };

export const retentionWellFormed: CelRule = {
  rule: `self.matches('${RETENTION_PATTERN}')`,
  message: 'retention must be a whole number of s, m, h or d, e.g. 30d',
};

/** How far back applications can resume the event stream by default: a day. */
export const DEFAULT_EVENT_RETENTION = '1d';

export const eventRetentionWellFormed: CelRule = {
  rule: retentionWellFormed.rule,
  message: 'eventRetention must be a whole number of s, m, h or d, e.g. 1d',
};

/** The seconds a valid retention (`30d`, `12h`) stands for; throws for any other text. */
export function retentionSeconds(retention: string): number {
  const match = new RegExp(RETENTION_PATTERN).exec(retention);
  if (!match) throw new Error(`${retentionWellFormed.message}, got ${JSON.stringify(retention)}`);
  return Number(retention.slice(0, -1)) * RETENTION_UNIT_SECONDS[match[1]!]!;
}

export const configKeysWellFormed: CelRule = {
  rule: `!has(self.config) || self.config.all(k, k.matches('${CONFIG_KEY_PATTERN}'))`,
  message: "config keys may hold only letters, digits, '.', '_' and '-', start and end with a letter or digit, and have at most 128 characters",
};

export const configKeysNotReserved: CelRule = {
  rule:
    "!has(self.config) || !self.config.exists(k, k.lowerAscii().replace('.', '').replace('_', '').replace('-', '') in " +
    `[${RESERVED_CONFIG_KEYS.map((k) => `'${k}'`).join(', ')}])`,
  message: `config must not set ${RESERVED_CONFIG_KEYS.join(', ')} in any case or spelling (ignoring '.', '_' and '-'): the operator writes these keys of config.yml`,
};

// ---------------------------------------------------------------------------------------------
// Schema building blocks
// ---------------------------------------------------------------------------------------------

const StringMap = (description: string) => Type.Record(Type.String(), Type.String(), { description });

/** core/v1 resource.Quantity: an integer or a quantity string (`x-kubernetes-int-or-string`). */
export const QuantitySchema = Type.Union([Type.Integer({ minimum: 0 }), Type.String({ pattern: QUANTITY_PATTERN })], {
  errorMessage: 'must be a non-negative Kubernetes quantity such as 500m, 2, 512Mi or 10Gi',
});

/** A quota value: a quantity, as in a ResourceQuota's `hard` list. */
const QuotaQuantity = (description: string) => Type.Union([Type.Integer({ minimum: 0 }), Type.String({ pattern: QUANTITY_PATTERN })], { description, errorMessage: QuantitySchema.errorMessage as string });

const ResourceList = (description: string) => Type.Record(Type.String(), QuantitySchema, { description });

/** core/v1 ResourceRequirements (limits and requests). */
export const ResourceRequirementsSchema = Type.Object(
  {
    limits: Type.Optional(ResourceList('Most compute resources allowed, e.g. {cpu: 500m, memory: 512Mi}.')),
    requests: Type.Optional(ResourceList('Compute resources reserved, e.g. {cpu: 100m, memory: 128Mi}.')),
  },
  { additionalProperties: false, description: "The containers' compute resources (core/v1 ResourceRequirements)." },
);

/** The CEL rule of a component whose replicas may take only some counts of their bounds. */
function onlyReplicasRule(component: ComponentName): CelRule | undefined {
  const only = REPLICA_RANGES[component].only;
  return only && { rule: only.counts.map((n) => `self == ${n}`).join(' || '), message: only.message };
}

function replicas(component: ComponentName) {
  const r = REPLICA_RANGES[component];
  const rule = onlyReplicasRule(component);
  return Type.Integer({
    minimum: r.min,
    maximum: r.max,
    default: r.default,
    format: 'int32',
    description: r.only?.description ?? `Number of ${component} replicas, ${r.min}..${r.max} (default ${r.default}).`,
    errorMessage: r.only?.message ?? `must be an integer from ${r.min} to ${r.max}`,
    ...(rule ? { 'x-kubernetes-validations': [rule] } : {}),
  });
}

/** A component's scheduling fields: under `placement` in v1beta1, beside its other fields in v1alpha1. */
function placementFields(component: ComponentName) {
  return {
    nodeSelector: Type.Optional(StringMap(`Node labels the ${component} pods must match; keys as --allowed-node-label-keys allows.`)),
    tolerations: Type.Optional(
      Type.Array(TolerationSchema, {
        maxItems: 16,
        description: `Taints the ${component} pods tolerate; keys as --allowed-toleration-keys allows.`,
      }),
    ),
    affinity: Type.Optional(AffinitySchema),
  };
}

/** Fields every component accepts. */
function commonComponentFields(component: ComponentName) {
  return {
    replicas: Type.Optional(replicas(component)),
    image: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        pattern: '^\\S+$',
        description: `Image reference; overrides <registry>/iot-${component}:<version>.`,
        errorMessage: 'must be an image reference without spaces',
      }),
    ),
    resources: Type.Optional(ResourceRequirementsSchema),
    placement: Type.Optional(
      Type.Object(placementFields(component), {
        additionalProperties: false,
        minProperties: 1,
        description: `Where the ${component} pods run, within the operator's tenant policy (else Failed).`,
        errorMessage: 'must set at least one of nodeSelector, tolerations and affinity',
      }),
    ),
  };
}

function storageFields(component: ComponentName) {
  return {
    storage: Type.Optional(
      Type.String({
        maxLength: 64,
        pattern: STORAGE_PATTERN,
        description: `Size of each ${component} replica's persistent volume, e.g. 10Gi; empty: ${DEFAULT_STORAGE}; "${EPHEMERAL_STORAGE}": an emptyDir, whose data is lost with the pod.`,
        errorMessage: `must be empty, "${EPHEMERAL_STORAGE}" or a Kubernetes quantity such as 10Gi`,
      }),
    ),
    storageClassName: Type.Optional(
      Type.String({
        maxLength: 253,
        description: `StorageClass of the persistent volumes; empty: the cluster default. Not with storage: ${EPHEMERAL_STORAGE}.`,
      }),
    ),
  };
}

/**
 * A size of at least one byte: a quantity (e.g. 512Mi, 1.5Gi, 2G) whose number starts with a
 * digit from 1 to 9, so that it is never 0 or a fraction of a byte (quantity.ts reads it).
 */
export const BYTES_PATTERN = '^[1-9][0-9]*(\\.[0-9]+)?([KMGTP]i|[kMGTP])?$';

/** Fields of the broker only. */
const brokerFields = {
  maxBacklog: Type.Optional(
    Type.String({
      maxLength: 64,
      pattern: BYTES_PATTERN,
      description:
        'Most telemetry the broker holds for processing (bytes); when reached, the gateway slows devices down. Default: 75 % of the broker\'s volume, or 256Mi with storage: ephemeral.',
      errorMessage: 'must be a size in bytes such as 512Mi, 1.5Gi or 2G (starting with a digit from 1 to 9)',
    }),
  ),
};

const componentDescription: Readonly<Record<ComponentName, string>> = {
  gateway: 'Device-facing ingestion: a Deployment and a Service with one port per protocol.',
  core: 'Device registry and management API: a Deployment and a Service on port 8080.',
  processing: 'Message processing pipeline: a Deployment without a Service.',
  broker: 'Message broker (NATS JetStream): a StatefulSet, a headless Service (client 4222, cluster 6222, monitor 8222) and the ClusterIP Service broker-client (4222).',
  database:
    "Time-series store (PostgreSQL): StatefulSet database and Service database-client (5432, the primary); with 3 replicas Patroni elects the primary.",
};

/** The most `spec.gateway.connections` may be: the largest int32. */
export const MAX_GATEWAY_CONNECTIONS = 2147483647;

export const GatewaySpecSchema = Type.Object(
  {
    ...commonComponentFields('gateway'),
    protocols: Type.Optional(
      Type.Array(
        Type.Union(
          GATEWAY_PROTOCOLS.map((p) => Type.Literal(p)),
          { errorMessage: `must be one of ${GATEWAY_PROTOCOLS.join(', ')}` },
        ),
        {
          minItems: 1,
          uniqueItems: true,
          default: ['mqtts', 'https'],
          description:
            'Device protocols: mqtts (8883/TCP, TLS), https (8443/TCP, TLS), mqtt (1883/TCP), http (8080/TCP), coap (5683/UDP). Default [mqtts, https]; mqtt, http and coap carry passwords in clear (condition PlaintextProtocols).',
          errorMessage: 'must list at least one protocol, each at most once',
        },
      ),
    ),
    deviceSources: Type.Optional(
      sourceCidrs("CIDRs (e.g. 203.0.113.0/24) whose devices may reach the gateway's protocol ports. Empty or absent: no traffic from outside the instance reaches the gateway.", deviceSourcesAreCidrs),
    ),
    serviceType: Type.Optional(
      Type.Union(
        SERVICE_TYPES.map((t) => Type.Literal(t)),
        {
          default: 'ClusterIP',
          description: 'Type of the gateway Service: ClusterIP, NodePort or LoadBalancer (default ClusterIP).',
          errorMessage: `must be one of ${SERVICE_TYPES.join(', ')}`,
        },
      ),
    ),
    connections: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_GATEWAY_CONNECTIONS,
        format: 'int32',
        description:
          'Most device connections (TCP, all protocols) each gateway pod accepts; beyond it new ones are closed at once. Absent: no cap.',
        errorMessage: `must be an integer from 1 to ${MAX_GATEWAY_CONNECTIONS}`,
      }),
    ),
    tls: Type.Optional(
      Type.Object(
        {
          hostnames: Type.Optional(
            Type.Array(Type.String({ minLength: 1, maxLength: 253 }), {
              maxItems: 32,
              description:
                "DNS names and IP addresses devices reach the gateway by from outside the cluster (e.g. iot.example.com, 203.0.113.7); the server certificate covers them and the gateway Service's own names.",
              errorMessage: 'must list at most 32 DNS names or IP addresses',
              'x-kubernetes-validations': [tlsHostnamesWellFormed],
            }),
          ),
          clientCA: Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: 253,
              pattern: '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$',
              description:
                "A ConfigMap in the IoTService's namespace whose ca.crt holds the CAs of device client certificates; the gateway then asks devices for one. Absent: none.",
              errorMessage: 'must be the name of a ConfigMap',
            }),
          ),
          issuerRef: Type.Optional(
            Type.Object(
              {
                kind: Type.Union(
                  ISSUER_KINDS.map((k) => Type.Literal(k)),
                  { description: "Issuer (in the IoTService's namespace) or ClusterIssuer.", errorMessage: `must be one of ${ISSUER_KINDS.join(', ')}` },
                ),
                name: Type.String({
                  minLength: 1,
                  maxLength: 253,
                  pattern: '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$',
                  description: 'The name of the Issuer or ClusterIssuer.',
                  errorMessage: 'must be the name of an Issuer or ClusterIssuer',
                }),
              },
              {
                additionalProperties: false,
                description:
                  "A cert-manager Issuer or ClusterIssuer that issues the gateway's server certificate instead of the instance's CA (Certificate <name>-gateway, copied into Secret gateway-tls; its CA in ConfigMap gateway-ca).",
              },
            ),
          ),
        },
        {
          additionalProperties: false,
          description:
            "The gateway's TLS (mqtts, https): its server certificate is signed by the instance's CA, or by cert-manager when issuerRef names an issuer; the CA devices trust is in ConfigMap gateway-ca and status.gateway.tls.",
        },
      ),
    ),
  },
  { additionalProperties: false, default: {}, description: componentDescription.gateway },
);

const plainComponent = <Extra extends TProperties>(component: 'core' | 'processing', extra: Extra) =>
  Type.Object({ ...commonComponentFields(component), ...extra }, {
    additionalProperties: false,
    default: {},
    description: componentDescription[component],
  });

const statefulComponent = <Extra extends TProperties>(component: 'broker' | 'database', extra: Extra, rules: readonly CelRule[] = []) =>
  Type.Object(
    { ...commonComponentFields(component), ...storageFields(component), ...extra },
    {
      additionalProperties: false,
      default: {},
      description: componentDescription[component],
      'x-kubernetes-validations': [storageClassNeedsVolume, storageImmutable, ...rules],
    },
  );

export const CoreSpecSchema = plainComponent('core', {
  applicationSources: Type.Optional(
    sourceCidrs("CIDRs whose applications may reach core's API (8080). Absent: only the instance's gateway.", applicationSourcesAreCidrs),
  ),
});
export const ProcessingSpecSchema = plainComponent('processing', {});
export const BrokerSpecSchema = statefulComponent('broker', brokerFields, [brokerReplicasFixed]);
export const DatabaseSpecSchema = statefulComponent('database', {}, [databaseReplicasFixed]);

/**
 * How often the repository host takes a full backup: a whole number (1 to 999999, no leading
 * zero) of minutes, hours or days — an interval rather than a cron expression, counted from the
 * end of the last backup, so a restarted repository host neither skips nor repeats one.
 */
export const BACKUP_SCHEDULE_PATTERN = '^[1-9][0-9]{0,5}(m|h|d)$';
export const DEFAULT_BACKUP_SCHEDULE = '1d';
export const DEFAULT_BACKUP_RETENTION = 7;
export const MAX_BACKUP_RETENTION = 100;

const BACKUP_SCHEDULE_MESSAGE = 'must be a whole number of m, h or d between full backups, e.g. 1d';

/** The seconds a valid backup schedule (`1d`, `6h`) stands for; throws for any other text. */
export function backupScheduleSeconds(schedule: string): number {
  if (!new RegExp(BACKUP_SCHEDULE_PATTERN).test(schedule)) throw new Error(`schedule ${BACKUP_SCHEDULE_MESSAGE}, got ${JSON.stringify(schedule)}`);
  return Number(schedule.slice(0, -1)) * RETENTION_UNIT_SECONDS[schedule.slice(-1)]!;
}

/**
 * A transition rule, like `storageImmutable`: the repository stays where it was made (a volume
 * claim template is immutable; a bucket moved would leave the archive behind).
 */
const backupTargetImmutable: CelRule = {
  rule: 'self == oldSelf',
  message: 'target cannot be changed after creation',
};

/** The repository is on a volume claim or in an S3 bucket, one of them. */
export const backupTargetOne: CelRule = {
  rule: 'has(self.volumeClaim) != has(self.s3)',
  message: 'must set exactly one of volumeClaim and s3',
};

/** `host[:port]` of an S3 endpoint, without scheme or path (HTTPS is always used). */
export const S3_ENDPOINT_PATTERN = '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[1-9][0-9]{0,4})?$';
/** An S3 bucket name: 3 to 63 lower-case letters, digits, dots and hyphens. */
export const S3_BUCKET_PATTERN = '^[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]$';
export const DEFAULT_S3_REGION = 'us-east-1';
/** The keys of the Secret spec.backup.target.s3.credentialsSecret names; ca.crt is optional. */
export const S3_ACCESS_KEY_ID = 'accessKeyId';
export const S3_SECRET_ACCESS_KEY = 'secretAccessKey';
export const S3_CA_KEY = 'ca.crt';

/**
 * A transition rule: backups once asked for stay (the repository host and its volume would
 * otherwise be left running without a database archiving to it).
 */
const backupStays: CelRule = {
  rule: '!has(oldSelf.backup) || has(self.backup)',
  message: 'backup cannot be removed once set (delete the IoTService to remove the repository)',
};

export const BackupSpecSchema = Type.Object(
  {
    schedule: Type.Optional(
      Type.String({
        pattern: BACKUP_SCHEDULE_PATTERN,
        default: DEFAULT_BACKUP_SCHEDULE,
        description: 'Time between full backups, from the end of the last: m, h or d, e.g. 1d (default).',
        errorMessage: BACKUP_SCHEDULE_MESSAGE,
      }),
    ),
    retention: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_BACKUP_RETENTION,
        default: DEFAULT_BACKUP_RETENTION,
        format: 'int32',
        description: `Full backups kept (default ${DEFAULT_BACKUP_RETENTION}).`,
        errorMessage: `must be an integer from 1 to ${MAX_BACKUP_RETENTION}`,
      }),
    ),
    target: Type.Object(
      {
        volumeClaim: Type.Optional(
          Type.Object(
            {
              size: Type.String({
                maxLength: 64,
                pattern: BYTES_PATTERN,
                description: "The repository volume's size, e.g. 20Gi.",
                errorMessage: 'must be a size in bytes such as 20Gi (starting with a digit from 1 to 9)',
              }),
              storageClassName: Type.Optional(Type.String({ maxLength: 253, description: 'Its StorageClass; absent: the default.' })),
            },
            { additionalProperties: false, description: 'The repository on a volume of StatefulSet backup (the repository host).' },
          ),
        ),
        s3: Type.Optional(
          Type.Object(
            {
              endpoint: Type.String({
                maxLength: 253,
                pattern: S3_ENDPOINT_PATTERN,
                description: 'host[:port] (default 443) of the S3 API, over HTTPS.',
                errorMessage: 'must be host[:port], without scheme or path',
              }),
              bucket: Type.String({ pattern: S3_BUCKET_PATTERN, description: 'Repository at /<namespace> in it.', errorMessage: 'must be an S3 bucket name' }),
              region: Type.Optional(Type.String({ maxLength: 64, default: DEFAULT_S3_REGION })),
              credentialsSecret: Type.String({
                maxLength: 253,
                description: `Secret of this namespace: ${S3_ACCESS_KEY_ID}, ${S3_SECRET_ACCESS_KEY}, optional ${S3_CA_KEY}.`,
              }),
              uriStyle: Type.Optional(Type.Union([Type.Literal('path'), Type.Literal('host')], { default: 'path' })),
              insecureSkipVerify: Type.Optional(Type.Boolean({ description: "true: the endpoint's certificate is not checked." })),
            },
            { additionalProperties: false, description: 'The repository in an S3 bucket, reached by StatefulSet backup.' },
          ),
        ),
      },
      { additionalProperties: false, description: 'Fixed at creation.', 'x-kubernetes-validations': [backupTargetOne, backupTargetImmutable] },
    ),
  },
  {
    additionalProperties: false,
    description: 'pgBackRest backups: full ones on the schedule, WAL archived at least every minute; stanza: the namespace.',
  },
);

/** An IoTService's name as `spec.restore.from` names it: a DNS-1123 label. */
export const INSTANCE_NAME_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** An RFC 3339 time with its zone, e.g. 2026-11-29T09:15:00Z or 2026-11-29T10:15:00.5+01:00. */
export const RFC3339_PATTERN = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$';

/** Whether `text` is an RFC 3339 time with its zone that names a real time: no 30 February, no hour 25. */
export function restoreTargetValid(text: string): boolean {
  const match = new RegExp(RFC3339_PATTERN).test(text) && /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})/.exec(text);
  if (!match || Number.isNaN(Date.parse(text))) return false;
  const [year, month, day, hour, minute, second] = match.slice(1).map(Number) as [number, number, number, number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day && hour < 24 && minute < 60 && second < 60;
}

/**
 * `format: date-time`, as the API server checks it (OpenAPI's RFC 3339 date-time), for the
 * operator's own check: stricter, a zone required (`restoreTargetValid`).
 */
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', restoreTargetValid);

/**
 * A transition rule on the spec: `restore` is given when the IoTService is created and never
 * added, removed or changed afterwards (an existing database is never restored over).
 */
export const restoreFixed: CelRule = {
  rule: 'has(self.restore) == has(oldSelf.restore) && (!has(self.restore) || self.restore == oldSelf.restore)',
  message: 'restore is set at creation only',
};

/**
 * `restore.fromBucket` reads the bucket the instance backs up to: the operator's own check
 * (validation.ts; the CRD has no room for a CEL rule), Failed/InvalidSpec otherwise.
 */
export const RESTORE_FROM_BUCKET_NEEDS_S3 = 'needs spec.backup.target.s3: the bucket restored from is the one the instance backs up to';

export const RestoreSpecSchema = Type.Object(
  {
    from: Type.String({
      maxLength: 63,
      pattern: INSTANCE_NAME_PATTERN,
      description: 'An IoTService of this namespace with spec.backup; with fromBucket, the stanza <namespace>-<from>.',
      errorMessage: 'must name an IoTService of this namespace',
    }),
    fromBucket: Type.Optional(Type.Boolean({ description: 'true: read the bucket of spec.backup.target.s3, no IoTService.' })),
    targetTime: Type.Optional(
      Type.String({
        maxLength: 64,
        format: 'date-time',
        description: 'Restore to this time (RFC 3339); absent: to the end of the archive.',
        errorMessage: 'must be an RFC 3339 time with its zone, e.g. 2026-11-29T09:15:00Z',
      }),
    ),
  },
  { additionalProperties: false, description: "Start from another instance's backups. Set at creation only." },
);

export const IoTServiceSpecSchema = Type.Object(
  {
    version: Type.String({
      minLength: 1,
      maxLength: 128,
      pattern: IMAGE_TAG_PATTERN,
      description: 'Image tag used by every component, e.g. 2.4.1. Changing it rolls every workload.',
      errorMessage: 'must be an image tag: letters, digits, _ . - (not starting with . or -), at most 128 characters',
    }),
    registry: Type.Optional(
      Type.String({
        maxLength: 253,
        pattern: REGISTRY_PATTERN,
        description: "Image registry and path prefix, e.g. registry.example.com/iot; empty: the operator's default.",
        errorMessage: 'must be a registry host with optional port and path, e.g. registry.example.com:5000/iot',
      }),
    ),
    paused: Type.Optional(
      Type.Boolean({
        default: false,
        description: 'true: the operator leaves every child exactly as it is (status is still reported).',
      }),
    ),
    gateway: Type.Optional(GatewaySpecSchema),
    core: Type.Optional(CoreSpecSchema),
    processing: Type.Optional(ProcessingSpecSchema),
    broker: Type.Optional(BrokerSpecSchema),
    database: Type.Optional(DatabaseSpecSchema),
    retention: Type.Optional(
      Type.String({
        maxLength: 64,
        default: DEFAULT_RETENTION,
        description:
          'How long telemetry is kept: rows older than this (by the time the gateway received them) are deleted by the database in small batches. s, m, h or d, e.g. 30d (default), 12h.',
        errorMessage: retentionWellFormed.message,
        'x-kubernetes-validations': [retentionWellFormed],
      }),
    ),
    eventRetention: Type.Optional(
      Type.String({
        pattern: RETENTION_PATTERN,
        default: DEFAULT_EVENT_RETENTION,
        description: 'How far back GET /v1/stream resumes: s, m, h or d.',
        errorMessage: eventRetentionWellFormed.message,
      }),
    ),
    backup: Type.Optional(BackupSpecSchema),
    restore: Type.Optional(RestoreSpecSchema),
    egress: Type.Optional(
      Type.Array(
        Type.Object(
          {
            cidr: Type.String({ maxLength: 43, description: 'Destination CIDR, e.g. 198.51.100.0/24.' }),
            ports: Type.Optional(
              Type.Array(Type.Integer({ minimum: 1, maximum: 65535, format: 'int32' }), { maxItems: 16, description: 'TCP ports; absent: every port.' }),
            ),
          },
          { additionalProperties: false, 'x-kubernetes-validations': [egressCidr] },
        ),
        {
          maxItems: 32,
          description:
            "Destinations the instance's pods may connect to besides DNS (kube-system, port 53) and the instance's own pods; absent: none.",
        },
      ),
    ),
    quota: Type.Optional(
      Type.Object(
        {
          cpu: Type.Optional(QuotaQuantity('CPU requested by all pods of the instance together, e.g. 4.')),
          memory: Type.Optional(QuotaQuantity('Memory requested by all pods of the instance together, e.g. 8Gi.')),
          storage: Type.Optional(QuotaQuantity('Storage requested by all persistent volume claims of the instance together, e.g. 100Gi.')),
        },
        {
          additionalProperties: false,
          description:
            "The instance namespace's ResourceQuota. Each value defaults to the operator's --default-quota and may not exceed its --max-quota.",
        },
      ),
    ),
    config: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: 4096 }), {
        maxProperties: 256,
        description: `Entries merged into config.yml (by default at /etc/sap/config.yml); may not set ${RESERVED_CONFIG_KEYS.join(', ')} in any spelling. Every key and value is written as a quoted string.`,
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'Desired state of one IoT service instance.',
    'x-kubernetes-validations': [configKeysWellFormed, configKeysNotReserved, backupStays, restoreFixed],
  },
);

const ComponentStatusSchema = Type.Object(
  {
    desired: Type.Integer({ format: 'int32', description: 'Replicas the spec asks for.' }),
    updated: Type.Integer({ format: 'int32', description: 'Replicas running the current pod template.' }),
    ready: Type.Integer({ format: 'int32', description: 'Replicas that are ready.' }),
  },
  { additionalProperties: false },
);

/** metav1.Condition. */
export const ConditionSchema = Type.Object(
  {
    type: Type.String({ maxLength: 316 }),
    status: Type.Union([Type.Literal('True'), Type.Literal('False'), Type.Literal('Unknown')]),
    observedGeneration: Type.Optional(Type.Integer({ format: 'int64', minimum: 0 })),
    lastTransitionTime: Type.String({ description: 'RFC 3339 time the status last changed.' }),
    reason: Type.String({ maxLength: 1024 }),
    message: Type.String({ maxLength: 32768 }),
  },
  { additionalProperties: false },
);

const IngestionStatusSchema = Type.Object(
  {
    state: Type.Union(
      INGESTION_STATES.map((s) => Type.Literal(s)),
      { description: 'Flowing; Stalled (messages wait and none was stored for a minute); Full (the backlog is at its limit).' },
    ),
    backlogMessages: Type.Integer({ format: 'int64', minimum: 0, description: 'Messages in the broker not yet stored.' }),
    backlogBytes: Type.Integer({ format: 'int64', minimum: 0, description: 'Bytes of those messages.' }),
    backlogLimitBytes: Type.Optional(Type.Integer({ format: 'int64', minimum: 0, description: "The backlog's limit in bytes (spec.broker.maxBacklog)." })),
    oldestUnstoredSeconds: Type.Integer({ format: 'int64', minimum: 0, description: 'Age of the oldest message not yet stored.' }),
    lastStoredSecondsAgo: Type.Optional(Type.Integer({ format: 'int64', minimum: 0, description: 'Seconds since processing last stored a message; absent when it never did.' })),
  },
  {
    additionalProperties: false,
    description: "The ingestion as read from the broker when its state last changed (metrics iotservice_ingestion_*: as it is now).",
  },
);

const GatewayStatusSchema = Type.Object(
  {
    tls: Type.Optional(
      Type.Object(
        {
          caCertificate: Type.String({
            description: "The CA certificate (PEM) devices trust the gateway by: the instance CA's or the issuer's; also in ConfigMap gateway-ca.",
          }),
          notAfter: Type.String({ description: "RFC 3339 time the gateway's server certificate expires; it is renewed 30 days before (by cert-manager with spec.gateway.tls.issuerRef)." }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false, description: "The gateway as devices see it." },
);

const BackupStatusSchema = Type.Object(
  {
    lastBackup: Type.Optional(
      Type.Object(
        {
          time: Type.String({ description: 'When it completed (RFC 3339).' }),
          type: Type.String({ description: 'full, diff or incr.' }),
          label: Type.String({ description: "pgBackRest's label." }),
        },
        { additionalProperties: false, description: 'The latest completed backup.' },
      ),
    ),
    lastArchivedWal: Type.Optional(Type.String({ description: 'The newest archived WAL segment.' })),
    lastArchivedWalTime: Type.Optional(Type.String({ description: 'When it reached the repository (RFC 3339).' })),
    backups: Type.Optional(Type.Integer({ format: 'int32', minimum: 0, description: 'Backups kept.' })),
  },
  { additionalProperties: false, description: 'The repository as last read (pgbackrest info).' },
);

const RestoreStatusSchema = Type.Object(
  {
    from: Type.String(),
    targetTime: Type.Optional(Type.String()),
    state: Type.Union([Type.Literal('Restoring'), Type.Literal('Restored')]),
    backup: Type.Optional(Type.String()),
    recoveredTo: Type.Optional(Type.String()),
    completedAt: Type.Optional(Type.String()),
  },
  { additionalProperties: false, description: "spec.restore: Restoring, then Restored: pgBackRest's backup label, the last transaction's time recovered, when." },
);

export const IoTServiceStatusSchema = Type.Object(
  {
    phase: Type.Optional(
      Type.Union(
        PHASES.map((p) => Type.Literal(p)),
        { description: 'Available, Processing or Failed.' },
      ),
    ),
    observedGeneration: Type.Optional(
      Type.Integer({ format: 'int64', description: 'metadata.generation of the spec this status describes.' }),
    ),
    reason: Type.Optional(Type.String({ description: 'Only when phase is Failed: why, and what to do about it.' })),
    pods: Type.Optional(Type.Array(Type.String(), { description: "Names of the instance's Running pods." })),
    namespace: Type.Optional(Type.String({ description: "The instance's namespace, <landscape>-<instance id>." })),
    ready: Type.Optional(Type.String({ description: 'Ready pods / desired pods, e.g. 7/7.' })),
    components: Type.Optional(
      Type.Record(Type.String(), ComponentStatusSchema, { description: 'Per workload: desired, updated and ready replicas.' }),
    ),
    ingestion: Type.Optional(IngestionStatusSchema),
    gateway: Type.Optional(GatewayStatusSchema),
    backup: Type.Optional(BackupStatusSchema),
    restore: Type.Optional(RestoreStatusSchema),
    conditions: Type.Optional(
      Type.Array(ConditionSchema, {
        description: 'Ready, Progressing, Degraded, PersistentStorage and PlaintextProtocols.',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['type'],
      }),
    ),
  },
  { additionalProperties: false, description: 'Observed state of the instance, written by the operator.' },
);

export type IoTServiceSpec = Static<typeof IoTServiceSpecSchema>;
export type IoTServiceStatus = Static<typeof IoTServiceStatusSchema>;
export type ComponentStatus = Static<typeof ComponentStatusSchema>;
export type IngestionStatus = Static<typeof IngestionStatusSchema>;
export type GatewayStatus = Static<typeof GatewayStatusSchema>;
export type BackupSpec = Static<typeof BackupSpecSchema>;
export type S3TargetSpec = NonNullable<BackupSpec['target']['s3']>;
export type BackupStatus = Static<typeof BackupStatusSchema>;
export type RestoreSpec = Static<typeof RestoreSpecSchema>;
export type RestoreStatus = Static<typeof RestoreStatusSchema>;
export type ResourceRequirements = Static<typeof ResourceRequirementsSchema>;
export type Quantity = Static<typeof QuantitySchema>;

/** A spec after `validateIoTServiceSpec`: every defaulted field is present. */
export type DefaultedIoTServiceSpec = IoTServiceSpec & {
  paused: boolean;
  retention: string;
  eventRetention: string;
  gateway: Static<typeof GatewaySpecSchema> & {
    replicas: number;
    protocols: GatewayProtocol[];
    serviceType: GatewayServiceType;
  };
  core: Static<typeof CoreSpecSchema> & { replicas: number };
  processing: Static<typeof ProcessingSpecSchema> & { replicas: number };
  broker: Static<typeof BrokerSpecSchema> & { replicas: number };
  database: Static<typeof DatabaseSpecSchema> & { replicas: number };
  backup?: Static<typeof BackupSpecSchema> & { schedule: string; retention: number; target: { s3?: S3TargetSpec & { region: string; uriStyle: 'path' | 'host' } } };
};

/** The IoTService object as the API server returns it. */
export interface IoTService {
  apiVersion: typeof IOTSERVICE_API_VERSION;
  kind: typeof IOTSERVICE_KIND;
  metadata: V1ObjectMeta;
  spec: IoTServiceSpec;
  status?: IoTServiceStatus;
}
