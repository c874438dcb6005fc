/**
 * The Ptemplate API (pt.example.com/v1alpha1), defined once.
 *
 * Guarantees: the TypeBox schemas below are the single source of the TypeScript types
 * (`PtemplateSpec`, `PtemplateStatus`, `PtemplateObject`), of the operator-side check
 * (`isValidPtemplateSpec`) and of the CRD's OpenAPI schema (see crd.ts). Defaults live in the
 * schema, so the API server fills them in before the operator reads an object. The one
 * cross-field rule (a consumer cannot need more devices than a node offers) is CEL in the CRD
 * and mirrored in `isValidPtemplateSpec`.
 *
 * A Ptemplate asks for the pt character-device kernel module on the nodes matching `selector`
 * (through a KMM Module, with module parameters from `maxdev` and `defaultmsg`) and for one
 * consumer pod per such node (a DaemonSet) that requests `requiredDevices` pt devices.
 */

import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { customResource, type Condition, type KubeObject, type ObjectMeta } from '@iot-operator/runtime';

export const API_GROUP = 'pt.example.com';
export const API_VERSION = 'v1alpha1';
export const PTEMPLATE_API_VERSION = `${API_GROUP}/${API_VERSION}` as const;
export const PTEMPLATE_KIND = 'Ptemplate' as const;
export const PTEMPLATE_PLURAL = 'ptemplates';
export const PTEMPLATE_SINGULAR = 'ptemplate';

/** The runtime's resource type for Ptemplate objects. */
export const Ptemplate = customResource(API_GROUP, API_VERSION, PTEMPLATE_KIND, PTEMPLATE_PLURAL);

/** Kernel-module image of the pt example project; KMM substitutes ${KERNEL_FULL_VERSION} per node. */
export const DEFAULT_MODULE_IMAGE = 'quay.io/chrisp262/pt-char-dev:${KERNEL_FULL_VERSION}-sb';
/** Device plugin of the pt example project: advertises the pt devices of a node to the kubelet. */
export const DEFAULT_DEVICE_PLUGIN_IMAGE = 'quay.io/chrisp262/pt-device-plugin:plugin-latest';
export const DEFAULT_MAXDEV = 5;
export const DEFAULT_REQUIRED_DEVICES = 1;

const IMAGE_PATTERN = '^\\S+$';

export const PtemplateSpecSchema = Type.Object(
  {
    maxdev: Type.Integer({
      description: 'Number of pt devices the kernel module creates on each node (module parameter max_dev).',
      format: 'int32',
      minimum: 1,
      maximum: 1024,
      default: DEFAULT_MAXDEV,
    }),
    defaultmsg: Type.Optional(
      Type.String({
        description: 'Message a pt device returns until one is written to it (module parameter default_msg); no whitespace.',
        pattern: '^\\S*$',
        maxLength: 128,
      }),
    ),
    consumerimage: Type.String({ description: 'Image of the consumer pods, one per selected node.', pattern: IMAGE_PATTERN, maxLength: 512 }),
    requiredDevices: Type.Integer({
      description: 'pt devices each consumer pod requests (extended resource example.com/ptemplate); 0 = none.',
      format: 'int32',
      minimum: 0,
      maximum: 1024,
      default: DEFAULT_REQUIRED_DEVICES,
    }),
    imageRepoSecret: Type.Optional(
      Type.Object(
        { name: Type.String({ description: 'Name of a docker-registry Secret in the Ptemplate namespace.', minLength: 1, maxLength: 253 }) },
        { description: 'Pull secret for the module, device-plugin and consumer images.' },
      ),
    ),
    selector: Type.Record(Type.String(), Type.String(), {
      description: 'Node labels selecting the nodes that load the module and run a consumer pod; {} = every node.',
    }),
    moduleImage: Type.String({
      description: 'Kernel-module image for KMM; ${KERNEL_FULL_VERSION} is replaced with each node kernel version.',
      pattern: IMAGE_PATTERN,
      maxLength: 512,
      default: DEFAULT_MODULE_IMAGE,
    }),
    devicePluginImage: Type.String({
      description: 'Device-plugin image KMM runs on the selected nodes to advertise the pt devices.',
      pattern: IMAGE_PATTERN,
      maxLength: 512,
      default: DEFAULT_DEVICE_PLUGIN_IMAGE,
    }),
  },
  {
    description: 'PtemplateSpec: the pt kernel module and its consumers.',
    'x-kubernetes-validations': [{ rule: 'self.requiredDevices <= self.maxdev', message: 'requiredDevices cannot exceed maxdev (the devices a node offers)' }],
  },
);

export const ConditionSchema = Type.Object({
  type: Type.String({ description: 'KMMAvailable or ConsumersReady.', maxLength: 316 }),
  status: Type.String({ enum: ['True', 'False', 'Unknown'] }),
  reason: Type.String({ maxLength: 1024 }),
  message: Type.String({ maxLength: 32768 }),
  lastTransitionTime: Type.String({ format: 'date-time' }),
  observedGeneration: Type.Optional(Type.Integer({ format: 'int64', minimum: 0 })),
});

export const PtemplateStatusSchema = Type.Object(
  {
    // Optional in the schema (the operator always writes it): the runtime's Degraded condition can
    // then be written to a Ptemplate whose status holds nothing else.
    consumers: Type.Optional(Type.Array(Type.String(), { description: 'Names of the consumer pods, sorted.' })),
    conditions: Type.Optional(
      Type.Array(ConditionSchema, {
        description: 'KMMAvailable: the KMM Module exists (False with reason ModuleCRDMissing when KMM is not installed); ConsumersReady: every consumer pod is ready.',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['type'],
      }),
    ),
  },
  { description: 'PtemplateStatus: what the operator observed.' },
);

export type PtemplateSpec = Static<typeof PtemplateSpecSchema>;

/** The status schema's type, with conditions typed as the runtime's `Condition` (checked below). */
export interface PtemplateStatus {
  consumers: string[];
  conditions?: Condition[];
}
type Assignable<T, U extends T> = U;
export type PtemplateStatusMatchesSchema = Assignable<Static<typeof PtemplateStatusSchema>, PtemplateStatus>;

export interface PtemplateObject extends KubeObject {
  apiVersion?: typeof PTEMPLATE_API_VERSION;
  kind?: typeof PTEMPLATE_KIND;
  metadata: ObjectMeta;
  spec: PtemplateSpec;
  status?: PtemplateStatus;
}

/** True when `spec` satisfies the schema and the CEL rule (the API server checked both already). */
export function isValidPtemplateSpec(spec: unknown): spec is PtemplateSpec {
  return Value.Check(PtemplateSpecSchema, spec) && spec.requiredDevices <= spec.maxdev;
}
