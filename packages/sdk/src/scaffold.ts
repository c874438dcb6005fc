/**
 * `operator-ts init`, `operator-ts create api` and `operator-ts create webhook`: write a new
 * project, a new API into one, or a kind's webhooks.
 *
 * Guarantees: input is checked before anything is written (a bad name, group, version or kind,
 * a non-empty target directory, an API that exists, a file that would be overwritten, missing
 * markers in src/controllers.ts or src/webhooks.ts, webhooks of a kind that has them, none of
 * --defaulting, --validating and --conversion: each a clear error, nothing written); a new project's
 * deploy/role.yaml and role_binding.yaml are the generator's, so its checks pass as written.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { rbacFiles } from './generate/generate.ts';
import { checkOperatorName, readProject, writeProject, type ApiDefinition, type Project, type WebhookDefinition } from './project.ts';
import { apiSourceFiles } from './templates/api.ts';
import { initFiles } from './templates/init.ts';
import { webhookSourceFiles, webhooksRegistry } from './templates/webhook.ts';

export const SDK_VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [file, content] of Object.entries(files)) {
    const full = path.join(dir, file);
    mkdirSync(path.dirname(full), { recursive: true });
    writeFileSync(full, content);
  }
}

export interface InitCommandOptions {
  name?: string;
  domain?: string;
  runtimeVersion?: string;
  sdkVersion?: string;
}

export function init(dir: string, options: InitCommandOptions): Project {
  const name = checkOperatorName(options.name ?? path.basename(path.resolve(dir)));
  const domain = checkGroup(options.domain ?? 'example.com', 'domain');
  if (existsSync(dir) && readdirSync(dir).length > 0) throw new Error(`${dir} is not empty: init writes a new project into an empty or new directory`);
  const project: Project = { name, domain, apis: [] };
  const files = {
    ...initFiles({ name, runtimeSpec: options.runtimeVersion ?? `^${SDK_VERSION}`, sdkSpec: options.sdkVersion ?? `^${SDK_VERSION}` }),
    ...rbacFiles(project, [], []),
  };
  writeFiles(dir, files);
  writeProject(dir, project);
  return project;
}

function checkGroup(group: string, what: string): string {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(group) || group.length > 253) {
    throw new Error(`the ${what} "${group}" must be a DNS subdomain: lower-case labels of letters, digits and '-' separated by dots`);
  }
  return group;
}

/** Lower-case English plural of a kind, as kubebuilder makes it. */
export function pluralOf(kind: string): string {
  const lower = kind.toLowerCase();
  if (/[^aeiou]y$/.test(lower)) return `${lower.slice(0, -1)}ies`;
  if (/(s|x|z|ch|sh)$/.test(lower)) return `${lower}es`;
  return `${lower}s`;
}

export interface CreateApiOptions {
  group: string;
  version: string;
  kind: string;
  plural?: string;
  namespaced: boolean;
}

export function createApi(dir: string, options: CreateApiOptions): ApiDefinition {
  const project = readProject(dir);
  const group = checkGroup(options.group.includes('.') ? options.group : `${options.group}.${project.domain}`, 'group');
  if (!/^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$/.test(options.version)) throw new Error(`the version "${options.version}" must look like v1, v1beta1 or v1alpha1`);
  if (!/^[A-Z][A-Za-z0-9]{0,62}$/.test(options.kind)) throw new Error(`the kind "${options.kind}" must be UpperCamelCase letters and digits, e.g. Memcached`);
  const plural = options.plural ?? pluralOf(options.kind);
  if (!/^[a-z][a-z0-9]*$/.test(plural)) throw new Error(`the plural "${plural}" must be lower-case letters and digits`);
  if (project.apis.some((a) => a.kind === options.kind)) throw new Error(`the project already has an API of kind ${options.kind}`);
  const api: ApiDefinition = { group, version: options.version, kind: options.kind, plural, namespaced: options.namespaced };

  const files = apiSourceFiles(project, api);
  const taken = Object.keys(files).filter((file) => existsSync(path.join(dir, file)));
  if (taken.length > 0) throw new Error(`not overwriting ${taken.join(', ')}`);
  const controllersFile = path.join(dir, 'src/controllers.ts');
  const controllers = existsSync(controllersFile) ? readFileSync(controllersFile, 'utf8') : '';
  const importMarker = '// operator-ts:imports';
  const registerMarker = '  // operator-ts:controllers';
  if (!controllers.includes(importMarker) || !controllers.includes(registerMarker)) {
    throw new Error(`src/controllers.ts lacks the markers "${importMarker}" and "${registerMarker.trim()}" that create api adds the controller at`);
  }
  const lower = api.kind.toLowerCase();
  const updated = controllers
    .replace(importMarker, `import { register${api.kind}Controller } from './controllers/${lower}.ts';\n${importMarker}`)
    .replace(registerMarker, `  register${api.kind}Controller(mgr);\n${registerMarker}`);

  writeFiles(dir, files);
  writeFileSync(controllersFile, updated);
  writeProject(dir, { ...project, apis: [...project.apis, api] });
  return api;
}

export interface CreateWebhookOptions {
  kind: string;
  defaulting: boolean;
  validating: boolean;
  conversion: boolean;
  /** For a kind `create api` did not make: its group/version and plural. */
  apiVersion?: string;
  plural?: string;
  namespaced?: boolean;
}

/** Inserts `line` before `marker` in `text`; fails naming the file when the marker is missing. */
function insertAt(text: string, file: string, marker: string, line: string): string {
  if (!text.includes(marker)) throw new Error(`${file} lacks the marker "${marker.trim()}" that create webhook adds the webhooks at`);
  return text.replace(marker, `${line}\n${marker}`);
}

export function createWebhook(dir: string, options: CreateWebhookOptions): WebhookDefinition {
  const project = readProject(dir);
  if (!options.defaulting && !options.validating && !options.conversion) throw new Error('say which webhooks: --defaulting, --validating and/or --conversion');
  if ((project.webhooks ?? []).some((w) => w.kind === options.kind)) throw new Error(`the project already has webhooks of kind ${options.kind}`);
  const api = project.apis.find((a) => a.kind === options.kind);
  let target: Omit<WebhookDefinition, 'defaulting' | 'validating' | 'conversion'>;
  if (api) target = { group: api.group, version: api.version, kind: api.kind, plural: api.plural, namespaced: api.namespaced };
  else {
    const [group, version] = options.apiVersion?.split('/', 2) ?? [];
    if (!group || !version) throw new Error(`the project has no API of kind ${options.kind}: run \`operator-ts create api\` first, or name the kind's --api-version <group>/<version> (and --plural)`);
    if (!/^[A-Z][A-Za-z0-9]{0,62}$/.test(options.kind)) throw new Error(`the kind "${options.kind}" must be UpperCamelCase letters and digits, e.g. Memcached`);
    target = { group: checkGroup(group, 'group'), version, kind: options.kind, plural: options.plural ?? pluralOf(options.kind), namespaced: options.namespaced ?? true };
  }
  const webhook: WebhookDefinition = { ...target, defaulting: options.defaulting, validating: options.validating, conversion: options.conversion };

  const files = webhookSourceFiles(project, webhook);
  const taken = Object.keys(files).filter((file) => existsSync(path.join(dir, file)));
  if (taken.length > 0) throw new Error(`not overwriting ${taken.join(', ')}`);
  const registryFile = 'src/webhooks.ts';
  const registryPath = path.join(dir, registryFile);
  const registry = existsSync(registryPath) ? readFileSync(registryPath, 'utf8') : webhooksRegistry;
  const lower = webhook.kind.toLowerCase();
  let updated = insertAt(registry, registryFile, '// operator-ts:webhook-imports', `import { register${webhook.kind}Webhooks } from './webhooks/${lower}.ts';`);
  updated = insertAt(updated, registryFile, '  // operator-ts:webhook-kinds', `  '${webhook.kind}',`);
  updated = insertAt(updated, registryFile, '  // operator-ts:webhooks', `  register${webhook.kind}Webhooks(mgr);`);

  writeFiles(dir, files);
  writeFileSync(registryPath, updated);
  writeProject(dir, { ...project, webhooks: [...(project.webhooks ?? []), webhook] });
  return webhook;
}
