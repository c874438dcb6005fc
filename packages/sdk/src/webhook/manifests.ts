/**
 * The Kubernetes objects that make the API server call a project's webhooks, from
 * operator-ts.json's `webhooks`: a MutatingWebhookConfiguration (every defaulting webhook), a
 * ValidatingWebhookConfiguration (every validating one), the Service in front of the operator's
 * webhook server, and each converting kind's CRD `spec.conversion`.
 *
 * Two forms, the same webhooks:
 * - in the cluster (`clusterWebhookObjects`, written to deploy/webhook.yaml by `generate webhook`):
 *   clientConfig.service names `<operator>-webhook-service` in REPLACE_NAMESPACE (which `deploy`
 *   replaces), port 443 → the pod's 9443; no caBundle (`deploy` adds the CA it made);
 * - out of cluster (`localWebhookObjects`, for `operator-ts webhook local` and `npm start`):
 *   clientConfig.url https://127.0.0.1:<port><path> with the local CA as caBundle.
 * Every webhook: admissionReviewVersions [v1], sideEffects None, failurePolicy Fail, timeoutSeconds
 * 10, rules CREATE and UPDATE of the kind's plural in its group and version (matchPolicy
 * Equivalent, the API server's default, sends other versions converted). Conversion: strategy
 * Webhook, conversionReviewVersions [v1].
 */
import { webhookFiles, type Project, type WebhookDefinition } from '../project.ts';

export const WEBHOOK_PORT = 9443;
export type ClientConfig = { service: { name: string; namespace: string; path: string; port: number }; caBundle?: string } | { url: string; caBundle: string };
type Where = (path: string) => ClientConfig;

export function webhookServiceName(project: Pick<Project, 'name'>): string {
  return `${project.name}-webhook-service`;
}
export function webhookSecretName(project: Pick<Project, 'name'>): string {
  return `${project.name}-webhook-cert`;
}
export function configurationNames(project: Pick<Project, 'name'>) {
  return { mutating: `${project.name}-mutating-webhook-configuration`, validating: `${project.name}-validating-webhook-configuration` };
}

function entry(w: WebhookDefinition, prefix: 'm' | 'v', path: string, where: Where) {
  return {
    name: `${prefix}${w.kind.toLowerCase()}-${w.version}.${w.group}`,
    clientConfig: where(path),
    rules: [{ apiGroups: [w.group], apiVersions: [w.version], operations: ['CREATE', 'UPDATE'], resources: [w.plural], scope: w.namespaced ? 'Namespaced' : 'Cluster' }],
    failurePolicy: 'Fail',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 10,
  };
}

/** The admission configurations (only those with webhooks) for clientConfigs made by `where`. */
function configurations(project: Project, where: Where): Array<Record<string, unknown>> {
  const webhooks = project.webhooks ?? [];
  const names = configurationNames(project);
  const mutating = webhooks.filter((w) => w.defaulting).map((w) => entry(w, 'm', webhookFiles(w).mutatePath, where));
  const validating = webhooks.filter((w) => w.validating).map((w) => entry(w, 'v', webhookFiles(w).validatePath, where));
  const labels = { 'app.kubernetes.io/managed-by': 'operator-ts', 'app.kubernetes.io/name': project.name };
  return [
    ...(mutating.length > 0 ? [{ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: names.mutating, labels }, webhooks: mutating }] : []),
    ...(validating.length > 0 ? [{ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: names.validating, labels }, webhooks: validating }] : []),
  ];
}

/** The CRD `spec.conversion` of a converting kind, or undefined when the kind does not convert. */
export function conversionStanza(project: Project, group: string, kind: string, where: Where = clusterClientConfig(project)): Record<string, unknown> | undefined {
  const webhook = project.webhooks?.find((w) => w.group === group && w.kind === kind && w.conversion);
  if (!webhook) return undefined;
  return { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: where(webhookFiles(webhook).convertPath) } };
}

export function clusterClientConfig(project: Project, caBundle?: string, namespace = 'REPLACE_NAMESPACE'): Where {
  return (path) => ({ service: { name: webhookServiceName(project), namespace, path, port: 443 }, ...(caBundle ? { caBundle } : {}) });
}

/** deploy/webhook.yaml's objects: the Service, then the configurations. Empty without webhooks. */
export function clusterWebhookObjects(project: Project): Array<Record<string, unknown>> {
  const admission = configurations(project, clusterClientConfig(project));
  if ((project.webhooks ?? []).length === 0) return [];
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: webhookServiceName(project), labels: { 'app.kubernetes.io/name': project.name } },
    spec: { selector: { 'app.kubernetes.io/name': project.name }, ports: [{ name: 'webhook', port: 443, targetPort: WEBHOOK_PORT, protocol: 'TCP' }] },
  };
  return [service, ...admission];
}

/** The configurations for an operator run out of cluster, its webhook server on 127.0.0.1:`port`, `caPem` its CA. */
export function localWebhookObjects(project: Project, port: number, caPem: string) {
  const where = localClientConfig(port, caPem);
  const conversions = (project.webhooks ?? []).filter((w) => w.conversion).map((w) => ({ crd: `${w.plural}.${w.group}`, conversion: conversionStanza(project, w.group, w.kind, where)! }));
  return { configurations: configurations(project, where), conversions };
}

export function localClientConfig(port: number, caPem: string): Where {
  return (path) => ({ url: `https://127.0.0.1:${port}${path}`, caBundle: Buffer.from(caPem).toString('base64') });
}
