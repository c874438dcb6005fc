/**
 * The project file of an operator-ts project, `operator-ts.json` (operator-sdk's PROJECT): the
 * operator's name, its API domain, every API that `create api` added, every kind's webhooks that
 * `create webhook` added, and how its generated RBAC is laid out when not as `init` lays it out.
 *
 * Guarantees: `readProject` fails with the path and the reason when the file is missing or not
 * a valid project (each RBAC setting is checked for its type); `writeProject` writes it sorted the same way every time; `apiFiles` derives
 * every file name of an API from its group, version and kind, so the scaffolder and the
 * generators never disagree on where things are.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const PROJECT_FILE = 'operator-ts.json';

export interface ApiDefinition {
  /** Full API group, e.g. cache.example.com. */
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

/** Where `generate rbac` writes and what it grants besides the declarations; every field optional. */
export interface RbacSettings {
  /** The files holding the Role (or ClusterRole), all the same; default ["deploy/role.yaml"]. A chart's copy goes here too. */
  roleFiles?: string[];
  /** Default "deploy/role_binding.yaml". */
  bindingFile?: string;
  /** A ClusterRole even when every type is namespaced, bound by a RoleBinding in the watched namespace; default false. */
  clusterRole?: boolean;
  /** The operator makes its metrics Service at start-up (`exposeOperatorMetrics`); default true. */
  metricsService?: boolean;
}

/** The webhooks of one kind (`create webhook`): which of defaulting, validating and conversion it has. */
export interface WebhookDefinition {
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
  defaulting: boolean;
  validating: boolean;
  conversion: boolean;
}

export interface Project {
  /** The operator's name: package, ServiceAccount, Role, Deployment and Lease prefix. */
  name: string;
  /** Appended to a short `--group` of `create api` (cache + example.com = cache.example.com). */
  domain: string;
  apis: ApiDefinition[];
  /** Absent until `create webhook` adds the first. */
  webhooks?: WebhookDefinition[];
  /** Where `generate webhook` writes the webhook Service and configurations; default deploy/webhook.yaml (a file directly in deploy/ is a manifest of the OLM bundle). */
  webhookFile?: string;
  rbac?: RbacSettings;
}

function checkRbacSettings(file: string, rbac: unknown): void {
  if (rbac === undefined) return;
  const settings = rbac as Record<string, unknown>;
  const fail = (what: string) => {
    throw new Error(`${file}: "rbac"${what}`);
  };
  if (typeof rbac !== 'object' || rbac === null || Array.isArray(rbac)) fail(' must be an object');
  const known = ['roleFiles', 'bindingFile', 'clusterRole', 'metricsService'];
  for (const key of Object.keys(settings)) if (!known.includes(key)) fail(` has no setting "${key}" (known: ${known.join(', ')})`);
  const { roleFiles, bindingFile, clusterRole, metricsService } = settings;
  if (roleFiles !== undefined && (!Array.isArray(roleFiles) || roleFiles.length === 0 || roleFiles.some((f) => typeof f !== 'string'))) fail('.roleFiles must be a non-empty array of paths');
  if (bindingFile !== undefined && typeof bindingFile !== 'string') fail('.bindingFile must be a path');
  for (const [key, value] of Object.entries({ clusterRole, metricsService })) if (value !== undefined && typeof value !== 'boolean') fail(`.${key} must be true or false`);
}

export function readProject(dir: string): Project {
  const file = path.join(dir, PROJECT_FILE);
  if (!existsSync(file)) throw new Error(`${file} not found: run this command in a project made by \`operator-ts init\``);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file} is not valid JSON: ${(err as Error).message}`);
  }
  const project = parsed as Partial<Project>;
  if (typeof project.name !== 'string' || typeof project.domain !== 'string' || !Array.isArray(project.apis)) {
    throw new Error(`${file} must hold "name" and "domain" strings and an "apis" array`);
  }
  if (project.webhooks !== undefined && (!Array.isArray(project.webhooks) || project.webhooks.some((w) => typeof w?.kind !== 'string' || typeof w.group !== 'string' || typeof w.version !== 'string' || typeof w.plural !== 'string'))) {
    throw new Error(`${file}: "webhooks" must be an array of { group, version, kind, plural, namespaced, defaulting, validating, conversion }`);
  }
  if (project.webhookFile !== undefined && (typeof project.webhookFile !== 'string' || !/\.ya?ml$/.test(project.webhookFile))) throw new Error(`${file}: "webhookFile" must be the path of a .yaml file`);
  checkRbacSettings(file, project.rbac);
  return project as Project;
}

export function writeProject(dir: string, project: Project): void {
  const byName = <T extends { group: string; version: string; kind: string }>(list: T[]) => [...list].sort((a, b) => `${a.group}/${a.version}/${a.kind}`.localeCompare(`${b.group}/${b.version}/${b.kind}`));
  const { webhooks, ...rest } = project;
  writeFileSync(path.join(dir, PROJECT_FILE), `${JSON.stringify({ ...rest, apis: byName(project.apis), ...(webhooks ? { webhooks: byName(webhooks) } : {}) }, null, 2)}\n`);
}

/** The files of one API, relative to the project directory. */
export function apiFiles(api: ApiDefinition) {
  const lower = api.kind.toLowerCase();
  const shortGroup = api.group.split('.')[0];
  return {
    types: `src/api/${lower}.ts`,
    controller: `src/controllers/${lower}.ts`,
    crd: `deploy/crds/${shortGroup}_${api.version}_${lower}_crd.yaml`,
    sample: `deploy/crds/${shortGroup}_${api.version}_${lower}_cr.yaml`,
    unitTest: `test/${lower}.unit.test.ts`,
    e2eTest: `test/${lower}.e2e.test.ts`,
  };
}

/** The file of the webhook Service and configurations (operator-ts.json's webhookFile). */
export function webhookManifestFile(project: Pick<Project, 'webhookFile'>): string {
  return project.webhookFile ?? 'deploy/webhook.yaml';
}

/** The files and URL paths of one kind's webhooks, relative to the project directory. */
export function webhookFiles(webhook: Pick<WebhookDefinition, 'group' | 'version' | 'kind'>) {
  const lower = webhook.kind.toLowerCase();
  const pathSuffix = `${webhook.group.replaceAll('.', '-')}-${webhook.version}-${lower}`;
  return {
    handlers: `src/webhooks/${lower}.ts`,
    unitTest: `test/${lower}-webhook.unit.test.ts`,
    /** kubebuilder's paths /mutate-<group with dashes>-<version>-<kind> and /validate-…; conversion one path per kind (every version converts there). */
    mutatePath: `/mutate-${pathSuffix}`,
    validatePath: `/validate-${pathSuffix}`,
    convertPath: `/convert-${webhook.group.replaceAll('.', '-')}-${lower}`,
  };
}

/** Checks the name of an operator: a DNS-1123 label (it names Kubernetes objects). */
export function checkOperatorName(name: string): string {
  if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)) {
    throw new Error(`the operator name "${name}" must be a DNS label: lower-case letters, digits and '-', starting with a letter, at most 63 characters`);
  }
  return name;
}
