/**
 * Reads what an operator project declares, in a process of its own started in the project
 * directory under tsx (`node --import tsx <this file> crd|rbac`), so the project's modules and
 * its copy of @iot-operator/runtime load exactly as when the operator runs. Prints one JSON
 * document on stdout.
 *
 * - `crd`: `{ crds: [{ file, source, object }] }`, calling `crd()` of every API module listed in
 *   operator-ts.json.
 * - `rbac`: `{ declarations, extra }`: `registerControllers` of src/controllers.ts runs against
 *   a recording manager — nothing connects to a cluster, no controller starts — while the
 *   runtime's ControllerBuilder records every `for`, `owns`, `watches` and `watchesSelected`
 *   call; `extraPermissions` is read as exported.
 * Errors (a missing export, a throwing module) end the process with code 1 and the message.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { apiFiles, readProject } from '../project.ts';
import type { ControllerDeclaration, DeclaredType, ExtraPermission } from './rbac.ts';

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

function declaredType(type: DeclaredType): DeclaredType {
  return { group: type.group, kind: type.kind, plural: type.plural, namespaced: type.namespaced };
}

async function rbac() {
  const runtimeFile = createRequire(path.join(projectDir, 'package.json')).resolve('@iot-operator/runtime');
  const runtime = await import(pathToFileURL(runtimeFile).href);
  const builder = runtime.ControllerBuilder.prototype as Record<string, (...args: unknown[]) => unknown>;
  const declarations: ControllerDeclaration[] = [];
  const record = (method: string, role: ControllerDeclaration['role']) => {
    const original = builder[method]!;
    builder[method] = function (this: unknown, ...args: unknown[]) {
      declarations.push({ role, type: declaredType(args[0] as DeclaredType) });
      return original.apply(this, args);
    };
  };
  record('for', 'for');
  record('owns', 'owns');
  record('watches', 'watches');
  record('watchesSelected', 'watches');

  const informer = { store: { keys: () => [] }, addHandler: () => undefined };
  const logger = { child: () => logger, info: () => undefined, debug: () => undefined, warn: () => undefined, error: () => undefined };
  const recordingManager = {
    cache: { informer: () => informer },
    client: {},
    metrics: new runtime.RuntimeMetrics(),
    logger,
    recorder: {},
    addController: () => undefined,
  };
  const controllers = await importProjectModule('src/controllers.ts');
  if (typeof controllers.registerControllers !== 'function') throw new Error('src/controllers.ts must export registerControllers(mgr)');
  (controllers.registerControllers as (mgr: unknown) => void)(recordingManager);
  const extra = ((controllers.extraPermissions ?? []) as ExtraPermission[]).map((p) => ({ ...p, type: declaredType(p.type) }));
  return { declarations, extra };
}

const mode = process.argv[2];
try {
  if (mode !== 'crd' && mode !== 'rbac') throw new Error(`usage: project-worker crd|rbac (got ${mode})`);
  process.stdout.write(JSON.stringify(mode === 'crd' ? await crds() : await rbac()));
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
