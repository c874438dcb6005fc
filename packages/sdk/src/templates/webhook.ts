/**
 * The files of a kind's webhooks (`operator-ts create webhook`): `src/webhooks/<kind>.ts` beside
 * the kind's controller — a defaulting, a validating and a conversion handler, as asked, and the
 * function registering them with the manager — and, for a kind `create api` made, a unit test of
 * its handlers.
 *
 * Guarantees: the contents depend only on the arguments; the handlers type-check and run as
 * generated. For a kind of `create api` (whose spec is `message`) they do something a user sees:
 * the defaulting handler fills in a missing spec.message, the validating one refuses a blank
 * message; for any other kind they allow everything unchanged until the user fills them in. The
 * conversion handler converts between versions whose fields are the same (it rewrites
 * apiVersion) — a kind whose versions differ needs its field mapping written there.
 */
import { webhookFiles, type Project, type WebhookDefinition } from '../project.ts';

/** What a kind of `create api` is defaulted to when it has no message. */
const DEFAULT_MESSAGE = 'hello from the defaulting webhook';

export function webhookSourceFiles(project: Project, webhook: WebhookDefinition): Record<string, string> {
  const files = webhookFiles(webhook);
  const fromCreateApi = project.apis.some((api) => api.kind === webhook.kind && api.group === webhook.group);
  return {
    [files.handlers]: handlers(webhook, fromCreateApi),
    ...(fromCreateApi && (webhook.defaulting || webhook.validating) ? { [files.unitTest]: unitTest(webhook) } : {}),
  };
}

/** src/webhooks.ts of a new project: every kind's webhooks registered at the markers. */
export const webhooksRegistry = `/**
 * Every webhook of the operator. \`operator-ts create webhook\` adds its kind at the markers
 * below; \`operator-ts generate webhook\` writes deploy/webhook.yaml (the webhook configurations
 * and their Service) for the same kinds, from operator-ts.json.
 * main.ts starts the webhook server only when webhookKinds is not empty.
 */
import type { Manager } from '@iot-operator/runtime';
// operator-ts:webhook-imports

/** The kinds whose webhooks registerWebhooks serves. */
export const webhookKinds: string[] = [
  // operator-ts:webhook-kinds
];

export function registerWebhooks(mgr: Manager): void {
  // operator-ts:webhooks
}
`;

function handlers(w: WebhookDefinition, fromCreateApi: boolean): string {
  const lower = w.kind.toLowerCase();
  const files = webhookFiles(w);
  const objectType = `${w.kind}Object`;
  const runtimeImports = [
    ...(w.validating ? ['allow'] : []),
    ...(w.conversion ? ['conversionWebhook'] : []),
    ...(w.validating ? ['deny'] : []),
    ...(w.defaulting ? ['mutatingWebhook'] : []),
    ...(w.validating ? ['validatingWebhook'] : []),
    ...(fromCreateApi ? [] : ['type KubeObject']),
    'type Manager',
  ];
  const typeImport = fromCreateApi ? `import type { ${objectType} } from '../api/${lower}.ts';\n` : '';
  const localType = fromCreateApi ? '' : `\n/** The ${w.kind} as the webhooks see it: name the fields your handlers read here. */\nexport type ${objectType} = KubeObject & { spec?: Record<string, unknown> };\n`;
  const verbs = [w.defaulting && 'defaults', w.validating && 'validates', w.conversion && 'converts'].filter((v): v is string => !!v);
  const what = verbs.length > 1 ? `${verbs.slice(0, -1).join(', ')} and ${verbs.at(-1)}` : verbs[0];
  const parts: string[] = [];
  const registrations: string[] = [];
  if (w.defaulting) {
    parts.push(`/** The path of the defaulting webhook (deploy/webhook.yaml's MutatingWebhookConfiguration calls it). */
export const DEFAULT_${w.kind.toUpperCase()}_PATH = '${files.mutatePath}';

/**
 * Fills in what a ${w.kind} left out, on create and update, before it is validated and stored.
 * Change the object you are given and return it: the server answers with the JSON patch.
 */
export function default${w.kind}(object: ${objectType}): ${objectType} {
${fromCreateApi ? `  if (!object.spec?.message) object.spec = { ...object.spec, message: '${DEFAULT_MESSAGE}' };` : `  // TODO(user): fill in your defaulting logic, e.g. object.spec = { size: 1, ...object.spec };`}
  return object;
}
`);
    registrations.push(`  mgr.addWebhook(DEFAULT_${w.kind.toUpperCase()}_PATH, mutatingWebhook<${objectType}>((object) => default${w.kind}(object)));`);
  }
  if (w.validating) {
    parts.push(`/** The path of the validating webhook (deploy/webhook.yaml's ValidatingWebhookConfiguration calls it). */
export const VALIDATE_${w.kind.toUpperCase()}_PATH = '${files.validatePath}';

/**
 * Why a ${w.kind} may not be created or updated as it is (the API server's error message), or
 * undefined when it may. \`old\` is the stored object on update.
 */
export function validate${w.kind}(object: ${objectType}, old?: ${objectType}): string | undefined {
${fromCreateApi ? `  void old;\n  if (object.spec?.message?.trim() === '') return 'spec.message must not be blank';` : `  void object;\n  void old;\n  // TODO(user): fill in your validation logic: return the reason to refuse.`}
  return undefined;
}
`);
    registrations.push(`  mgr.addWebhook(VALIDATE_${w.kind.toUpperCase()}_PATH, validatingWebhook<${objectType}>((request) => {
    if (request.operation === 'DELETE') return allow();
    const reason = validate${w.kind}(request.object!, request.oldObject ?? undefined);
    return reason === undefined ? allow() : deny(reason);
  }));`);
  }
  if (w.conversion) {
    parts.push(`/** The path of the conversion webhook (the CRD's spec.conversion calls it). */
export const CONVERT_${w.kind.toUpperCase()}_PATH = '${files.convertPath}';

/**
 * \`object\` (any served version of ${w.kind}) as \`desiredAPIVersion\`. As generated, the
 * versions have the same fields; when they differ, map the fields here, both ways.
 */
export function convert${w.kind}(object: ${objectType}, desiredAPIVersion: string): ${objectType} {
  return { ...object, apiVersion: desiredAPIVersion };
}
`);
    registrations.push(`  mgr.addWebhook(CONVERT_${w.kind.toUpperCase()}_PATH, conversionWebhook((object, desiredAPIVersion) => convert${w.kind}(object as ${objectType}, desiredAPIVersion)));`);
  }
  return `/**
 * The webhooks of ${w.kind} (${w.group}/${w.version}): the API server calls them, over HTTPS, as
 * ${w.conversion ? 'deploy/webhook.yaml and the CRD say' : 'deploy/webhook.yaml says'}; this operator ${what} ${w.plural}.
 * Each handler is a plain function of the object, so unit tests call it directly.
 */
import { ${runtimeImports.join(', ')} } from '@iot-operator/runtime';
${typeImport}${localType}
${parts.join('\n')}
export function register${w.kind}Webhooks(mgr: Manager): void {
${registrations.join('\n')}
}
`;
}

function unitTest(w: WebhookDefinition): string {
  const lower = w.kind.toLowerCase();
  const imports = [...(w.defaulting ? [`default${w.kind}`] : []), ...(w.validating ? [`validate${w.kind}`] : [])];
  const object = `{ apiVersion: '${w.group}/${w.version}', kind: '${w.kind}', metadata: { name: 'example' }, spec: { message: 'hello' } }`;
  const tests: string[] = [];
  if (w.defaulting) {
    tests.push(`test('a ${w.kind} without a message gets the default one; a message given is kept', () => {
  const defaulted = default${w.kind}({ ...${object}, spec: {} } as unknown as ${w.kind}Object);
  assert.equal(defaulted.spec.message, '${DEFAULT_MESSAGE}');
  assert.equal(default${w.kind}(${object}).spec.message, 'hello');
});`);
  }
  if (w.validating) {
    tests.push(`test('a blank message is refused, saying why; any other is allowed', () => {
  assert.equal(validate${w.kind}({ ...${object}, spec: { message: '  ' } }), 'spec.message must not be blank');
  assert.equal(validate${w.kind}(${object}), undefined);
});`);
  }
  return `/**
 * The ${w.kind} webhook handlers as plain functions: what the API server's admission requests
 * get from them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ${w.kind}Object } from '../src/api/${lower}.ts';
import { ${imports.join(', ')} } from '../src/webhooks/${lower}.ts';

${tests.join('\n\n')}
`;
}
