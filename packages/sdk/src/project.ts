/**
 * The project file of an operator-ts project, `operator-ts.json` (operator-sdk's PROJECT): the
 * operator's name, its API domain, every API that `create api` added, and how its generated
 * RBAC is laid out when not as `init` lays it out.
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

export interface Project {
  /** The operator's name: package, ServiceAccount, Role, Deployment and Lease prefix. */
  name: string;
  /** Appended to a short `--group` of `create api` (cache + example.com = cache.example.com). */
  domain: string;
  apis: ApiDefinition[];
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
  checkRbacSettings(file, project.rbac);
  return project as Project;
}

export function writeProject(dir: string, project: Project): void {
  const apis = [...project.apis].sort((a, b) => `${a.group}/${a.version}/${a.kind}`.localeCompare(`${b.group}/${b.version}/${b.kind}`));
  writeFileSync(path.join(dir, PROJECT_FILE), `${JSON.stringify({ ...project, apis }, null, 2)}\n`);
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

/** Checks the name of an operator: a DNS-1123 label (it names Kubernetes objects). */
export function checkOperatorName(name: string): string {
  if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)) {
    throw new Error(`the operator name "${name}" must be a DNS label: lower-case letters, digits and '-', starting with a letter, at most 63 characters`);
  }
  return name;
}
