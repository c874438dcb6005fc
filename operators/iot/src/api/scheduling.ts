/**
 * The core/v1 scheduling schema of a component's pods, written out for the IoTService API:
 * `tolerations` (core/v1 Toleration) and `affinity` (core/v1 Affinity, from its node selector
 * terms, meta/v1 label selectors and pod affinity terms). iotservice.ts puts them, beside
 * `nodeSelector`, under each component's `placement`; crd-schema.ts projects them for the CRD.
 *
 * Guarantees: every object of these schemas rejects unknown fields; the bounds on lengths and
 * list sizes are this API's (core/v1 leaves most lists unbounded), and the `errorMessage`s are
 * the wording validation.ts reports.
 */

import { Type } from '@sinclair/typebox';


/** core/v1 Toleration: which taint a component's pods tolerate. */
export const TolerationSchema = Type.Object(
  {
    key: Type.Optional(Type.String({ maxLength: 316, description: 'Taint key; empty with operator Exists: every taint.' })),
    operator: Type.Optional(Type.Union([Type.Literal('Exists'), Type.Literal('Equal')], { description: 'Exists or Equal (default).', errorMessage: 'must be Exists or Equal' })),
    value: Type.Optional(Type.String({ maxLength: 63, description: 'Taint value (operator Equal).' })),
    effect: Type.Optional(
      Type.Union([Type.Literal('NoSchedule'), Type.Literal('PreferNoSchedule'), Type.Literal('NoExecute')], {
        description: 'Taint effect; empty: every effect.',
        errorMessage: 'must be NoSchedule, PreferNoSchedule or NoExecute',
      }),
    ),
    tolerationSeconds: Type.Optional(Type.Integer({ format: 'int64', description: 'How long a NoExecute taint is tolerated.' })),
  },
  { additionalProperties: false, description: 'A taint the pods tolerate (core/v1 Toleration).' },
);

// core/v1 Affinity, defined once from its parts. The API server's validation of pod templates is
// not repeated here (values that must be empty for Exists, a label key's grammar): a Deployment or
// StatefulSet it refuses makes the instance Failed with the server's message. The list bounds are
// this API's, chosen generously: core/v1 leaves these lists unbounded.

/** A label key: an optional DNS-subdomain prefix (253) and '/', then a name (63). */
const LABEL_KEY_MAX_LENGTH = 317;

const NODE_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'] as const;
const LABEL_SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;

const labelKey = (description: string) =>
  Type.String({ minLength: 1, maxLength: LABEL_KEY_MAX_LENGTH, description, errorMessage: `must be a label key of 1 to ${LABEL_KEY_MAX_LENGTH} characters` });

const operatorOf = <O extends string>(operators: readonly O[], description: string) =>
  Type.Union(
    operators.map((o) => Type.Literal(o)),
    { description, errorMessage: `must be one of ${operators.join(', ')}` },
  );

const schedulingWeight = Type.Integer({
  minimum: 1,
  maximum: 100,
  format: 'int32',
  description: "Added to a node's score when the term matches, 1..100.",
  errorMessage: 'must be an integer from 1 to 100',
});

/** core/v1 NodeSelectorRequirement: a node label (or field) compared with values. */
export const NodeSelectorRequirementSchema = Type.Object(
  {
    key: labelKey('Node label key (matchFields: metadata.name).'),
    operator: operatorOf(NODE_OPERATORS, 'In, NotIn, Exists, DoesNotExist, Gt or Lt.'),
    values: Type.Optional(
      Type.Array(Type.String({ maxLength: 253 }), {
        maxItems: 64,
        description: 'Values for In and NotIn; one integer for Gt and Lt; empty for Exists and DoesNotExist.',
        errorMessage: 'must be a list of at most 64 values',
      }),
    ),
  },
  { additionalProperties: false, description: 'A node selector requirement (core/v1 NodeSelectorRequirement).' },
);

/** core/v1 NodeSelectorTerm: its requirements are ANDed. */
export const NodeSelectorTermSchema = Type.Object(
  {
    matchExpressions: Type.Optional(
      Type.Array(NodeSelectorRequirementSchema, { maxItems: 16, description: "Requirements on the node's labels.", errorMessage: 'must be a list of at most 16 requirements' }),
    ),
    matchFields: Type.Optional(
      Type.Array(NodeSelectorRequirementSchema, { maxItems: 16, description: "Requirements on the node's fields.", errorMessage: 'must be a list of at most 16 requirements' }),
    ),
  },
  { additionalProperties: false, description: 'A node selector term; its requirements are ANDed (core/v1 NodeSelectorTerm).' },
);

/** core/v1 LabelSelectorRequirement. */
export const LabelSelectorRequirementSchema = Type.Object(
  {
    key: labelKey('Label key.'),
    operator: operatorOf(LABEL_SELECTOR_OPERATORS, 'In, NotIn, Exists or DoesNotExist.'),
    values: Type.Optional(
      Type.Array(Type.String({ maxLength: 63 }), {
        maxItems: 64,
        description: 'Values for In and NotIn; empty for Exists and DoesNotExist.',
        errorMessage: 'must be a list of at most 64 values',
      }),
    ),
  },
  { additionalProperties: false, description: 'A label selector requirement (core/v1 LabelSelectorRequirement).' },
);

/** meta/v1 LabelSelector. */
export const LabelSelectorSchema = Type.Object(
  {
    matchLabels: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: 63 }), { maxProperties: 64, description: 'Labels the objects must carry, ANDed.' }),
    ),
    matchExpressions: Type.Optional(
      Type.Array(LabelSelectorRequirementSchema, { maxItems: 16, description: 'Requirements, ANDed.', errorMessage: 'must be a list of at most 16 requirements' }),
    ),
  },
  { additionalProperties: false, description: 'A label selector (meta/v1 LabelSelector).' },
);

const labelKeyList = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: LABEL_KEY_MAX_LENGTH }), { maxItems: 16, description, errorMessage: 'must be a list of at most 16 label keys' });

/** core/v1 PodAffinityTerm: pods matching the selector, within a topology domain. */
export const PodAffinityTermSchema = Type.Object(
  {
    labelSelector: Type.Optional(LabelSelectorSchema),
    namespaces: Type.Optional(
      Type.Array(Type.String({ maxLength: 63 }), {
        maxItems: 64,
        description: "Namespaces of the pods to match; absent and no namespaceSelector: the pod's own namespace.",
        errorMessage: 'must be a list of at most 64 namespaces',
      }),
    ),
    topologyKey: labelKey('Node label whose value defines the topology domain, e.g. kubernetes.io/hostname or topology.kubernetes.io/zone.'),
    namespaceSelector: Type.Optional(LabelSelectorSchema),
    matchLabelKeys: Type.Optional(labelKeyList("Keys of the incoming pod's labels whose values are added to labelSelector as In requirements.")),
    mismatchLabelKeys: Type.Optional(labelKeyList("Keys of the incoming pod's labels whose values are added to labelSelector as NotIn requirements.")),
  },
  { additionalProperties: false, description: 'Pods of a topology domain (core/v1 PodAffinityTerm).' },
);

/** core/v1 PodAffinity and PodAntiAffinity have the same shape. */
const podAffinityOf = (kind: 'podAffinity' | 'podAntiAffinity') => {
  const relation = kind === 'podAffinity' ? 'near' : 'away from';
  return Type.Object(
    {
      requiredDuringSchedulingIgnoredDuringExecution: Type.Optional(
        Type.Array(PodAffinityTermSchema, {
          maxItems: 16,
          description: `Terms the pods must be scheduled ${relation}, ANDed.`,
          errorMessage: 'must be a list of at most 16 terms',
        }),
      ),
      preferredDuringSchedulingIgnoredDuringExecution: Type.Optional(
        Type.Array(
          Type.Object(
            { weight: schedulingWeight, podAffinityTerm: PodAffinityTermSchema },
            { additionalProperties: false, description: 'A weighted pod affinity term (core/v1 WeightedPodAffinityTerm).' },
          ),
          { maxItems: 16, description: `Terms the scheduler prefers the pods ${relation}.`, errorMessage: 'must be a list of at most 16 terms' },
        ),
      ),
    },
    {
      additionalProperties: false,
      description: kind === 'podAffinity' ? 'Pods to schedule near (core/v1 PodAffinity).' : 'Pods to schedule away from (core/v1 PodAntiAffinity).',
    },
  );
};

/** core/v1 Affinity: node affinity, pod affinity and pod anti-affinity. */
export const AffinitySchema = Type.Object(
  {
    nodeAffinity: Type.Optional(
      Type.Object(
        {
          requiredDuringSchedulingIgnoredDuringExecution: Type.Optional(
            Type.Object(
              {
                nodeSelectorTerms: Type.Array(NodeSelectorTermSchema, {
                  minItems: 1,
                  maxItems: 16,
                  description: 'Terms, ORed: a node must match one.',
                  errorMessage: 'must be a list of 1 to 16 node selector terms',
                }),
              },
              { additionalProperties: false, description: 'Nodes the pods may be scheduled on (core/v1 NodeSelector).' },
            ),
          ),
          preferredDuringSchedulingIgnoredDuringExecution: Type.Optional(
            Type.Array(
              Type.Object(
                { weight: schedulingWeight, preference: NodeSelectorTermSchema },
                { additionalProperties: false, description: 'A weighted node selector term (core/v1 PreferredSchedulingTerm).' },
              ),
              { maxItems: 16, description: 'Nodes the scheduler prefers for the pods.', errorMessage: 'must be a list of at most 16 terms' },
            ),
          ),
        },
        { additionalProperties: false, description: 'Nodes to schedule on (core/v1 NodeAffinity).' },
      ),
    ),
    podAffinity: Type.Optional(podAffinityOf('podAffinity')),
    podAntiAffinity: Type.Optional(podAffinityOf('podAntiAffinity')),
  },
  { additionalProperties: false, description: 'Scheduling constraints of the pods (core/v1 Affinity).' },
);
