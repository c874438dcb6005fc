/**
 * Reads what an operator project declares, in a process of its own started in the project
 * directory under tsx (`node --import tsx <this file> crd|rbac`), so the project's modules and
 * its copy of @iot-operator/runtime load exactly as when the operator runs. Prints one JSON
 * document on stdout.
 *
 * - `crd`: `{ crds: [{ file, source, object }] }`, calling `crd()` of every API module listed in
 *   operator-ts.json.
 * - `rbac`: `{ declarations, extra }`: `registerControllers` of src/controllers.ts is called
 *   with a recording manager and nothing else (see record.ts) — settings a controller takes
 *   besides must be optional; `extraPermissions` is read as exported.
 * Errors (a missing export, a throwing module) end the process with code 1 and the message.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { apiFiles, readProject } from '../project.ts';
import type { ExtraPermission } from './rbac.ts';
import { declaredType, recordControllers, type RecordableRuntime } from './record.ts';

const projectDir = process.cwd();

async function importProjectModule(relative: string): Promise<Record<string, unknown>> {
  return (await import(pathToFileURL(path.join(projectDir, relative)).href)) as Record<string, unknown>;
}

async function crds() {
  const project = readProject(projectDir);
  const result = [];
  for (const api of project.apis) {
    const files = apiFiles(api);
    const module = await importProjectModule(files.types);
    if (typeof module.crd !== 'function') throw new Error(`${files.types} must export a function crd() returning the CustomResourceDefinition`);
    result.push({ file: files.crd, source: files.types, object: (module.crd as () => unknown)() });
  }
  return { crds: result };
}

function extraPermissions(declared: unknown): ExtraPermission[] {
  if (declared === undefined) return [];
  if (!Array.isArray(declared)) throw new Error('src/controllers.ts: extraPermissions must be an array of { type, verbs, subresource?, reason? }');
  return declared.map((p: ExtraPermission, i) => {
    if (!p?.type || !Array.isArray(p.verbs)) throw new Error(`src/controllers.ts: extraPermissions[${i}] must be { type, verbs, subresource?, reason? }`);
    return { type: declaredType(p.type), verbs: p.verbs, ...(p.subresource ? { subresource: p.subresource } : {}), ...(p.reason ? { reason: p.reason } : {}) };
  });
}

async function rbac() {
  const runtimeFile = createRequire(path.join(projectDir, 'package.json')).resolve('@iot-operator/runtime');
  const runtime = (await import(pathToFileURL(runtimeFile).href)) as RecordableRuntime;
  const controllers = await importProjectModule('src/controllers.ts');
  if (typeof controllers.registerControllers !== 'function') throw new Error('src/controllers.ts must export registerControllers(mgr)');
  const declarations = recordControllers(runtime, controllers.registerControllers as (mgr: unknown) => void);
  return { declarations, extra: extraPermissions(controllers.extraPermissions) };
}

const mode = process.argv[2];
try {
  if (mode !== 'crd' && mode !== 'rbac') throw new Error(`usage: project-worker crd|rbac (got ${mode})`);
  process.stdout.write(JSON.stringify(mode === 'crd' ? await crds() : await rbac()));
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
