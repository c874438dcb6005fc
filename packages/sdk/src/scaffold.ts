/**
 * `operator-ts init` and `operator-ts create api`: write a new project, or a new API into one.
 *
 * Guarantees: input is checked before anything is written (a bad name, group, version or kind,
 * a non-empty target directory, an API that exists, a file that would be overwritten, missing
 * markers in src/controllers.ts: each a clear error, nothing written); a new project's
 * deploy/role.yaml and role_binding.yaml are the generator's, so its checks pass as written.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { rbacFiles } from './generate/generate.ts';
import { checkOperatorName, readProject, writeProject, type ApiDefinition, type Project } from './project.ts';
import { apiSourceFiles } from './templates/api.ts';
import { initFiles } from './templates/init.ts';

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
