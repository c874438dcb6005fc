/**
 * A v1beta1 `placement` that sets every field of the API's scheduling schema with valid values:
 * nodeSelector, every Toleration field, and every field of core/v1 Affinity, the label selectors'
 * included. Tests write it to check that nothing of a stored placement is pruned or lost
 * (crd.unit checks that it sets every field the schema has).
 */

const selector = (component: string) => ({
  matchLabels: { 'app.kubernetes.io/component': component },
  matchExpressions: [{ key: 'app.kubernetes.io/part-of', operator: 'In', values: ['iot'] }],
});

const podAffinityTerm = (component: string) => ({
  labelSelector: selector(component),
  namespaces: ['devawsk8s-tenant-a'],
  topologyKey: 'topology.kubernetes.io/zone',
  namespaceSelector: selector('landscape'),
  matchLabelKeys: ['pod-template-hash'],
  mismatchLabelKeys: ['tenant'],
});

const nodeSelectorTerm = {
  matchExpressions: [{ key: 'node.example.com/cores', operator: 'Gt', values: ['4'] }],
  matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['node-000001'] }],
};

export const FULL_PLACEMENT = {
  nodeSelector: { 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'iot', effect: 'NoExecute', tolerationSeconds: 300 }],
  affinity: {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [nodeSelectorTerm] },
      preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, preference: nodeSelectorTerm }],
    },
    podAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: [podAffinityTerm('broker')],
      preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, podAffinityTerm: podAffinityTerm('database') }],
    },
    podAntiAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: [podAffinityTerm('gateway')],
      preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 50, podAffinityTerm: podAffinityTerm('core') }],
    },
  },
};
