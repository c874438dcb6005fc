/**
 * Test support: whether a CustomResourceDefinition stores the runtime's `Degraded` condition
 * (status/degraded.ts) instead of pruning or refusing it.
 *
 * Guarantees: `degradedConditionProblem(crd)` returns undefined when every served version's
 * status schema has a `conditions` list whose items define `type`, `status`, `reason`,
 * `message` and `lastTransitionTime` (or keep unknown fields), and requires no status field
 * other than `conditions` (a status-less object gets only the condition); otherwise one sentence
 * naming the version and what is missing.
 */

interface SchemaNode {
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  required?: string[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}

interface CrdLike {
  metadata?: { name?: string };
  spec?: unknown;
}

const conditionFields = ['type', 'status', 'reason', 'message', 'lastTransitionTime'];

export function degradedConditionProblem(crd: CrdLike): string | undefined {
  const versions = ((crd.spec as { versions?: Array<{ name: string; served?: boolean; schema?: { openAPIV3Schema?: SchemaNode } }> } | undefined)?.versions ?? []).filter((v) => v.served !== false);
  if (versions.length === 0) return `${crd.metadata?.name}: no served version`;
  for (const version of versions) {
    const where = `${crd.metadata?.name} ${version.name}`;
    const status = version.schema?.openAPIV3Schema?.properties?.status;
    if (!status) return `${where}: no status in the schema`;
    if (status['x-kubernetes-preserve-unknown-fields']) continue;
    const extraRequired = (status.required ?? []).filter((field) => field !== 'conditions');
    if (extraRequired.length > 0) return `${where}: status requires ${extraRequired.join(', ')}, which a condition write alone does not carry`;
    const items = status.properties?.conditions?.items;
    if (!items) return `${where}: status has no conditions list`;
    if (items['x-kubernetes-preserve-unknown-fields']) continue;
    const missing = conditionFields.filter((field) => !items.properties?.[field]);
    if (missing.length > 0) return `${where}: status.conditions items lack ${missing.join(', ')}`;
  }
  return undefined;
}
